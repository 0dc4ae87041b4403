// Family `fused`: CUDA launchers. Each op is a functor from fused.h on the shared
// launcher; checks, allocation and registration live in fused.cpp, which keeps this
// file's includes (and so its cold nvcc time) small.
#include <ATen/Dispatch.h>

#include "elementwise.cuh"
#include "fused.h"

namespace fused {

void relu_add_cuda(const at::TensorBase& out, const at::TensorBase& x, const at::TensorBase& y, double bias) {
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "relu_add_cuda", [&] {
    jk::cuda_elementwise<scalar_t>(out, ReluAdd{bias}, x, y);
  });
}

}  // namespace fused
