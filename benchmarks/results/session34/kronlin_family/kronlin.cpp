// Scratch A/B (not in git): kron written in linear output order, indices by 32-bit magic division.
#include "jk.h"
#include <ATen/ops/empty.h>
#ifdef JK_WITH_CUDA
#include <c10/cuda/CUDAGuard.h>
void kron_linear_cuda(const at::Tensor& out, const at::Tensor& A, const at::Tensor& B, int64_t variant);
#endif
at::Tensor kron_linear(const at::Tensor& A, const at::Tensor& B, int64_t variant) {
  TORCH_CHECK(A.dim() == 3 && B.dim() == 3 && A.scalar_type() == at::kFloat && B.size(2) % 4 == 0);
  at::Tensor out = at::empty({A.size(0), A.size(1) * B.size(1), A.size(2) * B.size(2)}, A.options());
  if (A.is_meta()) return out;
#ifdef JK_WITH_CUDA
  c10::cuda::CUDAGuard guard(A.device());
  kron_linear_cuda(out, A.contiguous(), B.contiguous(), variant);
#endif
  return out;
}
JK_LIBRARY(m) { jk::def_not_differentiable(m, "kron_linear(Tensor A, Tensor B, int variant) -> Tensor"); }
JK_LIBRARY_IMPL(Meta, m) { m.impl("kron_linear", &kron_linear); }
#ifdef JK_WITH_CUDA
JK_LIBRARY_IMPL(CUDA, m) { m.impl("kron_linear", &kron_linear); }
#endif
