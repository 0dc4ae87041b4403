#include <ATen/Dispatch.h>
#include <ATen/ops/empty.h>
#include "jk.h"
namespace flatprobe {
void probe_cuda(const at::Tensor& out, const at::Tensor& x, int64_t variant);
at::Tensor probe(const at::Tensor& x, int64_t variant) {
  at::Tensor out = at::empty(x.sizes(), x.options());
#ifdef JK_WITH_CUDA
  if (x.is_cuda()) probe_cuda(out, x.contiguous(), variant);
#endif
  return out;
}
JK_LIBRARY(m) { m.def("probe(Tensor x, int variant) -> Tensor"); }
#ifdef JK_WITH_CUDA
JK_LIBRARY_IMPL(CUDA, m) { m.impl("probe", &probe); }
#endif
}
