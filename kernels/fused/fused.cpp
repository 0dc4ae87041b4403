// Family `fused`: op schemas, the op functions and their CPU loops.
// Each op is one function registered for CPU, CUDA and Meta: it checks its
// arguments, allocates the output, and hands the data to the device's loop. On the
// Meta device (fake tensors: torch.compile, opcheck) it stops after allocating, so
// shape rules and checks live in one place and no Python fake is needed.
#include <ATen/Dispatch.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>

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
  // A dense x (transposed, channels-last, ...) gives its layout to the output, as torch's relu(x) + y
  // does: the loops then run over memory in order with no copy of x (a transposed 2^24 x and y were
  // copied first, 4.9x slower than torch.compile, session 53). Any other x is read contiguous.
  const bool x_dense = x.is_non_overlapping_and_dense();
  at::Tensor out = x_dense ? at::empty_like(x) : at::empty_symint(x.sym_sizes(), x.options());
  if (x.is_meta()) return out;
  // Same sizes and out's strides (where a dimension has more than one element): y's elements lie in out's order.
  // Otherwise y is copied into it.
  const at::Tensor x_contig = x_dense ? x : x.contiguous();
  bool y_in_order = true;
  for (int64_t d = 0; d < y.dim(); ++d) y_in_order = y_in_order && (y.size(d) <= 1 || y.stride(d) == out.stride(d));
  const at::Tensor y_contig = y_in_order ? y : at::empty_like(out).copy_(y);
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
