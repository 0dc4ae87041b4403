// Family `ebm`, C++ half: what its files share. ebm.cpp holds the op schemas and registration, the
// energies, scores and Langevin step; ebm_chains.cpp the chains (langevin_chain, hmc_chain), which compose
// some of ebm.cpp's pieces (declared here). The CPU loops that run the row objects below, the bulk of the
// C++ half's code, are in ebm_rows_cpu.cpp (energies, scores), ebm_chains_cpu.cpp and ebm_chain_lanes_cpu.cpp (the
// chains of wide and narrow rows), which include no torch/library.h. Five files so that g++ compiles them at once:
// as one, its code generation made it a first build's slowest object.
#pragma once
#include <ATen/Dispatch.h>
#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "ebm.h"

namespace ebm {

// ---------------------------------------------------------------- ebm.cpp's pieces the chains use

void check_rows(const at::Tensor& x, int64_t min_cols);
void check_gaussian_args(const at::Tensor& x, const at::Tensor& mean, const at::Tensor& precision);
void check_step_args(const at::Tensor& x, const at::Tensor& grad, double step_size, double noise_scale,
                     std::optional<double> clamp_min, std::optional<double> clamp_max);
// x + a·g + τ·ε, clamped to [clamp_min, clamp_max] where either is given.
LangevinUpdate<double> make_update(double a, double tau, std::optional<double> clamp_min,
                                   std::optional<double> clamp_max);
// Energy (out (B,)) or score (out (B, D)) of a local model / the Gaussian, any device.
void local_rows(const at::Tensor& x, const at::Tensor& out, const ModelSpec& spec, bool score);
at::Tensor local_op(const at::Tensor& x, const ModelSpec& spec, bool score);
at::Tensor gaussian_op(const at::Tensor& x, const at::Tensor& mean, const at::Tensor& precision, bool score);
// out (and traj, when defined) = x + a·g + τ·ε for contiguous tensors of one dtype, any device.
void langevin_update(const at::Tensor& x, const at::Tensor& g, const at::Tensor& out, const at::Tensor& traj,
                     const LangevinUpdate<double>& u, const std::optional<at::Generator>& generator);

inline at::Tensor symmetrized(const at::Tensor& precision) { return precision.add(precision.t()).mul_(0.5); }

// ---------------------------------------------------------------- the CPU loops, for contiguous CPU tensors

// ebm_rows_cpu.cpp: energy (out (B,)) or score (out (B, D)) of a local model / the Gaussian (D <= kCpuGaussianMaxD).
void local_rows_cpu(const at::Tensor& x, const at::Tensor& out, const ModelSpec& spec, bool score);
void gaussian_rows_cpu(const at::Tensor& x, const at::Tensor& mean, const at::Tensor& precision, const at::Tensor& out,
                       bool score);
// ebm_chains_cpu.cpp: the chains of rows of D <= kCpuGaussianMaxD (the Gaussian) or any D (local models),
// float32 or float64; mean and precision undefined but for the Gaussian.
void langevin_chain_cpu(const at::Tensor& x, const at::Tensor& out, const at::Tensor& traj, const ModelSpec& spec,
                        const at::Tensor& mean, const at::Tensor& precision, int64_t n_steps,
                        const LangevinUpdate<double>& u, int64_t thin, jk::PhiloxSeed seed);
void hmc_chain_cpu(const at::Tensor& x, const at::Tensor& out, const at::Tensor& accept_rate, const at::Tensor& traj,
                   const ModelSpec& spec, const at::Tensor& mean, const at::Tensor& precision, int64_t n_steps,
                   double step_size, int64_t n_leapfrog, int64_t thin, jk::PhiloxSeed seed);
// ebm_chain_lanes_cpu.cpp: the same for rows of D <= kLaneChainMaxD, which those hand over. They go kRowLanes rows
// at a time, transposed (HasLaneRows): a step is then a few vector operations for all the block's rows, where row by
// row it waited on one row's chain of dependent operations (D = 1: 3x slower than an eager loop, session 46). A file
// of its own, so that g++ compiles it beside ebm_chains_cpu.cpp (together they took twice as long).
constexpr int64_t kLaneChainMaxD = 64;
void langevin_chain_lanes_cpu(const at::Tensor& x, const at::Tensor& out, const at::Tensor& traj, const ModelSpec& spec,
                              const at::Tensor& mean, const at::Tensor& precision, int64_t n_steps,
                              const LangevinUpdate<double>& u, int64_t thin, jk::PhiloxSeed seed);
void hmc_chain_lanes_cpu(const at::Tensor& x, const at::Tensor& out, const at::Tensor& accept_rate,
                         const at::Tensor& traj, const ModelSpec& spec, const at::Tensor& mean,
                         const at::Tensor& precision, int64_t n_steps, double step_size, int64_t n_leapfrog,
                         int64_t thin, jk::PhiloxSeed seed);

// ---------------------------------------------------------------- ebm_chains.cpp's ops

std::tuple<at::Tensor, at::Tensor> langevin_chain(const at::Tensor& x, const std::string& model,
                                                  const std::optional<at::Tensor>& mean,
                                                  const std::optional<at::Tensor>& precision,
                                                  at::ArrayRef<double> params, int64_t n_steps, double step_size,
                                                  double noise_scale, int64_t thin, std::optional<double> clamp_min,
                                                  std::optional<double> clamp_max,
                                                  std::optional<at::Generator> generator);
std::tuple<at::Tensor, at::Tensor, at::Tensor> hmc_chain(const at::Tensor& x, const std::string& model,
                                                         const std::optional<at::Tensor>& mean,
                                                         const std::optional<at::Tensor>& precision,
                                                         at::ArrayRef<double> params, int64_t n_steps,
                                                         double step_size, int64_t n_leapfrog, int64_t thin,
                                                         std::optional<at::Generator> generator);

// ---------------------------------------------------------------- CPU row math

// A row's sums (its terms, a model's stats) over D <= kSumBlock elements are taken in one pass, in A. Wider rows
// are summed kSumBlock elements at a time and the blocks' sums added up in double (wide_sums), so that float32's
// rounding error grows with kSumBlock, not with D: in one pass, a 3×512×512 row's harmonic energy was off by
// 4e-4 (torch.sum: 1e-7), and 2^25 halves summed to 2^23 (session 43's review). The one-pass loops stay as they
// were: the blocked form of them, for every row, was 10-25% slower at D = 16.
constexpr int64_t kSumBlock = 256;

// sums[k] (N of them) = the sum over [0, D) of what add(i0, i1, part) adds into part[k] for elements [i0, i1).
template <typename A, int64_t N, typename Add>
void wide_sums(int64_t D, A* sums, const Add& add) {
  double total[N] = {};
  for (int64_t b = 0; b < D; b += kSumBlock) {
    A part[N] = {};
    add(b, std::min(D, b + kSumBlock), part);
    for (int64_t k = 0; k < N; ++k) total[k] += part[k];
  }
  for (int64_t k = 0; k < N; ++k) sums[k] = A(total[k]);
}

// Elements [i0, i1) of a row of D: m's stats into s0, s1 and its terms into sum.
template <typename A, typename M>
void add_row_terms(const M& m, const A* x, int64_t i0, int64_t i1, int64_t D, A& s0, A& s1, A& sum) {
  for (int64_t i = i0; i < i1; ++i) {
    m.stats(x[i], s0, s1);
    sum += m.term(x[i], i + 1 < D ? x[i + 1] : A(0), i + 1 < D);
  }
}

template <typename A, typename M>
A row_energy(const M& m, const A* x, int64_t D) {
  A s[3] = {};  // s0, s1, sum
  if (D <= kSumBlock) {
    add_row_terms(m, x, 0, D, D, s[0], s[1], s[2]);
  } else {
    wide_sums<A, 3>(D, s, [&](int64_t i0, int64_t i1, A* t) { add_row_terms(m, x, i0, i1, D, t[0], t[1], t[2]); });
  }
  return m.finish(s[2], s[0], s[1], D);
}

template <typename A, typename M>
void row_grad(const M& m, const A* x, A* g, int64_t D) {
  A s[2] = {};  // s0, s1
  if (M::kStats && D <= kSumBlock) {
    for (int64_t i = 0; i < D; ++i) m.stats(x[i], s[0], s[1]);
  } else if (M::kStats) {
    wide_sums<A, 2>(D, s, [&](int64_t i0, int64_t i1, A* t) {
      for (int64_t i = i0; i < i1; ++i) m.stats(x[i], t[0], t[1]);
    });
  }
  const RowConst<A> rc = m.prepare(s[0], s[1], D);
  if constexpr (!M::kNeighbours) {  // no neighbour loads or edge selects: a loop that vectorizes
    for (int64_t i = 0; i < D; ++i) g[i] = m.grad(A(0), x[i], A(0), false, false, rc);
    return;
  }
  // The edges apart, so the interior loop has no conditional loads and vectorizes.
  g[0] = m.grad(A(0), x[0], D > 1 ? x[1] : A(0), false, D > 1, rc);
  for (int64_t i = 1; i + 1 < D; ++i) g[i] = m.grad(x[i - 1], x[i], x[i + 1], true, true, rc);
  if (D > 1) g[D - 1] = m.grad(x[D - 2], x[D - 1], A(0), true, false, rc);
}

// Rows that rows_cpu hands Rows::kRowLanes at a time to a row object's energies / grads, transposed:
// element i of row l at i * kRowLanes + l. The lanes are independent, so the loops vectorize (one row's
// running sum, and a row's neighbour and edge selects, did not), and each row is computed in row_energy's
// and row_grad's order. Whether a row object has that path (LocalRows and GaussRows do): C++17, as torch 2.11
// builds extensions with -std=c++17, so no concepts or requires-expressions here (tests/test_cxx17.py).
template <typename Rows, typename A, typename = void>
struct HasLaneRows : std::false_type {};
template <typename Rows, typename A>
struct HasLaneRows<Rows, A, std::void_t<decltype(std::declval<const Rows&>().grads(
                                std::declval<A*>(), std::declval<A*>(), int64_t{}))>> : std::true_type {};

// A local model as a row object (grad, energy), the shape the CPU chains use.
template <typename A, typename M>
struct LocalRows {
  // Two AVX registers of floats: each step of a sum is two independent adds (with 8 lanes, one chain waited
  // on each add's latency: B = 32768, D = 16 float32, 2 cores, harmonic energy 90 -> 46 us).
  static constexpr int64_t kRowLanes = 16;
  M m;
  void grad(const A* x, A* g, int64_t D) const { row_grad(m, x, g, D); }
  A energy(const A* x, int64_t D) const { return row_energy(m, x, D); }

