// Scratch A/B (not in git): orderings and store kinds of linalg's kron_slots_kernel.
#include "jk.h"
#include <ATen/ops/empty.h>
#ifdef JK_WITH_CUDA
#include <c10/cuda/CUDAGuard.h>
void kron_variant_cuda(const at::Tensor& out, const at::Tensor& A, const at::Tensor& B, int64_t variant, int64_t chunks);
#endif
at::Tensor kron_variant(const at::Tensor& A, const at::Tensor& B, int64_t variant, int64_t chunks) {
  TORCH_CHECK(A.dim() == 3 && B.dim() == 3 && A.scalar_type() == at::kFloat && B.size(2) % 4 == 0);
  at::Tensor out = at::empty({A.size(0), A.size(1) * B.size(1), A.size(2) * B.size(2)}, A.options());
  if (A.is_meta()) return out;
#ifdef JK_WITH_CUDA
  c10::cuda::CUDAGuard guard(A.device());
  kron_variant_cuda(out, A.contiguous(), B.contiguous(), variant, chunks);
#endif
  return out;
}
JK_LIBRARY(m) { jk::def_not_differentiable(m, "kron_variant(Tensor A, Tensor B, int variant, int chunks=0) -> Tensor"); }
JK_LIBRARY_IMPL(Meta, m) { m.impl("kron_variant", &kron_variant); }
#ifdef JK_WITH_CUDA
JK_LIBRARY_IMPL(CUDA, m) { m.impl("kron_variant", &kron_variant); }
#endif
