// Family `fused`: op schemas, argument checks and CPU kernels.
#include <ATen/Dispatch.h>
#include <ATen/ops/empty.h>

#include "cpu_loops.h"
#include "fused.h"
#include "jk.h"

namespace fused {

// Shared by the CPU and CUDA kernels (fused.cu declares it).
void check_relu_add_args(const at::Tensor& x, const at::Tensor& y) {
  jk::check_float(x, "x");
  jk::check_like(x, "x", y, "y");
}

at::Tensor relu_add_cpu(const at::Tensor& x, const at::Tensor& y, double bias) {
  check_relu_add_args(x, y);
  const at::Tensor x_contig = x.contiguous(), y_contig = y.contiguous();
  at::Tensor out = at::empty(x.sizes(), x.options());
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "relu_add_cpu", [&] {
    jk::cpu_elementwise<scalar_t>(out, ReluAdd{bias}, x_contig, y_contig);
  });
  return out;
}

JK_LIBRARY(m) {
  m.def("relu_add(Tensor x, Tensor y, float bias=0.0) -> Tensor");
}

JK_LIBRARY_IMPL(CPU, m) {
  m.impl("relu_add", &relu_add_cpu);
}

}  // namespace fused