  // row_energy of kRowLanes rows (x_t transposed, see HasLaneRows) into out[l].
  void energies(const A* x_t, int64_t D, A* out) const {
    A s0[kRowLanes] = {}, s1[kRowLanes] = {}, sum[kRowLanes] = {};
    if (D > kSumBlock) {
      A s[3 * kRowLanes];
      wide_sums<A, 3 * kRowLanes>(D, s, [&](int64_t i0, int64_t i1, A* t) {
        add_block(x_t, i0, i1, D, t, t + kRowLanes, t + 2 * kRowLanes);
      });
      for (int64_t l = 0; l < kRowLanes; ++l) out[l] = m.finish(s[2 * kRowLanes + l], s[l], s[kRowLanes + l], D);
      return;
    }
    add_block(x_t, 0, D, D, s0, s1, sum);
    for (int64_t l = 0; l < kRowLanes; ++l) out[l] = m.finish(sum[l], s0[l], s1[l], D);
  }

  // Elements [i0, i1) of kRowLanes rows of D (x_t transposed) into the running statistics and sums.
  void add_block(const A* x_t, int64_t i0, int64_t i1, int64_t D, A* s0, A* s1, A* sum) const {
    if constexpr (M::kNeighbours) {  // the last element has no neighbour: its own call, with a constant flag
      for (int64_t i = i0; i < std::min(i1, D - 1); ++i) add_terms<true>(x_t + i * kRowLanes, s0, s1, sum);
      if (i1 == D) add_terms<false>(x_t + (D - 1) * kRowLanes, s0, s1, sum);
    } else {  // not add_terms<false>: that measured 0-15% slower for these models (session 26, placement)
      for (int64_t i = i0; i < i1; ++i) {
        const A* x_i = x_t + i * kRowLanes;
        for (int64_t l = 0; l < kRowLanes; ++l) {
          m.stats(x_i[l], s0[l], s1[l]);
          sum[l] += m.term(x_i[l], A(0), false);
        }
      }
    }
  }

