// The math of the energy-based-model family, shared by the CPU (ebm.cpp) and CUDA
// (ebm.cu) kernels. A is the accumulation type (float for float/half/bfloat16,
// double for double).
//
// Every non-Gaussian model is "local": its energy is a row sum of terms that see an
// element and its right neighbour, plus (Ackley) a function of two row sums. So one
// interface serves every kernel shape (row loop on CPU, lanes-per-row and
// thread-per-row on CUDA):
//   stats(x, s0, s1)                     accumulate the row sums a model needs
//   term(x, x_next, has_next)            one element's energy term
//   finish(sum_of_terms, s0, s1, D)      the row's energy
//   prepare(s0, s1, D) -> RowConst       per-row constants of the gradient
//   grad(x_prev, x, x_next, has_prev, has_next, RowConst)   dE/dx_i
// and says which parts it uses: kStats (the row sums), kNeighbours (x_next/x_prev), kTerms
// (term() is not identically 0), so that kernels skip the work and shuffles of unused parts, and
// kPolynomial (grad() calls no transcendental function: cheap enough to keep more rows in flight).
// The Gaussian ½(x−μ)ᵀP(x−μ) needs the whole row and a D×D matrix: it is special-cased.
#pragma once
#include <c10/macros/Macros.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "fast_math.cuh"
#include "opmath.h"
#include "philox.h"

