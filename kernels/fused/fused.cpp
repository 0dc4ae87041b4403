// Family `fused`: op schemas, the op functions and their CPU loops.
// Each op is one function registered for CPU, CUDA and Meta: it checks its
// arguments, allocates the output, and hands the data to the device's loop. On the
// Meta device (fake tensors: torch.compile, opcheck) it stops after allocating, so
// shape rules and checks live in one place and no Python fake is needed.
#include <ATen/Dispatch.h>
#include <ATen/ops/empty.h>

#include "cpu_loops.h"
#include "fused.h"
#include "jk.h"
#ifdef JK_WITH_CUDA
#include "cuda_host.h"
#endif

namespace fused {

#ifdef JK_WITH_CUDA
// fused.cu (contiguous tensors of one dtype, out allocated).
void relu_add_cuda(jk::CudaLaunch& launch, const jk::CudaTensor& out, const jk::CudaTensor& x,
                   const jk::CudaTensor& y, double bias);
#endif

at::Tensor relu_add(const at::Tensor& x, const at::Tensor& y, double bias) {
  jk::check_float(x, "x");
  jk::check_like(x, "x", y, "y");
  at::Tensor out = at::empty_symint(x.sym_sizes(), x.options());
  if (x.is_meta()) return out;
  const at::Tensor x_contig = x.contiguous(), y_contig = y.contiguous();
#ifdef JK_WITH_CUDA
  if (x.is_cuda()) {
    jk::TorchCudaLaunch launch(x.device());
    relu_add_cuda(launch, out, x_contig, y_contig, bias);
    return out;
  }
#endif
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "relu_add", [&] {
    jk::cpu_elementwise<scalar_t>(out, ReluAdd{bias}, x_contig, y_contig);
  });
  return out;
}

JK_LIBRARY(m) {
  jk::def_differentiable(m, "relu_add(Tensor x, Tensor y, float bias=0.0) -> Tensor");
}

JK_LIBRARY_IMPL(CPU, m) { m.impl("relu_add", &relu_add); }
JK_LIBRARY_IMPL(Meta, m) { m.impl("relu_add", &relu_add); }
#ifdef JK_WITH_CUDA
JK_LIBRARY_IMPL(CUDA, m) { m.impl("relu_add", &relu_add); }
#endif

}  // namespace fused
