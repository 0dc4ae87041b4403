// The CUDA elementwise launcher, written once: a family hands it a small functor.
// 16-byte vector accesses when every pointer is aligned, a scalar tail, 64-bit
// indexing, grid-stride loop, the current stream, and a checked launch.
#pragma once
#include <ATen/core/TensorBase.h>  // not Tensor.h: its operator declarations cost nvcc ~1 s a file
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

// Each block handles tiles of kThreads * kUnroll vectors; a thread issues all its
// loads (kUnroll vectors of every input) before it computes and stores any result.
// Small tiles (the shape torch.compile's pointwise kernels take): on the H200, 128 threads x 2
// vectors ran 2-3% faster than 256 x 4 (or 128 x 4, or 256 x 8) for one and two inputs, which
// put one-input ops level with torch.compile (results/session11/elementwise_ab).
constexpr int kThreads = 128;
constexpr int kUnroll = 2;

template <int kVec, typename T, typename Op, typename... In>
__global__ void __launch_bounds__(kThreads) elementwise_kernel(T* __restrict__ out, int64_t n, Op op,
                                                                 const In* __restrict__... in) {
  using V = Vec<T, kVec>;
  constexpr int kInputs = sizeof...(In);
  const int64_t n_vec = n / kVec;
  const int64_t tile = static_cast<int64_t>(kThreads) * kUnroll;
  for (int64_t base = blockIdx.x * tile; base < n_vec; base += static_cast<int64_t>(gridDim.x) * tile) {
    V loaded[kUnroll][kInputs];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t v = base + u * kThreads + threadIdx.x;
      if (v < n_vec) {
        int k = 0;
        ((loaded[u][k++] = reinterpret_cast<const V*>(in)[v]), ...);
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t v = base + u * kThreads + threadIdx.x;
      if (v < n_vec) {
        V result;
#pragma unroll
        for (int lane = 0; lane < kVec; ++lane)
          result.val[lane] = apply_lane<T, kVec>(op, loaded[u], lane, std::index_sequence_for<In...>{});
        reinterpret_cast<V*>(out)[v] = result;
      }
    }
  }
  // The last n % kVec elements, one per thread of block 0.
  const int64_t i = n_vec * kVec + threadIdx.x;
  if (blockIdx.x == 0 && i < n) out[i] = op(in[i]...);
}

inline int multiprocessor_count(int device) {
  static int cached[64] = {0};
  if (device < 0 || device >= 64) device = 0;
  if (cached[device] == 0) {
    C10_CUDA_CHECK(cudaDeviceGetAttribute(&cached[device], cudaDevAttrMultiProcessorCount, device));
  }
  return cached[device];
}

// Blocks of `kernel` at `threads` threads (no dynamic shared memory) that fit on one SM at once,
// at least 1: times multiprocessor_count, the grid of one full wave.
template <typename Kernel>
int blocks_per_sm(Kernel kernel, int threads) {
  int count = 0;
  C10_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&count, kernel, threads, 0));
  return count > 1 ? count : 1;
}

// out[i] = op(inputs[i]...) for contiguous CUDA tensors of one dtype T and equal numel.
template <typename T, typename Op, typename... Tensors>
void cuda_elementwise(const at::TensorBase& out, Op op, const Tensors&... inputs) {
  const int64_t n = out.numel();
  if (n == 0) return;
  c10::cuda::CUDAGuard guard(out.device());
  constexpr int kVec = 16 / sizeof(T);
  T* out_ptr = out.mutable_data_ptr<T>();
  const bool aligned = ((reinterpret_cast<uintptr_t>(out_ptr) % 16) | ... |
                        (reinterpret_cast<uintptr_t>(inputs.template const_data_ptr<T>()) % 16)) == 0;
  const int64_t vectors = aligned ? n / kVec : n;
  // One tile per block up to a cap; past it the blocks loop (grid-stride over tiles).
  const int64_t max_blocks = static_cast<int64_t>(multiprocessor_count(out.get_device())) * 256;
  const int64_t blocks = std::max<int64_t>(1, std::min((vectors + kThreads * kUnroll - 1) / (kThreads * kUnroll), max_blocks));
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
