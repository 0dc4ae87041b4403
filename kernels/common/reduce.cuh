// Block and warp reductions, written once for every family's CUDA kernels.
#pragma once
#include <cuda_runtime.h>

namespace jk {

struct SumOp {
  template <typename T>
  __device__ __forceinline__ T operator()(T a, T b) const { return a + b; }
};

struct MaxOp {  // for floating types, fmax's: a NaN operand loses to a number
  template <typename T>
  __device__ __forceinline__ T operator()(T a, T b) const { return max(a, b); }
};

template <typename T, typename Op>
__device__ __forceinline__ T warp_reduce(T value, Op op) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) value = op(value, __shfl_xor_sync(0xffffffffu, value, offset));
  return value;
}

template <typename T>
__device__ __forceinline__ T warp_sum(T value) { return warp_reduce(value, SumOp{}); }

template <typename T>
__device__ __forceinline__ T warp_max(T value) { return warp_reduce(value, MaxOp{}); }

// op over all threads of the block (`identity`: op's neutral value); every thread gets the result.
// `scratch` holds at least blockDim.x / 32 values. Call from every thread of the block.
template <typename T, typename Op>
__device__ __forceinline__ T block_reduce(T value, T* scratch, Op op, T identity) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = (blockDim.x + 31) / 32;
  value = warp_reduce(value, op);
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = value;
  __syncthreads();
  value = lane < warps ? scratch[lane] : identity;
  return warp_reduce(value, op);
}

template <typename T>
__device__ __forceinline__ T block_sum(T value, T* scratch) { return block_reduce(value, scratch, SumOp{}, T(0)); }

}  // namespace jk
