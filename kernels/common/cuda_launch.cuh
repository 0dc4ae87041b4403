// What a family's .cu launchers see of PyTorch: tensors as pointer + shape + dtype (CudaTensor) and
// one CudaLaunch per op call (the stream, scratch memory, Philox draws, error checks), both built by
// the family's .cpp (cuda_host.h). So a .cu includes no tensor, dispatch or c10 CUDA header, which
// cost nvcc ~6 s per file before its own code (ATen/core/TensorBase.h 6.5 s, c10/cuda/CUDAGuard.h
// 6.6 s, ATen/Dispatch.h 4.0 s, against 0.8 s for an empty file: dev machine, session 29), and
// editing a kernel and reloading stays quick.
#pragma once
#include <ATen/cuda/PhiloxCudaState.h>  // a plain struct (no other torch header)
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <stdexcept>

namespace jk {

// A tensor's dtype, numbered as c10::ScalarType numbers them (cuda_host.h checks that they agree).
enum class DType : int8_t { f16 = 5, f32 = 6, f64 = 7, bf16 = 15 };

// A tensor as a .cu launcher needs it; implicitly made from an at::Tensor in the .cpp (the template
// constructor is only instantiated there). Valid while that tensor lives: the op's call. An absent
// (undefined) tensor has null data pointers, so an optional argument's pointer needs no check.
struct CudaTensor {
  void* data = nullptr;
  const int64_t* sizes = nullptr;
  int64_t dims = 0;
  int64_t count = 0;
  int device = -1;
  DType dtype = DType::f32;
  bool is_defined = false;

  CudaTensor() = default;
  template <typename Tensor>
  CudaTensor(const Tensor& t) {  // NOLINT(google-explicit-constructor): call sites pass at::Tensor
    if (!t.defined()) return;  // an absent optional argument
    data = t.data_ptr();
    sizes = t.sizes().data();
    dims = t.dim();
    count = t.numel();
    device = t.get_device();
    dtype = static_cast<DType>(t.scalar_type());
    is_defined = true;
  }

  // The names at::TensorBase uses, so launchers read as before.
  int64_t size(int64_t dim) const { return sizes[dim < 0 ? dim + dims : dim]; }
  int64_t dim() const { return dims; }
  int64_t numel() const { return count; }
  int get_device() const { return device; }
  DType scalar_type() const { return dtype; }
  bool defined() const { return is_defined; }
  template <typename T>
  const T* const_data_ptr() const { return static_cast<const T*>(data); }
  const void* const_data_ptr() const { return data; }
  template <typename T>
  T* mutable_data_ptr() const { return static_cast<T*>(data); }
  void* mutable_data_ptr() const { return data; }
};

// Attribute kAttribute of `device` into *value, queried once per device (launches happen per call; an
// attribute that is 0 is asked again).
template <cudaDeviceAttr kAttribute>
inline cudaError_t query_device_attribute(int device, int* value) {
  static int cached[64] = {0};
  if (device < 0 || device >= 64) device = 0;
  if (cached[device] == 0) {
    const cudaError_t error = cudaDeviceGetAttribute(&cached[device], kAttribute, device);
    if (error != cudaSuccess) return error;
  }
  *value = cached[device];
  return cudaSuccess;
}

// The SM count of `device` into *count.
inline cudaError_t query_multiprocessor_count(int device, int* count) {
  return query_device_attribute<cudaDevAttrMultiProcessorCount>(device, count);
}

// One op call on the GPU: made by the .cpp (cuda_host.h's TorchCudaLaunch) with the device guard held.
class CudaLaunch {
 public:
  cudaStream_t stream = nullptr;  // PyTorch's current stream
  int device = 0;
  int multiprocessors = 0;

  // Throws PyTorch's CUDA error (what C10_CUDA_CHECK throws) unless `error` is cudaSuccess.
  virtual void check(cudaError_t error, const char* file, int line) const = 0;
  // `bytes` of scratch memory from PyTorch's caching allocator, on this stream (graph-safe), kept
  // until the op returns.
  virtual void* scratch(int64_t bytes) = 0;
  // Reserves `draws` 32-bit numbers (rounded up to a multiple of 4) from the op's CUDA generator.
  virtual at::PhiloxCudaState philox(uint64_t draws) = 0;

 protected:
  ~CudaLaunch() = default;
};

// JK_CUDA_CHECK(launch, cudaFoo(...)); JK_CUDA_CHECK(launch, cudaGetLastError()) after a <<<>>> launch.
#define JK_CUDA_CHECK(launch, expr) (launch).check((expr), __FILE__, __LINE__)
#define JK_CUDA_LAUNCH_CHECK(launch) JK_CUDA_CHECK(launch, cudaGetLastError())

// Blocks of `kernel` at `threads` threads (no dynamic shared memory) that fit on one SM at once,
// at least 1: times launch.multiprocessors, the grid of one full wave.
template <typename Kernel>
int blocks_per_sm(const CudaLaunch& launch, Kernel kernel, int threads) {
  int count = 0;
  JK_CUDA_CHECK(launch, cudaOccupancyMaxActiveBlocksPerMultiprocessor(&count, kernel, threads, 0));
  return count > 1 ? count : 1;
}

// f(T{}) for the element type T of `dtype` (float, double, c10::Half, c10::BFloat16): the .cu's
// AT_DISPATCH; `using scalar_t = decltype(zero);` in a generic lambda names the type. The .cpp has
// checked the dtype; another is a bug, not user error.
template <typename F>
void dispatch_float(DType dtype, F&& f) {
  switch (dtype) {
    case DType::f32: return f(float{});
    case DType::f64: return f(double{});
    case DType::f16: return f(c10::Half{});
    case DType::bf16: return f(c10::BFloat16{});
  }
  throw std::logic_error("jitkernels: unexpected dtype in a CUDA launcher");
}

// float32 / float64 only.
template <typename F>
void dispatch_float32_64(DType dtype, F&& f) {
  if (dtype == DType::f32) return f(float{});
  if (dtype == DType::f64) return f(double{});
  throw std::logic_error("jitkernels: unexpected dtype in a CUDA launcher (float32 / float64 only)");
}

}  // namespace jk
