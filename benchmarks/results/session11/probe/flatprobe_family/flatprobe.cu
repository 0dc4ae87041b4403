#include <ATen/Dispatch.h>
#include <type_traits>
#include "elementwise.cuh"
#include "flatprobe.h"
namespace flatprobe {
template <typename F> void with_flag(bool flag, F&& f) { flag ? f(std::true_type{}) : f(std::false_type{}); }
template <typename F> void with_model(F&& f) { f(Neg{2.f}); }
template <typename T, bool kOn, typename M>
void launch_if(const at::Tensor& out, const at::Tensor& x, const M& m) {
  if constexpr (kOn) jk::cuda_elementwise<T>(out, Wrap<M>{m}, x);
}
void probe_cuda(const at::Tensor& out, const at::Tensor& x, int64_t variant) {
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "probe", [&] {
    using T = scalar_t;
    if (variant == 0) { jk::cuda_elementwise<T>(out, Neg{2.f}, x); return; }            // one input, direct
    if (variant == 1) { jk::cuda_elementwise<T>(out, Add{}, x, x); return; }             // two inputs (as fused)
    if (variant == 2) { jk::cuda_elementwise<T>(out, Wrap<Neg>{Neg{2.f}}, x); return; }  // wrapped functor
    if (variant == 3) {  // as ebm did: if constexpr inside nested generic lambdas
      with_model([&](auto m) {
        using M = decltype(m);
        with_flag(true, [&](auto flag) {
          if constexpr (decltype(flag)::value) { jk::cuda_elementwise<T>(out, Wrap<M>{m}, x); }
        });
      });
    } else if (variant == 4) {  // generic lambda, no if constexpr
      with_model([&](auto m) { jk::cuda_elementwise<T>(out, Wrap<decltype(m)>{m}, x); });
    } else if (variant == 5) {  // generic lambda calling a function template that holds the if constexpr
      with_model([&](auto m) { launch_if<T, true>(out, x, m); });
    } else if (variant == 6) {  // if constexpr in a function template, no generic lambda
      launch_if<T, true>(out, x, Neg{2.f});
    } else if (variant == 7) {  // nested generic lambdas, run-time if
      with_model([&](auto m) { with_flag(true, [&](auto) { jk::cuda_elementwise<T>(out, Wrap<decltype(m)>{m}, x); }); });
    }
  });
}
}