  // Element i of kRowLanes rows (x_i; its neighbours at x_i + kRowLanes when kHasNext) into the running
  // statistics and sums. kHasNext a constant, not a per-element flag and a pointer to zeros: GCC left
  // that form of Rosenbrock's loop scalar (B=32768 D=16 float32, 2 cores: 152 -> 48 us).
  template <bool kHasNext>
  void add_terms(const A* x_i, A* s0, A* s1, A* sum) const {
    for (int64_t l = 0; l < kRowLanes; ++l) {
      m.stats(x_i[l], s0[l], s1[l]);
      sum[l] += m.term(x_i[l], kHasNext ? x_i[kRowLanes + l] : A(0), kHasNext);
    }
  }

  // row_grad of kRowLanes rows (x_t and g_t transposed, see HasLaneRows).
  void grads(const A* x_t, A* g_t, int64_t D) const {
    A s0[kRowLanes] = {}, s1[kRowLanes] = {}, c0[kRowLanes], c1[kRowLanes];
    const auto add_stats = [&](int64_t i0, int64_t i1, A* t0, A* t1) {
      for (int64_t i = i0; i < i1; ++i)
        for (int64_t l = 0; l < kRowLanes; ++l) m.stats(x_t[i * kRowLanes + l], t0[l], t1[l]);
    };
    if (M::kStats && D <= kSumBlock) {
      add_stats(0, D, s0, s1);
    } else if (M::kStats) {
      A s[2 * kRowLanes];
      wide_sums<A, 2 * kRowLanes>(D, s, [&](int64_t i0, int64_t i1, A* t) { add_stats(i0, i1, t, t + kRowLanes); });
      std::copy(s, s + kRowLanes, s0);
      std::copy(s + kRowLanes, s + 2 * kRowLanes, s1);
    }
    for (int64_t l = 0; l < kRowLanes; ++l) {
      const RowConst<A> rc = m.prepare(s0[l], s1[l], D);
      c0[l] = rc.c0;
      c1[l] = rc.c1;
    }
    for (int64_t i = 0; i < D; ++i) {
      const A* x_i = x_t + i * kRowLanes;
      A* g_i = g_t + i * kRowLanes;
      // The neighbours an element has, as constants (see add_terms). Per element, not with the edges
      // peeled as in row_grad: that form measured Rosenbrock's score 86 -> 159 us (session 26).
      if constexpr (M::kNeighbours) {
        if (i > 0 && i + 1 < D) {
          grad_terms<true, true>(x_i, c0, c1, g_i);
        } else if (i + 1 < D) {
          grad_terms<false, true>(x_i, c0, c1, g_i);
        } else if (i > 0) {
          grad_terms<true, false>(x_i, c0, c1, g_i);
        } else {
          grad_terms<false, false>(x_i, c0, c1, g_i);
        }
      } else {
        grad_terms<false, false>(x_i, c0, c1, g_i);
      }
    }
  }

