// The .cpp side of cuda_launch.cuh: TorchCudaLaunch is one op call's CudaLaunch, made where the op
// has checked its arguments and before it calls its .cu launcher:
//   jk::TorchCudaLaunch launch(x.device(), generator);  // device guard; stream; scratch; draws
//   normal_cuda(launch, out, mean, std);                // at::Tensor arguments become CudaTensor
// Host only (g++), CUDA builds only (JK_WITH_CUDA).
#pragma once
#include <ATen/core/Tensor.h>
#include <ATen/cuda/EmptyTensor.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAFunctions.h>
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

// What c10::cuda::CUDAGuard does (its CUDAGuardImpl makes the same two calls): make `device` current and
// restore the previous device on exit. Without CUDAGuard's header and the device-guard machinery it
// instantiates, which cost g++ ~1 s in every .cpp that includes this file (ebm_chains.cpp 12.1 -> 13.2 s,
// dev machine, session 29; its g++ time is the ebm build's longest).
class DeviceSwitch {
 public:
  explicit DeviceSwitch(c10::DeviceIndex device) : previous_(c10::cuda::ExchangeDevice(device)) {}
  ~DeviceSwitch() { static_cast<void>(c10::cuda::MaybeSetDevice(previous_)); }
  DeviceSwitch(const DeviceSwitch&) = delete;
  DeviceSwitch& operator=(const DeviceSwitch&) = delete;

 private:
  c10::DeviceIndex previous_;
};

class TorchCudaLaunch final : public CudaLaunch {
 public:
  explicit TorchCudaLaunch(c10::Device device, std::optional<at::Generator> generator = std::nullopt)
      : device_switch_(device.index()), cuda_device_(device), generator_(std::move(generator)) {
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
    scratch_.push_back(at::detail::empty_cuda({bytes}, at::kByte, cuda_device_, std::nullopt));
    return scratch_.back().mutable_data_ptr();
  }

  at::PhiloxCudaState philox(uint64_t draws) override { return cuda_philox_state(draws, generator_); }

 private:
  DeviceSwitch device_switch_;
  c10::Device cuda_device_;
  std::optional<at::Generator> generator_;
  std::vector<at::TensorBase> scratch_;
};

}  // namespace jk
