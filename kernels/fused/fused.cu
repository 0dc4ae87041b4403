// Family `fused`: the CUDA launcher. It sees tensors as pointer + shape + dtype (cuda_launch.cuh), so
// nvcc reads no tensor header and compiles this file in ~2 s instead of ~9 (dev machine, session 14):
// editing a kernel and reloading stays quick. Checks, allocation, the device guard and the current
// stream live in fused.cpp.
#include "cuda_launch.cuh"
#include "elementwise_kernel.cuh"
#include "fused.h"

namespace fused {

void relu_add_cuda(jk::CudaLaunch& launch, const jk::CudaTensor& out, const jk::CudaTensor& x,
                   const jk::CudaTensor& y, double bias) {
  jk::dispatch_float(out.scalar_type(), [&](auto zero) {
    using T = decltype(zero);
    JK_CUDA_CHECK(launch, jk::launch_elementwise(launch.stream, out.mutable_data_ptr<T>(), out.numel(),
                                                 ReluAdd{bias}, x.const_data_ptr<T>(), y.const_data_ptr<T>()));
  });
}

}  // namespace fused
