// The CUDA elementwise launcher, written once: a family hands it a small functor.
// 16-byte vector accesses when every pointer is aligned, a scalar tail, 64-bit
// indexing, grid-stride loop, the current stream, and a checked launch.
#pragma once
#include <ATen/core/Tensor.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <cstdint>
#include <utility>

namespace jk {

template <typename T, int kVec>
struct alignas(sizeof(T) * kVec) Vec {
  T val[kVec];
};

template <typename T, int kVec, typename Op, size_t... I>
__device__ __forceinline__ T apply_lane(const Op& op, const Vec<T, kVec>* loaded, int lane,
                                        std::index_sequence<I...>) {
  return op(loaded[I].val[lane]...);
}

template <int kVec, typename T, typename Op, typename... In>
__global__ void elementwise_kernel(T* __restrict__ out, int64_t n, Op op, const In* __restrict__... in) {
  using V = Vec<T, kVec>;
  const int64_t n_vec = n / kVec;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (int64_t v = first; v < n_vec; v += stride) {
    const V loaded[] = {reinterpret_cast<const V*>(in)[v]...};  // all loads issued before use
    V result;
#pragma unroll
    for (int lane = 0; lane < kVec; ++lane)
      result.val[lane] = apply_lane<T, kVec>(op, loaded, lane, std::index_sequence_for<In...>{});
    reinterpret_cast<V*>(out)[v] = result;
  }
  for (int64_t i = n_vec * kVec + first; i < n; i += stride) out[i] = op(in[i]...);  // tail
}

inline int multiprocessor_count(int device) {
  static int cached[64] = {0};
  if (device < 0 || device >= 64) device = 0;
  if (cached[device] == 0) {
    C10_CUDA_CHECK(cudaDeviceGetAttribute(&cached[device], cudaDevAttrMultiProcessorCount, device));
  }
  return cached[device];
}

// out[i] = op(inputs[i]...) for contiguous CUDA tensors of one dtype T and equal numel.
template <typename T, typename Op, typename... Tensors>
void cuda_elementwise(const at::Tensor& out, Op op, const Tensors&... inputs) {
  const int64_t n = out.numel();
  if (n == 0) return;
  c10::cuda::CUDAGuard guard(out.device());
  constexpr int kVec = 16 / sizeof(T);
  constexpr int kThreads = 256;
  T* out_ptr = out.mutable_data_ptr<T>();
  const bool aligned = ((reinterpret_cast<uintptr_t>(out_ptr) % 16) | ... |
                        (reinterpret_cast<uintptr_t>(inputs.template const_data_ptr<T>()) % 16)) == 0;
  const int64_t work = aligned ? (n + kVec - 1) / kVec : n;
  const int64_t max_blocks = static_cast<int64_t>(multiprocessor_count(out.get_device())) * (2048 / kThreads);
  const int64_t blocks = std::min((work + kThreads - 1) / kThreads, max_blocks);
  auto stream = c10::cuda::getCurrentCUDAStream();
  if (aligned) {
    elementwise_kernel<kVec><<<blocks, kThreads, 0, stream>>>(out_ptr, n, op,
                                                              inputs.template const_data_ptr<T>()...);
  } else {
    elementwise_kernel<1><<<blocks, kThreads, 0, stream>>>(out_ptr, n, op, inputs.template const_data_ptr<T>()...);
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace jk
