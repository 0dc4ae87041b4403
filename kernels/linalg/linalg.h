// Family `linalg`: what the CPU (linalg.cpp) and CUDA (linalg.cu) halves share.
#pragma once
#include <ATen/OpMathType.h>
#include <ATen/core/Tensor.h>
#include <c10/macros/Macros.h>

#include <cstdint>

namespace linalg {

// kron / outer-product element: a*b, multiplied in float for half types (exact: the
// product of two 11-bit significands fits in float's 24 bits, so it rounds once like torch).
template <typename T>
C10_HOST_DEVICE inline T kron_mul(T a, T b) {
  using acc_t = at::opmath_type<T>;
  return static_cast<T>(static_cast<acc_t>(a) * static_cast<acc_t>(b));
}

// out[b] = a[b] * in[b] + d[b] * I for a batch of square matrices (B, n, n), where
// a[b] = a_scale * (a_vec defined ? a_vec[b] : 1), likewise d; in undefined means zeros.
// All tensors contiguous, one dtype. The only elementwise kernel the Newton iteration needs.
using EyeAxpyFn = void (*)(const at::Tensor& out, const at::Tensor& in, const at::Tensor& a_vec, double a_scale,
                           const at::Tensor& d_vec, double d_scale);

// out (nb, m*p, n*q) = per-batch kron(A (nb, m, n), B (nb, p, q)); all contiguous, one dtype.
using KronFn = void (*)(const at::Tensor& out, const at::Tensor& A, const at::Tensor& B);

// The device-independent driver of matrix_inverse_root (linalg.cpp): ATen matrix
// products plus the backend's eye_axpy kernel. Returns (X, residual).
std::tuple<at::Tensor, at::Tensor> matrix_inverse_root_impl(const at::Tensor& A, int64_t p, double eps,
                                                            double max_cond, EyeAxpyFn eye_axpy);

// Checks and shapes shared by both halves (linalg.cpp).
at::Tensor kron_impl(const at::Tensor& A, const at::Tensor& B, KronFn kernel);
std::tuple<at::Tensor, at::Tensor> per_sample_grad_linear_impl(const at::Tensor& x, const at::Tensor& grad_out,
                                                               bool with_bias, KronFn kernel);

}  // namespace linalg