namespace ebm {

enum class Model : int { Gaussian = 0, DoubleWell, Harmonic, Rosenbrock, Rastrigin, Ackley };

constexpr double kPi = 3.14159265358979323846;
constexpr double kE = 2.71828182845904523536;
// The widest row (D) any op takes (check_rows): the CUDA kernels index within a row in 32 bits, and the local
// models' lane-group kernel rounds D up by up to 255 (a group of at most 32 lanes of 8 elements).
constexpr int64_t kMaxRowWidth = 2147483647 - 256;
// The chains' HMC accept uniforms of row r come from Philox subsequence r + this, apart from its normals (no row
// reaches it): on the CPU at every D, on CUDA at D = 1 and 2 (ChainStream in ebm_cpu.h, ChainDraws in ebm_rows.cuh).
constexpr uint64_t kAcceptSubsequences = uint64_t(1) << 63;

// A model as chosen at run time: its kind and up to three scalar parameters.
struct ModelSpec {
  Model kind;
  double p[3];
};

template <typename A>
struct RowConst {
  A c0, c1;
};

// cos(πt) and sin(πt): in float, jk::cos_pi_float / jk::sin_pi_float (fast_math.cuh: an exact
// argument reduction, then MUFU ops on the GPU, which keeps Rastrigin's and Ackley's energies at the
// memory rate, and polynomials on the CPU, which let its loops vectorize); the 2π (or c) of a model
// is folded into t on the host. Double: cospi/sinpi on the GPU, std::cos/std::sin on the CPU.
template <typename A>
C10_HOST_DEVICE inline A cos_pi(A t) {
  if constexpr (std::is_same<A, float>::value) {
    return jk::cos_pi_float(t);
  } else {
#ifdef __CUDA_ARCH__
    return cospi(t);
#else
    return std::cos(A(kPi) * t);
#endif
  }
}

template <typename A>
C10_HOST_DEVICE inline A sin_pi(A t) {
  if constexpr (std::is_same<A, float>::value) {
    return jk::sin_pi_float(t);
  } else {
#ifdef __CUDA_ARCH__
    return sinpi(t);
#else
    return std::sin(A(kPi) * t);
#endif
  }
}

// e^x: on the host in float, jk::exp_float (fast_math.cuh: a polynomial, so that the CPU's lane loops
// vectorize, where std::exp is a scalar call: Ackley's energy 275 -> 186 us and score 486 -> 381, B = 32768,
// D = 16, float32, 2 cores); std::exp elsewhere, so the CUDA kernels are unchanged.
template <typename A>
C10_HOST_DEVICE inline A exp_rows(A x) {
#ifndef __CUDA_ARCH__
  if constexpr (std::is_same<A, float>::value) return jk::exp_float(x);
#endif
  using std::exp;
  return exp(x);
}

// e^x - 1. In float: exp's polynomial itself where its reduction would leave x alone (no cancellation), exp_rows(x)
// - 1 beyond (|e^x - 1| > 0.29 there: at most ~2 bits lost); branch-free, so the CPU's lane loops vectorize
// (std::expm1 is a scalar call), and on the GPU about an expf's cost (CUDA's expm1f is longer).
template <typename A>
C10_HOST_DEVICE inline A expm1_rows(A x) {
  if constexpr (std::is_same<A, float>::value) {
    const bool small = x > -0.34657359f && x < 0.34657359f;
    return small ? jk::mul_add(jk::exp_polynomial(x), x * x, x) : exp_rows(x) - 1.0f;
  } else {
    using std::expm1;
    return expm1(x);
  }
}

// f·e^t, finite wherever the product is: e^t alone overflows past t = 88.72 in float (709.78 in double), where
// f·e^t with |f| < 1 is still finite (Ackley with b < 0), and below t = -87.3 (-708.4) it leaves the normal range,
// where f·e^t with a large f is still normal (Ackley's score with a large a·b: e^t subnormal kept few digits, and
// jk::exp_float clamped at -87 until session 48). Past |t| = 88 (708) it is (f·e^(t/2))·e^(t/2): neither factor
// leaves the range where the product does not. One exp and selects, not a branch to a second exp (that measured
// ~1.8x Ackley's CPU energy; this ~1.05x: 575 -> 605 us, score 1095 -> 1130, B = 65536, D = 16, float32, one
// thread). Where |t| <= 88 the result is f·e^t's bits, as before.
template <typename A>
C10_HOST_DEVICE inline A times_exp(A f, A t) {
  const A limit = A(std::is_same<A, float>::value ? 88 : 708);
  const bool split = t > limit || t < -limit;
  const A h = exp_rows(split ? A(0.5) * t : t);
  return f * h * (split ? h : A(1));
}

// ½k·Σxᵢ²
template <typename A>
struct Harmonic {
  A k;
  static constexpr bool kStats = false, kNeighbours = false, kTerms = true, kPolynomial = true;
  C10_HOST_DEVICE void stats(A, A&, A&) const {}
  C10_HOST_DEVICE A term(A x, A, bool) const { return A(0.5) * k * x * x; }
  C10_HOST_DEVICE A finish(A sum, A, A, int64_t) const { return sum; }
  C10_HOST_DEVICE RowConst<A> prepare(A, A, int64_t) const { return {A(0), A(0)}; }
  C10_HOST_DEVICE A grad(A, A x, A, bool, bool, RowConst<A>) const { return k * x; }
};

// h·Σ(xᵢ²−b²)²
template <typename A>
struct DoubleWell {
  A h, b;
  static constexpr bool kStats = false, kNeighbours = false, kTerms = true, kPolynomial = true;
  C10_HOST_DEVICE void stats(A, A&, A&) const {}
  C10_HOST_DEVICE A term(A x, A, bool) const {
    const A u = x * x - b * b;
    return h * u * u;
  }
  C10_HOST_DEVICE A finish(A sum, A, A, int64_t) const { return sum; }
  C10_HOST_DEVICE RowConst<A> prepare(A, A, int64_t) const { return {A(0), A(0)}; }
  C10_HOST_DEVICE A grad(A, A x, A, bool, bool, RowConst<A>) const { return A(4) * h * x * (x * x - b * b); }
};

// Σᵢ<D−1 [b(xᵢ₊₁−xᵢ²)² + (a−xᵢ)²]
template <typename A>
struct Rosenbrock {
  A a, b;
  static constexpr bool kStats = false, kNeighbours = true, kTerms = true, kPolynomial = true;
  C10_HOST_DEVICE void stats(A, A&, A&) const {}
  C10_HOST_DEVICE A term(A x, A x_next, bool has_next) const {
    if (!has_next) return A(0);
    const A u = x_next - x * x, v = a - x;
    return b * u * u + v * v;
  }
  C10_HOST_DEVICE A finish(A sum, A, A, int64_t) const { return sum; }
  C10_HOST_DEVICE RowConst<A> prepare(A, A, int64_t) const { return {A(0), A(0)}; }
  C10_HOST_DEVICE A grad(A x_prev, A x, A x_next, bool has_prev, bool has_next, RowConst<A>) const {
    A g = A(0);
    if (has_next) g += A(-4) * b * x * (x_next - x * x) - A(2) * (a - x);
    if (has_prev) g += A(2) * b * (x - x_prev * x_prev);
    return g;
  }
};

// aD + Σ[xᵢ² − a·cos 2πxᵢ]
template <typename A>
struct Rastrigin {
  A a;
  static constexpr bool kStats = false, kNeighbours = false, kTerms = true, kPolynomial = false;
  C10_HOST_DEVICE void stats(A, A&, A&) const {}
  // a·D + Σ[x² − a·cos 2πx] as Σ[x² + 2a·sin² πx] (a − a·cos 2θ = 2a·sin² θ): no cancellation near the
  // minimum, where the first form lost the energy's digits (x ~ 1e-3 in float32: 1e-3 relative off; session 43).
  C10_HOST_DEVICE A term(A x, A, bool) const {
    const A s = sin_pi(x);
    return x * x + A(2) * a * s * s;
  }
  C10_HOST_DEVICE A finish(A sum, A, A, int64_t) const { return sum; }
  C10_HOST_DEVICE RowConst<A> prepare(A, A, int64_t) const { return {A(0), A(0)}; }
  C10_HOST_DEVICE A grad(A, A x, A, bool, bool, RowConst<A>) const {
    return A(2) * x + A(2 * kPi) * a * sin_pi(A(2) * x);
  }
};

// −a·exp(−b·√(Σxᵢ²/D)) − exp(Σcos(c·xᵢ)/D) + a + e. At x = 0 the first term has no
// gradient (√ at 0); we use 0 there, the subgradient at the minimum. c_pi = c/π (in
// double on the host), so cos(c·x) = cos_pi(c_pi·x).
// s1 sums sin²(c·xᵢ/2) = (1 − cos(c·xᵢ))/2, so that e − exp(mean cos) = −e·expm1(−2·s1/D) and a − a·e^t =
// −a·expm1(t) keep their digits near the minimum, where a + e − (a·e^t + exp(mean cos)) cancelled ~22.7 against
// ~22.7: E(0) came out 9.5e-7 in float32, and E near 0 up to half off at x ~ 1e-6 (session 52's review).
template <typename A>
struct Ackley {
  A a, b, c, c_pi;
  static constexpr bool kStats = true, kNeighbours = false, kTerms = false, kPolynomial = false;  // term() is 0
  C10_HOST_DEVICE void stats(A x, A& s0, A& s1) const {
    s0 += x * x;
    const A h = sin_pi(A(0.5) * c_pi * x);
    s1 += h * h;
  }
  C10_HOST_DEVICE A term(A, A, bool) const { return A(0); }
  C10_HOST_DEVICE A finish(A, A s0, A s1, int64_t D) const {
    using std::sqrt;
    const A n = static_cast<A>(D);
    const A t = -b * sqrt(s0 / n);
    // past t = 88 (b < 0) times_exp keeps a·e^t finite where it is; a - a·e^t loses nothing there
    const A first = t > A(88) ? a - times_exp(a, t) : -a * expm1_rows(t);
    return first - A(kE) * expm1_rows(A(-2) * s1 / n);
  }
  C10_HOST_DEVICE RowConst<A> prepare(A s0, A s1, int64_t D) const {
    using std::sqrt;
    const A n = static_cast<A>(D);
    const A r = sqrt(s0 / n);
    return {r > A(0) ? times_exp(a * b / (n * r), -b * r) : A(0), A(kE) * exp_rows(A(-2) * s1 / n) * c / n};
  }
  C10_HOST_DEVICE A grad(A, A x, A, bool, bool, RowConst<A> rc) const { return rc.c0 * x + rc.c1 * sin_pi(c_pi * x); }
};

// Calls f(model) with the functor of `kind` built from p (the checked, padded scalar
// parameters). Not for Model::Gaussian.
template <typename A, typename F>
void with_local_model(Model kind, const double* p, F&& f) {
  switch (kind) {
    case Model::DoubleWell: f(DoubleWell<A>{A(p[0]), A(p[1])}); break;
    case Model::Harmonic: f(Harmonic<A>{A(p[0])}); break;
    case Model::Rosenbrock: f(Rosenbrock<A>{A(p[0]), A(p[1])}); break;
    case Model::Rastrigin: f(Rastrigin<A>{A(p[0])}); break;
    case Model::Ackley: f(Ackley<A>{A(p[0]), A(p[1]), A(p[2]), A(p[2] / kPi)}); break;
    default: break;
  }
}

// −dE/dxᵢ of a separable model (no row sums, no neighbours: Harmonic, DoubleWell, Rastrigin) as an
// elementwise functor, for the shared elementwise loops of both halves (jk::cpu_elementwise,
// jk::launch_elementwise).
template <typename M>
struct SeparableScore {
  M m;
  template <typename T>
  C10_HOST_DEVICE T operator()(T x) const {
    using A = jk::opmath_t<T>;
    return static_cast<T>(-m.grad(A(0), static_cast<A>(x), A(0), false, false, RowConst<A>{A(0), A(0)}));
  }
};

// x − η·grad + τ·ε (τ = noise_scale·√(2η)), then clamped to [lo, hi] when asked.
// Written as x + a·g + τ·ε so the same update serves a gradient (a = −η) and a
// score (a = +η).
template <typename A>
struct LangevinUpdate {
  A a, tau, lo, hi;
  bool clamp;
  C10_HOST_DEVICE A operator()(A x, A g, A noise) const {
    A y = x + a * g + tau * noise;
    if (clamp) y = y < lo ? lo : (y > hi ? hi : y);
    return y;
  }
};

// Widest rows the CUDA thread-per-row kernels take (registers and shared memory; float64
// takes twice the space); wider rows take the stepwise paths (matrix products, per-step kernels).
inline int64_t cuda_gaussian_max_d(bool) { return 64; }
inline int64_t cuda_langevin_max_d(bool is_double) { return is_double ? 32 : 64; }
inline int64_t cuda_hmc_max_d(bool is_double) { return is_double ? 16 : 32; }
constexpr int64_t kCpuGaussianMaxD = 64;  // wider Gaussian rows on the CPU: a matrix product (BLAS)
constexpr int64_t kCpuFloatRowsMaxD = 48;  // and float32 rows wider than this (ebm.cpp: gaussian_op)

// Element k (0..3) of four normals.
C10_HOST_DEVICE inline float lane(const jk::Float4& z, int k) {
  return k == 0 ? z.x : (k == 1 ? z.y : (k == 2 ? z.z : z.w));
}

}  // namespace ebm
