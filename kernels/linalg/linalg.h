// Family `linalg`: what the CPU (linalg.cpp) and CUDA (linalg.cu) halves share.
#pragma once
#include <ATen/OpMathType.h>
#include <ATen/core/Tensor.h>
#include <c10/macros/Macros.h>

namespace linalg {

// kron / outer-product element: a*b, multiplied in float for half types (exact: the
// product of two 11-bit significands fits in float's 24 bits, so it rounds once like torch).
template <typename T>
C10_HOST_DEVICE inline T kron_mul(T a, T b) {
  using acc_t = at::opmath_type<T>;
  return static_cast<T>(static_cast<acc_t>(a) * static_cast<acc_t>(b));
}

#ifdef JK_WITH_CUDA
// Launchers in linalg.cu. Arguments are checked by linalg.cpp: contiguous, one dtype and device.

// out[b] = a[b] * in[b] + d[b] * I for a batch of square matrices (nb, n, n), where
// a[b] = a_scale * (a_vec defined ? a_vec[b] : 1), likewise d; in undefined means zeros.
void eye_axpy_cuda(const at::Tensor& out, const at::Tensor& in, const at::Tensor& a_vec, double a_scale,
                   const at::Tensor& d_vec, double d_scale);

// out (nb, m*p, n*q) = per-batch kron(A (nb, m, n), B (nb, p, q)).
void kron_cuda(const at::Tensor& out, const at::Tensor& A, const at::Tensor& B);
#endif

}  // namespace linalg
