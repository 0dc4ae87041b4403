// Family `linalg`: what the CPU (linalg.cpp) and CUDA (linalg.cu) halves share.
#pragma once
#include <c10/macros/Macros.h>

#include "opmath.h"
#ifdef JK_WITH_CUDA
#include "cuda_launch.cuh"
#endif

namespace linalg {

// kron / outer-product element: a*b, multiplied in float for half types (exact: the
// product of two 11-bit significands fits in float's 24 bits, so it rounds once like torch).
template <typename T>
C10_HOST_DEVICE inline T kron_mul(T a, T b) {
  using acc_t = jk::opmath_t<T>;
  return static_cast<T>(static_cast<acc_t>(a) * static_cast<acc_t>(b));
}

// Float32 products on the GPU's bfloat16 tensor cores: each operand v is split into bfloat16
// pieces v0 + v1 + v2 (3 x 8 significant bits, about float32's 24) and the product is formed as
// ONE bfloat16 GEMM with float32 accumulation over kSplitTerms pieces concatenated along K.
constexpr int kSplitTerms = 6;

// matrix_inverse_root's Newton steps: T_k = scale[k] M_k + shift[k] I (linalg.cpp has the maths). Up to
// kSmallRootMaxSteps of them (the longest schedule, p = 1 and max_cond 1e16, takes 32) ride in the
// small-matrix kernel's parameters, so it needs no copy to the device.
constexpr int kSmallRootMaxN = 64, kSmallRootMaxSteps = 40;
struct NewtonSteps {
  int count;
  double scale[kSmallRootMaxSteps], shift[kSmallRootMaxSteps];
};

#ifdef JK_WITH_CUDA
// Launchers in linalg.cu. Arguments are checked by linalg.cpp: contiguous, one dtype and device; the
// launch (device guard, stream, scratch memory) is linalg.cpp's jk::TorchCudaLaunch for the op call.

// out[b] = a[b] * in[b] + d[b] * I for a batch of square matrices (nb, n, n), where
// a[b] = a_scale * (a_vec defined ? a_vec[b] : 1), likewise d; in undefined means zeros.
void eye_axpy_cuda(jk::CudaLaunch& launch, const jk::CudaTensor& out, const jk::CudaTensor& in,
                   const jk::CudaTensor& a_vec, double a_scale, const jk::CudaTensor& d_vec, double d_scale);

// The bfloat16 pieces of v = scale * x + shift * I for x (nb, n, n) float32, as the left operand
// left (nb, n, kSplitTerms * n) and/or the right operand right (nb, kSplitTerms * n, n) of
// at::bmm(left, right, at::kFloat) ~= v_left @ v_right. An undefined output is not written.
void split_bf16x3_cuda(jk::CudaLaunch& launch, const jk::CudaTensor& x, double scale, double shift,
                       const jk::CudaTensor& left, const jk::CudaTensor& right);

// For each matrix b of A (nb, n, n) with no off-diagonal entry other than 0 and a finite diagonal:
// X[b] = diag((max(a_scale * A_ii, 0) + eps)^(-1/p)) and residual[b] = 0; other matrices are left alone.
void finish_diagonal_cuda(jk::CudaLaunch& launch, const jk::CudaTensor& A, double a_scale, const jk::CudaTensor& X,
                          const jk::CudaTensor& residual, int64_t p, double eps);

// The whole of matrix_inverse_root (linalg.cpp) for A (nb, n, n) with n <= kSmallRootMaxN, one block per
// matrix: X (nb, n, n) and residual (nb) as the general route computes them. False (nothing launched):
// n is larger, or its matrices do not fit the device's shared memory; the general route then.
bool inverse_root_small_cuda(jk::CudaLaunch& launch, const jk::CudaTensor& A, const jk::CudaTensor& X,
                             const jk::CudaTensor& residual, int64_t p, double eps, const NewtonSteps& steps);

// out (nb, m*p, n*q) = per-batch kron(A (nb, m, n), B (nb, p, q)).
void kron_cuda(jk::CudaLaunch& launch, const jk::CudaTensor& out, const jk::CudaTensor& A, const jk::CudaTensor& B);
#endif

}  // namespace linalg