 private:
  // The gradient of element i of kRowLanes rows (x_i; its neighbours kRowLanes before and after, where
  // the flags say so) with the rows' constants c0, c1. Computed into a local array, then stored: GCC
  // unrolls the lane loop and, unsure whether g_i overlaps x_i, kept it scalar (Rosenbrock's score).
  template <bool kHasPrev, bool kHasNext>
  void grad_terms(const A* x_i, const A* c0, const A* c1, A* g_i) const {
    A g[kRowLanes];
    for (int64_t l = 0; l < kRowLanes; ++l) {
      const A prev = kHasPrev ? x_i[l - kRowLanes] : A(0), next = kHasNext ? x_i[kRowLanes + l] : A(0);
      g[l] = m.grad(prev, x_i[l], next, kHasPrev, kHasNext, RowConst<A>{c0[l], c1[l]});
    }
    for (int64_t l = 0; l < kRowLanes; ++l) g_i[l] = g[l];
  }
};
static_assert(HasLaneRows<LocalRows<float, Harmonic<float>>, float>::value, "rows_cpu's lane-wise path");

// One AVX register of float or double (a GCC/Clang vector extension; two SSE registers where AVX is off).
template <typename A>
struct Simd;
template <>
struct Simd<float> { typedef float Vec __attribute__((vector_size(32))); };
template <>
struct Simd<double> { typedef double Vec __attribute__((vector_size(32))); };

// The Gaussian with its symmetrized precision and mean in A, for rows of D <= kCpuGaussianMaxD (wider
// ones take a matrix product). Psym·(x − μ) is a sum of Psym's rows (it is symmetric) scaled by x − μ,
// built a band of columns at a time in vector registers, with Psym's rows padded with zeros to whole
// bands. A band is up to 8 registers wide, so that many chains of multiply-adds overlap (with one, D = 64
// waited on each add's latency). The plain loops kept the sums in memory (bfloat16 scores, D = 16, 2
// cores: 1.2 ms against eager's 0.5) and the energy's dot products did not vectorize (D = 64: 32 ms).
template <typename A>
struct GaussRows {
  using Vec = typename Simd<A>::Vec;
  static constexpr int64_t kLanes = sizeof(Vec) / sizeof(A);
  static_assert(kCpuGaussianMaxD % (8 * kLanes) == 0, "whole bands of D <= kCpuGaussianMaxD fit its buffers");
  int64_t band;          // registers per band: 1, 2, 4 or 8
  int64_t width;         // D rounded up to whole bands
  std::vector<A> p, mu;  // p: D × width, ½(P + Pᵀ) and zeros
  // Psym for the lane-wise path: blocks of kSumsAtOnce rows, column by column (element (b·kSumsAtOnce + k, j)
  // at (b·D + j)·kSumsAtOnce + k), rows past D zero.
  std::vector<A> p_blocks;

