// Family `linalg`: what the CPU (linalg.cpp) and CUDA (linalg.cu) halves share.
#pragma once
#include <c10/macros/Macros.h>

#include <cmath>

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
// On the CPU a thread per matrix pays only while the batch's work is small: nb * n^3 up to one n = 32 matrix
// (2 cores, float32: n = 8 / 32 single 42 / 222 -> 14 / 106 us, n = 8 x 16 126 -> 80; n = 16 x 16 171 ->
// 290 and n = 64 259 -> 495 lost to the general route's batched BLAS products; session 38).
constexpr int64_t kSmallRootCpuWork = 32 * 32 * 32;
struct NewtonSteps {
  int count;
  double scale[kSmallRootMaxSteps], shift[kSmallRootMaxSteps];
};

// matrix_inverse_root (linalg.cpp has the maths) for one matrix of n <= kSmallRootMaxN, in five n x n work
// buffers, written once for a block of CUDA threads (linalg.cu) and for one CPU thread (linalg.cpp). The
// team runs the pieces, each of which ends with its threads in step (a barrier on the GPU):
// for_each(count, f) calls f(e) for every e < count, spread over its threads; product(C, A, B, n): C = A @ B
// (C is neither); max(v), sum(v): of a double over the team; any(flag); leader(): one thread of the team.
// The norms are summed in float64, scaled by the largest entry (no overflow or underflow).
constexpr int kSmallRootBuffers = 5;

template <typename T>
C10_HOST_DEVICE inline bool finite(T v) {
  return v - v == T(0);  // inf - inf and NaN - NaN are NaN
}

// A matrix whose off-diagonal entries are all exactly 0 and whose diagonal is finite gets the exact,
// elementwise answer instead of the iteration's (both routes, both devices): whether entry v breaks that,
// and the answer's diagonal entry for a diagonal entry d, (max(d, 0) + eps)^(-1/p) in float64, rounded once.
template <typename T>
C10_HOST_DEVICE inline bool breaks_diagonal(T v, bool on_diagonal) {
  return on_diagonal ? !finite(v) : v != T(0);
}
template <typename T>
C10_HOST_DEVICE inline T diagonal_root(T d, double eps, int p) {
  const double v = static_cast<double>(d);
  return static_cast<T>(pow((v < 0.0 ? 0.0 : v) + eps, -1.0 / p));
}

template <typename T, typename Team>
C10_HOST_DEVICE void inverse_root_small(const Team& team, const T* a, T* x, T* residual, T* buffers, int n, int p,
                                        double eps, const NewtonSteps& steps) {
  const int nn = n * n;
  T *M = buffers, *X = buffers + nn, *Tk = buffers + 2 * nn, *R = buffers + 3 * nn, *W = buffers + 4 * nn;
  const auto swap = [](T*& u, T*& v) {
    T* const t = u;
    u = v;
    v = t;
  };
  const auto scale_shift = [&](T* out, const T* in, T scale, T shift) {  // out = scale in + shift I; out may be in
    team.for_each(nn, [&](int e) { out[e] = e % (n + 1) == 0 ? scale * in[e] + shift : scale * in[e]; });
  };
  // S = A + Aᵀ (twice the symmetric part: the 1/2 rides on the scalars), its largest |entry|, and whether it
  // is diagonal with a finite diagonal (then the answer is elementwise, at the end).
  double peak = 0.0;
  int not_diagonal = 0;
  team.for_each(nn, [&](int e) {
    const int i = e / n, j = e - i * n;
    const T s = a[e] + a[j * n + i];
    M[e] = s;
    peak = fmax(peak, fabs(static_cast<double>(s)));  // NaN is ignored here and propagates through the sum
    not_diagonal |= breaks_diagonal(s, i == j);
  });
  peak = team.max(peak);
  const bool diagonal = !team.any(not_diagonal);
  const double inv_peak = peak > 0.0 ? 1.0 / peak : 1.0;
  double squares = 0.0;
  team.for_each(nn, [&](int e) {
    const double v = static_cast<double>(M[e]) * inv_peak;
    squares += v * v;
  });
  const T u = static_cast<T>(0.5 * peak * sqrt(team.sum(squares)) + eps);  // ||S / 2||_F + eps
  const T inv_u = T(1) / u;
  const T x0 = static_cast<T>(pow(static_cast<double>(u), -1.0 / p));
  scale_shift(M, M, T(0.5) * inv_u, static_cast<T>(eps) * inv_u);  // M_0 = (S / 2 + eps I) / u
  T deviation = T(0);
  for (int k = 0; k < steps.count; ++k) {
    scale_shift(Tk, M, static_cast<T>(steps.scale[k]), static_cast<T>(steps.shift[k]));
    if (k == 0) {
      scale_shift(X, Tk, x0, T(0));  // X_1 = u^(-1/p) T_0
    } else {
      team.product(W, X, Tk, n);  // X_{k+1} = X_k T_k
      swap(X, W);
    }
    if (k == steps.count - 1) {  // the residual ||M - I||_F; the last M is never formed
      double squared = 0.0;
      team.for_each(nn, [&](int e) {
        const double v = static_cast<double>(M[e]) - (e % (n + 1) == 0 ? 1.0 : 0.0);
        squared += v * v;
      });
      deviation = static_cast<T>(sqrt(team.sum(squared)));
      break;
    }
    bool have_power = false;  // R = T_k^p by repeated squaring, T_k's buffer the base
    for (int q = p;;) {
      if (q & 1) {
        if (have_power) {
          team.product(W, R, Tk, n);
          swap(R, W);
        } else {
          scale_shift(R, Tk, T(1), T(0));
          have_power = true;
        }
      }
      q >>= 1;
      if (q == 0) break;
      team.product(W, Tk, Tk, n);
      swap(Tk, W);
    }
    team.product(W, R, M, n);  // M_{k+1} = T_k^p M_k
    swap(M, W);
  }
  if (diagonal) {  // the exact answer, as finish_diagonal gives it on the general route
    team.for_each(nn, [&](int e) { x[e] = e % (n + 1) == 0 ? diagonal_root(a[e], eps, p) : T(0); });
  } else {
    team.for_each(nn, [&](int e) { x[e] = X[e]; });
  }
  if (team.leader()) *residual = diagonal ? T(0) : deviation;
}

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
// X[b] = diag(diagonal_root(a_scale * A_ii)) and residual[b] = 0; other matrices are left alone.
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
