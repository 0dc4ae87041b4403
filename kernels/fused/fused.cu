// Family `fused`: CUDA kernels. Each op is a functor from fused.h on the shared launcher.
#include <ATen/Dispatch.h>
#include <ATen/ops/empty.h>

#include "elementwise.cuh"
#include "fused.h"
#include "jk.h"

namespace fused {

void check_relu_add_args(const at::Tensor& x, const at::Tensor& y);  // fused.cpp

at::Tensor relu_add_cuda(const at::Tensor& x, const at::Tensor& y, double bias) {
  check_relu_add_args(x, y);
  const at::Tensor x_contig = x.contiguous(), y_contig = y.contiguous();
  at::Tensor out = at::empty(x.sizes(), x.options());
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "relu_add_cuda", [&] {
    jk::cuda_elementwise<scalar_t>(out, ReluAdd{bias}, x_contig, y_contig);
  });
  return out;
}

JK_LIBRARY_IMPL(CUDA, m) {
  m.impl("relu_add", &relu_add_cuda);
}

}  // namespace fused
