// Device side of PyTorch's CUDA Philox state (the launcher gets it from CudaLaunch::philox). Read on
// the device, so a captured CUDA graph draws fresh numbers on every replay and no op syncs with the
// host. at::cuda::philox::unpack does the same, but its header needs <tuple> and its declarations
// cost nvcc more than these few lines.
#pragma once
#include <ATen/cuda/PhiloxCudaState.h>

#include "philox.h"

namespace jk {

// The seed and the counter offset of this launch: under graph capture both are read through the
// state's pointers (the offset plus this launch's share within the graph), otherwise they are values.
__device__ __forceinline__ PhiloxSeed unpack_philox(const at::PhiloxCudaState& state) {
  if (state.captured_)
    return PhiloxSeed{static_cast<uint64_t>(*state.seed_.ptr),
                      static_cast<uint64_t>(*state.offset_.ptr + state.offset_intragraph_)};
  return PhiloxSeed{state.seed_.val, state.offset_.val};
}

}  // namespace jk