  static int64_t band_for(int64_t registers) {  // the power of 2 up to 8 that covers them
    return registers > 4 ? 8 : registers > 2 ? 4 : registers;
  }
  template <typename T>  // the last argument only names T
  GaussRows(const at::Tensor& mean, const at::Tensor& precision, int64_t D, const T*)
      : band(band_for((D + kLanes - 1) / kLanes)),
        width((D + band * kLanes - 1) / (band * kLanes) * (band * kLanes)),
        p(D * width, A(0)),
        mu(D),
        p_blocks(sum_blocks(D) * kSumsAtOnce * D, A(0)) {
    TORCH_CHECK(D <= kCpuGaussianMaxD, "GaussRows: rows of D = ", D, " go through a matrix product");
    const at::Tensor m = mean.contiguous(), q = precision.contiguous();
    const T* mp = m.const_data_ptr<T>();
    const T* qp = q.const_data_ptr<T>();
    for (int64_t i = 0; i < D; ++i) {
      mu[i] = static_cast<A>(mp[i]);
      for (int64_t j = 0; j < D; ++j) {
        p[i * width + j] = A(0.5) * (static_cast<A>(qp[i * D + j]) + static_cast<A>(qp[j * D + i]));
        p_blocks[(i / kSumsAtOnce * D + j) * kSumsAtOnce + i % kSumsAtOnce] = p[i * width + j];
      }
    }
  }
  template <int kBand>
  void bands(const A* d, A* s, int64_t D, int64_t stored) const {
    for (int64_t column = 0; column < width; column += kBand * kLanes) {
      Vec sum[kBand] = {};
      for (int64_t j = 0; j < D; ++j) {
        const A* row = p.data() + j * width + column;
        for (int k = 0; k < kBand; ++k) {
          Vec v;
          std::memcpy(&v, row + k * kLanes, sizeof(Vec));  // an unaligned load
          sum[k] += d[j] * v;
        }
      }
      if (column + kBand * kLanes <= stored) {
        std::memcpy(s + column, sum, sizeof(sum));
      } else {  // the last band of a grad: g holds D values
        A last[kBand * kLanes];
        std::memcpy(last, sum, sizeof(sum));
        for (int64_t i = 0; i < stored - column; ++i) s[column + i] = last[i];
      }
    }
  }
  // d = x − μ (D values) and s = Psym·d (its first `stored` values: D, or width).
  void product(const A* x, A* d, A* s, int64_t D, int64_t stored) const {
    for (int64_t j = 0; j < D; ++j) d[j] = x[j] - mu[j];
    switch (band) {
      case 1: return bands<1>(d, s, D, stored);
      case 2: return bands<2>(d, s, D, stored);
      case 4: return bands<4>(d, s, D, stored);
      default: return bands<8>(d, s, D, stored);
    }
  }
  void grad(const A* x, A* g, int64_t D) const {
    A d[kCpuGaussianMaxD];
    product(x, d, g, D, D);
  }
  A energy(const A* x, int64_t D) const {
    A d[kCpuGaussianMaxD], s[kCpuGaussianMaxD];  // width <= kCpuGaussianMaxD: whole bands stored
    product(x, d, s, D, width);
    A e = 0;
    for (int64_t i = 0; i < D; ++i) e += d[i] * s[i];
    return A(0.5) * e;
  }

