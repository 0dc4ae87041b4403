// The CUDA elementwise launcher, written once: a family hands it a small functor.
// 16-byte vector accesses when every pointer is aligned, a scalar tail, 64-bit
// indexing, grid-stride loop. Raw pointers, a stream and an error code, no tensor headers
// (cuda_launch.cuh says why).
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <utility>

#include "cuda_launch.cuh"  // jk::query_multiprocessor_count

namespace jk {

// Whether p may be read or written as 16-byte vectors.
inline bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

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

// out[i] = op(in[i]...) for n contiguous elements of one dtype T, on the current device and `stream`.
// Returns the launch's error (the caller checks it: JK_CUDA_CHECK).
template <typename T, typename Op, typename... In>
cudaError_t launch_elementwise(cudaStream_t stream, T* out, int64_t n, Op op, const In*... in) {
  if (n == 0) return cudaSuccess;
  int device = 0, multiprocessors = 0;
  cudaError_t error = cudaGetDevice(&device);
  if (error == cudaSuccess) error = query_multiprocessor_count(device, &multiprocessors);
  if (error != cudaSuccess) return error;
  constexpr int kVec = 16 / sizeof(T);
  const bool aligned = aligned16(out) && (aligned16(in) && ...);
  const int64_t vectors = aligned ? n / kVec : n;
  // One tile per block up to a cap; past it the blocks loop (grid-stride over tiles).
  const int64_t max_blocks = static_cast<int64_t>(multiprocessors) * 256;
  const int64_t blocks = std::max<int64_t>(1, std::min((vectors + kThreads * kUnroll - 1) / (kThreads * kUnroll), max_blocks));
  if (aligned) {
    elementwise_kernel<kVec><<<blocks, kThreads, 0, stream>>>(out, n, op, in...);
  } else {
    elementwise_kernel<1><<<blocks, kThreads, 0, stream>>>(out, n, op, in...);
  }
  return cudaGetLastError();
}

}  // namespace jk
