// The .cpp side of cuda_launch.cuh: TorchCudaLaunch is one op call's CudaLaunch, made where the op
// has checked its arguments and before it calls its .cu launcher:
//   jk::TorchCudaLaunch launch(x.device(), generator);  // device guard; stream; scratch; draws
//   normal_cuda(launch, out, mean, std);                // at::Tensor arguments become CudaTensor
// Host only (g++), CUDA builds only (JK_WITH_CUDA).
#pragma once
#include <ATen/core/Tensor.h>
#include <ATen/cuda/EmptyTensor.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <optional>
#include <vector>

#include "cuda_launch.cuh"
#include "philox_seeds.h"

namespace jk {

static_assert(static_cast<int>(DType::f16) == static_cast<int>(at::kHalf) &&
                  static_cast<int>(DType::f32) == static_cast<int>(at::kFloat) &&
                  static_cast<int>(DType::f64) == static_cast<int>(at::kDouble) &&
                  static_cast<int>(DType::bf16) == static_cast<int>(at::kBFloat16),
              "jk::DType must number dtypes as c10::ScalarType does");

class TorchCudaLaunch final : public CudaLaunch {
 public:
  explicit TorchCudaLaunch(c10::Device device, std::optional<at::Generator> generator = std::nullopt)
      : guard_(device), generator_(std::move(generator)) {
    this->device = device.index();
    stream = c10::cuda::getCurrentCUDAStream(device.index()).stream();
    check(query_multiprocessor_count(device.index(), &multiprocessors), __FILE__, __LINE__);
  }

  void check(cudaError_t error, const char* file, int line) const override {
    if (error != cudaSuccess)
      c10::cuda::c10_cuda_check_implementation(static_cast<int32_t>(error), file, "", static_cast<uint32_t>(line),
                                               true);
  }

  void* scratch(int64_t bytes) override {
    scratch_.push_back(at::detail::empty_cuda({bytes}, at::kByte, guard_.current_device(), std::nullopt));
    return scratch_.back().mutable_data_ptr();
  }

  at::PhiloxCudaState philox(uint64_t draws) override { return cuda_philox_state(draws, generator_); }

 private:
  c10::cuda::CUDAGuard guard_;
  std::optional<at::Generator> generator_;
  std::vector<at::TensorBase> scratch_;
};

}  // namespace jk
