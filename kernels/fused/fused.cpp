// Family `fused`: op schemas, the op functions and their CPU loops.
// Each op is one function registered for CPU, CUDA and Meta: it checks its
// arguments, allocates the output, and hands the data to the device's loop. On the
// Meta device (fake tensors: torch.compile, opcheck) it stops after allocating, so
// shape rules and checks live in one place and no Python fake is needed.
// Autograd is registered here too (ReluAddFunction), not with torch.library.register_autograd
// in ops.py: that builds a dataclass and an autograd.Function class on every load (~0.8 ms,
// most of a warm load) and puts a Python autograd kernel in every call. In C++ both are free;
// the price is a slower first compile of this file (~7 s more on a 2-core machine).
#include <ATen/Dispatch.h>
#include <ATen/ops/empty.h>
#include <torch/csrc/autograd/custom_function.h>

#include "cpu_loops.h"
#include "fused.h"
#include "jk.h"

namespace fused {

#ifdef JK_WITH_CUDA
void relu_add_cuda(const at::Tensor& out, const at::Tensor& x, const at::Tensor& y, double bias);  // fused.cu
#endif

at::Tensor relu_add(const at::Tensor& x, const at::Tensor& y, double bias) {
  jk::check_float(x, "x");
  jk::check_like(x, "x", y, "y");
  at::Tensor out = at::empty(x.sizes(), x.options());
  if (x.is_meta()) return out;
  const at::Tensor x_contig = x.contiguous(), y_contig = y.contiguous();
#ifdef JK_WITH_CUDA
  if (x.is_cuda()) {
    relu_add_cuda(out, x_contig, y_contig, bias);
    return out;
  }
#endif
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "relu_add_cpu", [&] {
    jk::cpu_elementwise<scalar_t>(out, ReluAdd{bias}, x_contig, y_contig);
  });
  return out;
}

// grad_x = grad * (x > 0), grad_y = grad. The forward goes back through the dispatcher below
// autograd, so fake tensors (torch.compile, opcheck) reach the Meta kernel as before.
// Internal linkage (anonymous namespace): a rebuilt library loads beside the old one, and with
// external linkage its autograd kernel (and the static `op`) would bind to the old library's.
namespace {

struct ReluAddFunction : torch::autograd::Function<ReluAddFunction> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x, const at::Tensor& y,
                            double bias) {
    static const auto op = c10::Dispatcher::singleton()
                               .findSchemaOrThrow(C10_STRINGIZE(JK_NAMESPACE) "::relu_add", "")
                               .typed<decltype(relu_add)>();
    ctx->save_for_backward({x});
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    return op.call(x, y, bias);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const at::Tensor x = ctx->get_saved_variables()[0];
    return {grads[0].masked_fill(x.le(0), 0), grads[0], at::Tensor()};
  }
};

at::Tensor relu_add_autograd(const at::Tensor& x, const at::Tensor& y, double bias) {
  return ReluAddFunction::apply(x, y, bias);
}

}  // namespace

JK_LIBRARY(m) {
  m.def("relu_add(Tensor x, Tensor y, float bias=0.0) -> Tensor");
}

JK_LIBRARY_IMPL(CPU, m) { m.impl("relu_add", &relu_add); }
JK_LIBRARY_IMPL(Meta, m) { m.impl("relu_add", &relu_add); }
JK_LIBRARY_IMPL(Autograd, m) { m.impl("relu_add", &relu_add_autograd); }
#ifdef JK_WITH_CUDA
JK_LIBRARY_IMPL(CUDA, m) { m.impl("relu_add", &relu_add); }
#endif

}  // namespace fused
