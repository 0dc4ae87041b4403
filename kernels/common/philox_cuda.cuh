// Philox seeds for CUDA kernels from PyTorch's CUDA generator. The state is read
// on the device (at::cuda::philox::unpack), so a captured CUDA graph draws fresh
// numbers on every replay and no op syncs with the host.
#pragma once
#include <ATen/cuda/CUDAGeneratorImpl.h>
#include <ATen/cuda/PhiloxUtils.cuh>

#include <mutex>
#include <optional>

#include "philox.h"

namespace jk {

// Reserve `draws` 32-bit numbers (rounded up to a multiple of 4) from the generator.
inline at::PhiloxCudaState cuda_philox_state(uint64_t draws,
                                             const std::optional<at::Generator>& generator = std::nullopt) {
  auto* gen = at::get_generator_or_default<at::CUDAGeneratorImpl>(generator,
                                                                  at::cuda::detail::getDefaultCUDAGenerator());
  std::lock_guard<std::mutex> lock(gen->mutex_);
  return gen->philox_cuda_state((draws + 3) / 4 * 4);
}

// Device side: the seed and the counter offset of this launch.
__device__ inline PhiloxSeed unpack_philox(const at::PhiloxCudaState& state) {
  const auto seeds = at::cuda::philox::unpack(state);
  return PhiloxSeed{std::get<0>(seeds), std::get<1>(seeds)};
}

}  // namespace jk