  // ---- kRowLanes rows at once, transposed (rows_cpu's lane-wise path; see HasLaneRows): element i of the
  // rows is one vector of kRowLanes values, so Psym·d is Psym's scalars times whole vectors, with no
  // horizontal sums. B = 32768, D = 16, 2 cores: bfloat16 score 0.39-0.54 ms row by row, 0.22 ms so;
  // float32 score 0.17-1.36 ms through BLAS (a skinny matrix product, run slowly and unevenly), 0.16 ms so.
  static constexpr int64_t kRowLanes = 8;  // one AVX register of floats (16: the sums below spill, 5x slower)
  typedef A LaneVec __attribute__((vector_size(kRowLanes * sizeof(A))));
  static constexpr int64_t kSumsAtOnce = 8;  // output elements summed at once: 8 chains of multiply-adds overlap
  static int64_t sum_blocks(int64_t D) { return (D + kSumsAtOnce - 1) / kSumsAtOnce; }

  // d = x − μ and s = Psym·d, D vectors each (s: whole blocks of kSumsAtOnce, the padding zero).
  void lane_product(const A* x_t, LaneVec* d, LaneVec* s, int64_t D) const {
    for (int64_t j = 0; j < D; ++j) {
      LaneVec x_j;  // loaded into a register (copied into d[j] and then read, it stalled on store forwarding)
      std::memcpy(&x_j, x_t + j * kRowLanes, sizeof(LaneVec));
      d[j] = x_j - mu[j];
    }
    for (int64_t b = 0; b < sum_blocks(D); ++b) {
      LaneVec sum[kSumsAtOnce] = {};
      const A* column = p_blocks.data() + b * D * kSumsAtOnce;
      for (int64_t j = 0; j < D; ++j, column += kSumsAtOnce)
        for (int k = 0; k < kSumsAtOnce; ++k) sum[k] += column[k] * d[j];
      std::memcpy(s + b * kSumsAtOnce, sum, sizeof(sum));
    }
  }
  void grads(const A* x_t, A* g_t, int64_t D) const {
    LaneVec d[kCpuGaussianMaxD], s[kCpuGaussianMaxD];
    lane_product(x_t, d, s, D);
    std::memcpy(g_t, s, D * sizeof(LaneVec));
  }
  void energies(const A* x_t, int64_t D, A* out) const {
    LaneVec d[kCpuGaussianMaxD], s[kCpuGaussianMaxD];
    lane_product(x_t, d, s, D);
    LaneVec e = {};
    for (int64_t i = 0; i < D; ++i) e += d[i] * s[i];
    for (int64_t l = 0; l < kRowLanes; ++l) out[l] = A(0.5) * e[l];
  }
};
static_assert(HasLaneRows<GaussRows<float>, float>::value, "rows_cpu's lane-wise path");

// ---------------------------------------------------------------- the CPU chains' shared parts

// The CPU chains' random stream. Row r draws from Philox subsequence r: its normals, D a step and step after
// step, are the calls' words read in order (normal j = step·D + i is lane j % 4 of call j / 4). HMC's accept
// uniforms come from subsequence r + 2^63 (no row reaches it): step s's is lane s % 4 of call s / 4. So a chain's
// first n steps draw the same numbers whatever n_steps is (a shorter chain on the same seed is a prefix).
// Until session 47 each step took ceil(D / 4) calls of its own, so rows of D = 1 or 2 drew 4 or 2 times the
// normals they used (as the CUDA kernels did until session 48; the CPU and CUDA generators are separate streams).
// Draws are made for a batch of steps at once, a multiple of 4 steps, so that a batch starts at a whole call.
struct ChainStream {
  jk::PhiloxSeed seed;
  int64_t D, n_steps;
  int64_t batch_steps() const {  // about kPhiloxBatchCpu calls' worth
    const int64_t steps = std::max<int64_t>(4, 4 * jk::kPhiloxBatchCpu / D / 4 * 4);
    return std::min(steps, (n_steps + 3) / 4 * 4);
  }
  // Where steps [s0, s0 + steps) draw (s0 a multiple of 4): their normals' first Philox call and the number of
  // calls (whole calls: room for batch_steps()·D normals), and the same for their accept uniforms.
  uint64_t first_normal_call(int64_t s0) const { return seed.offset / 4 + s0 * D / 4; }
  int64_t normal_calls(int64_t steps) const { return (steps * D + 3) / 4; }
  uint64_t first_accept_call(int64_t s0) const { return seed.offset / 4 + s0 / 4; }
  static int64_t accept_calls(int64_t steps) { return (steps + 3) / 4; }

