// Where Philox seeds come from: PyTorch's CPU and CUDA generators (host only, the .cpp files), so
// torch.manual_seed reproduces every draw. The CUDA state is read on the device (philox_cuda.cuh), so
// a captured CUDA graph draws fresh numbers on every replay and no op syncs with the host.
#pragma once
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Generator.h>
#ifdef JK_WITH_CUDA
#include <ATen/cuda/CUDAGeneratorImpl.h>
#endif

#include <mutex>
#include <optional>

#include "philox.h"

namespace jk {

// A fresh seed for a CPU op from the (default or given) CPU generator.
inline PhiloxSeed cpu_philox_seed(const std::optional<at::Generator>& generator = std::nullopt) {
  auto* gen = at::get_generator_or_default<at::CPUGeneratorImpl>(generator, at::detail::getDefaultCPUGenerator());
  std::lock_guard<std::mutex> lock(gen->mutex_);
  return PhiloxSeed{gen->random64(), 0};
}

#ifdef JK_WITH_CUDA
// Reserve `draws` 32-bit numbers (rounded up to a multiple of 4) from the (default or given) CUDA
// generator.
inline at::PhiloxCudaState cuda_philox_state(uint64_t draws,
                                             const std::optional<at::Generator>& generator = std::nullopt) {
  auto* gen = at::get_generator_or_default<at::CUDAGeneratorImpl>(generator,
                                                                  at::cuda::detail::getDefaultCUDAGenerator());
  std::lock_guard<std::mutex> lock(gen->mutex_);
  return gen->philox_cuda_state((draws + 3) / 4 * 4);
}
#endif

}  // namespace jk
