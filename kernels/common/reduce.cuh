// Block and warp reductions, written once for every family's CUDA kernels.
#pragma once
#include <cuda_runtime.h>

namespace jk {

template <typename T>
__device__ __forceinline__ T warp_sum(T value) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) value += __shfl_xor_sync(0xffffffffu, value, offset);
  return value;
}

template <typename T>
__device__ __forceinline__ T warp_max(T value) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) value = max(value, __shfl_xor_sync(0xffffffffu, value, offset));
  return value;
}

// Sum over all threads of the block; every thread gets the total. `scratch` holds
// at least blockDim.x / 32 values. Call from every thread of the block.
template <typename T>
__device__ __forceinline__ T block_sum(T value, T* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = (blockDim.x + 31) / 32;
  value = warp_sum(value);
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = value;
  __syncthreads();
  value = lane < warps ? scratch[lane] : T(0);
  return warp_sum(value);
}

}  // namespace jk