  // The normals of row r's steps [s0, s0 + steps) into z, and their accept words into u.
  void normals(int64_t r, int64_t s0, int64_t steps, float* z) const {
    jk::normal4_batch_cpu(seed.seed, first_normal_call(s0), normal_calls(steps), z, r);
  }
  void accept_words(int64_t r, int64_t s0, int64_t steps, uint32_t* u) const {
    jk::philox_words_cpu(seed.seed, first_accept_call(s0), accept_calls(steps), u, kAcceptSubsequences + r);
  }
};


// Calls f(rows, T(0)) with the row object of the chain's model in x's dtype T (float32 or float64). The
// Gaussian's only where kWithGaussian: its rows wider than kCpuGaussianMaxD take the stepwise path
// (ebm_chains.cpp), so only the lanes meet it.
static_assert(kLaneChainMaxD >= kCpuGaussianMaxD, "the CPU chains' Gaussian rows all go through the lanes");
template <bool kWithGaussian, typename F>
void with_chain_rows(const at::Tensor& x, const ModelSpec& spec, const at::Tensor& mean, const at::Tensor& precision,
                     F&& f) {
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "ebm_chain_cpu", [&] {
    using A = scalar_t;
    if constexpr (kWithGaussian) {
      if (spec.kind == Model::Gaussian)
        return f(GaussRows<A>(mean, precision, x.size(1), static_cast<const A*>(nullptr)), A(0));
    }
    TORCH_CHECK(spec.kind != Model::Gaussian, "ebm: Gaussian chain rows of D = ", x.size(1),
                " reached the CPU row loop");
    with_local_model<A>(spec.kind, spec.p, [&](auto m) { f(LocalRows<A, decltype(m)>{m}, A(0)); });
  });
}

template <typename T>
LangevinUpdate<T> update_in(const LangevinUpdate<double>& u) {
  return {T(u.a), T(u.tau), T(u.lo), T(u.hi), u.clamp};
}

}  // namespace ebm
