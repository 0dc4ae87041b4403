// Family `ebm`: op schemas, the op functions and their CPU loops.
// Each op is one function registered for CPU, CUDA and Meta: it checks its arguments,
// allocates the outputs and stops there on the Meta device (fake tensors), then runs the
// CPU loop or the CUDA launcher (ebm.cu). The parts made of ATen ops (wide Gaussian rows
// through a matrix product, the stepwise chains for wide rows) live here too and serve
// every device, so ebm.cu holds only custom kernels (and its cold nvcc time stays low).
// Energies and scores loop over rows (at::parallel_for); the CPU chains run each row's
// whole chain in one task, so a row's state stays in cache for all the steps.
#include <ATen/Dispatch.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/Parallel.h>
#include <ATen/ops/addmm.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/rand.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#if defined(__AVX__)
#include <immintrin.h>
#endif

#include "cpu_loops.h"
#include "ebm.h"
#include "jk.h"
#include "philox.h"

namespace ebm {

#ifdef JK_WITH_CUDA
// ebm.cu: launchers for contiguous tensors that ebm.cpp has checked and allocated.
void local_rows_cuda(const at::TensorBase& x, const at::TensorBase& out, const ModelSpec& spec, bool score);
void gaussian_rows_cuda(const at::TensorBase& x, const at::TensorBase& mean, const at::TensorBase& precision,
                        const at::TensorBase& out, bool score);
void langevin_update_cuda(const at::TensorBase& x, const at::TensorBase& g, const at::TensorBase& out,
                          const at::TensorBase& traj, const LangevinUpdate<double>& u,
                          const std::optional<at::Generator>& generator);
void langevin_chain_cuda(const at::TensorBase& x, const at::TensorBase& out, const at::TensorBase& traj,
                         const ModelSpec& spec, const at::TensorBase& mean, const at::TensorBase& precision,
                         int64_t n_steps, const LangevinUpdate<double>& u, int64_t thin,
                         const std::optional<at::Generator>& generator);
void hmc_chain_cuda(const at::TensorBase& x, const at::TensorBase& out, const at::TensorBase& accept_rate,
                    const at::TensorBase& traj, const ModelSpec& spec, const at::TensorBase& mean,
                    const at::TensorBase& precision, int64_t n_steps, double step_size, int64_t n_leapfrog,
                    int64_t thin, const std::optional<at::Generator>& generator);
#endif

// ---------------------------------------------------------------- checks

// x is a (B, D) batch of floating rows with D >= min_cols.
void check_rows(const at::Tensor& x, int64_t min_cols) {
  jk::check_float(x, "x");
  jk::check_dim(x, "x", 2);
  TORCH_CHECK_VALUE(x.size(1) >= min_cols, "x must have at least ", std::to_string(min_cols),
                    " column(s) (D), got shape ", jk::shape(x.sizes()));
}

void check_gaussian_args(const at::Tensor& x, const at::Tensor& mean, const at::Tensor& precision) {
  check_rows(x, 1);
  const int64_t D = x.size(1);
  jk::check_same_device(x, "x", mean, "mean");
  jk::check_same_device(x, "x", precision, "precision");
  jk::check_same_dtype(x, "x", mean, "mean");
  jk::check_same_dtype(x, "x", precision, "precision");
  const std::string d = std::to_string(D);
  TORCH_CHECK_VALUE(mean.dim() == 1 && mean.size(0) == D, "mean must have shape (D,) = (", d,
                    ",) to match x of shape ", jk::shape(x.sizes()), ", got ", jk::shape(mean.sizes()));
  TORCH_CHECK_VALUE(precision.dim() == 2 && precision.size(0) == D && precision.size(1) == D,
                    "precision must have shape (D, D) = (", d, ", ", d, ") to match x of shape ",
                    jk::shape(x.sizes()), ", got ", jk::shape(precision.sizes()));
}

void check_step_args(const at::Tensor& x, const at::Tensor& grad, double step_size, double noise_scale,
                     std::optional<double> clamp_min, std::optional<double> clamp_max) {
  jk::check_float(x, "x");
  jk::check_like(x, "x", grad, "grad");
  jk::check_positive(step_size, "step_size");
  TORCH_CHECK_VALUE(std::isfinite(noise_scale) && noise_scale >= 0, "noise_scale must be finite and >= 0, got ",
                    jk::num(noise_scale));
  if (clamp_min) jk::check_finite(*clamp_min, "clamp_min");
  if (clamp_max) jk::check_finite(*clamp_max, "clamp_max");
  if (clamp_min && clamp_max)
    TORCH_CHECK_VALUE(*clamp_min <= *clamp_max, "clamp: clamp_min (", jk::num(*clamp_min),
                      ") must be <= clamp_max (", jk::num(*clamp_max), ")");
}

// The model of a chain, by name, with its scalar parameters checked and padded.
ModelSpec parse_model(const at::Tensor& x, const std::string& model, const std::optional<at::Tensor>& mean,
                      const std::optional<at::Tensor>& precision, at::ArrayRef<double> params) {
  struct Entry {
    const char* name;
    Model kind;
    size_t n_params;
    const char* param_names;
  };
  static const Entry entries[] = {
      {"gaussian", Model::Gaussian, 0, "none (pass mean and precision)"},
      {"double_well", Model::DoubleWell, 2, "[barrier_height, b]"},
      {"harmonic", Model::Harmonic, 1, "[k]"},
      {"rosenbrock", Model::Rosenbrock, 2, "[a, b]"},
      {"rastrigin", Model::Rastrigin, 1, "[a]"},
      {"ackley", Model::Ackley, 3, "[a, b, c]"},
  };
  const Entry* found = nullptr;
  for (const Entry& e : entries)
    if (model == e.name) found = &e;
  TORCH_CHECK_VALUE(found != nullptr, "model must be one of gaussian, double_well, harmonic, rosenbrock, ",
                    "rastrigin, ackley; got '", model, "'");
  TORCH_CHECK_VALUE(params.size() == found->n_params, "params for model '", model, "' must be ",
                    found->param_names, " (", std::to_string(found->n_params), " values), got ",
                    std::to_string(params.size()), " values");
  ModelSpec spec{found->kind, {0.0, 0.0, 0.0}};
  for (size_t i = 0; i < params.size(); ++i) {
    jk::check_finite(params[i], "params");
    spec.p[i] = params[i];
  }
  if (spec.kind == Model::Gaussian) {
    TORCH_CHECK_VALUE(mean.has_value() && precision.has_value(),
                      "model 'gaussian' needs mean (D,) and precision (D, D)");
    check_gaussian_args(x, *mean, *precision);
  } else {
    TORCH_CHECK_VALUE(!mean.has_value() && !precision.has_value(), "mean and precision are only for model ",
                      "'gaussian', not '", model, "'");
    check_rows(x, spec.kind == Model::Rosenbrock ? 2 : 1);
  }
  return spec;
}

void check_chain_args(const at::Tensor& x, int64_t n_steps, double step_size, int64_t thin) {
  jk::check_float32_or_64(x, "x");
  TORCH_CHECK_VALUE(n_steps >= 0, "n_steps must be >= 0, got ", std::to_string(n_steps));
  jk::check_positive(step_size, "step_size");
  TORCH_CHECK_VALUE(thin >= 0, "thin must be >= 0 (0: no trajectory), got ", std::to_string(thin));
}

int64_t n_saved(int64_t n_steps, int64_t thin) { return thin > 0 ? n_steps / thin : 0; }

LangevinUpdate<double> make_update(double a, double tau, std::optional<double> clamp_min,
                                   std::optional<double> clamp_max) {
  const double inf = std::numeric_limits<double>::infinity();
  return {a, tau, clamp_min.value_or(-inf), clamp_max.value_or(inf), clamp_min.has_value() || clamp_max.has_value()};
}

// ---------------------------------------------------------------- the Gaussian for large D (any device)

inline at::Tensor symmetrized(const at::Tensor& precision) { return precision.add(precision.t()).mul_(0.5); }

// Large D (and the CPU in float32/float64) goes through a matrix product: S = (x − μ)·Psym,
// score = −S, energy = ½ Σ (x − μ)·S.
at::Tensor gaussian_matmul(const at::Tensor& x, const at::Tensor& mean, const at::Tensor& precision, bool energy) {
  if (!energy) return at::matmul(mean.sub(x), symmetrized(precision));  // −(x − μ)·Psym, no pass to negate
  const at::Tensor diff = x.sub(mean);
  const at::Tensor s = at::matmul(diff, symmetrized(precision));
  const bool half = x.scalar_type() == at::kHalf || x.scalar_type() == at::kBFloat16;
  return half ? diff.mul(s).sum(1, false, at::kFloat).mul_(0.5).to(x.scalar_type()) : diff.mul_(s).sum(1).mul_(0.5);
}

// ---------------------------------------------------------------- CPU row math

template <typename A, typename M>
A row_energy(const M& m, const A* x, int64_t D) {
  A s0 = 0, s1 = 0, sum = 0;
  for (int64_t i = 0; i < D; ++i) {
    m.stats(x[i], s0, s1);
    sum += m.term(x[i], i + 1 < D ? x[i + 1] : A(0), i + 1 < D);
  }
  return m.finish(sum, s0, s1, D);
}

template <typename A, typename M>
void row_grad(const M& m, const A* x, A* g, int64_t D) {
  A s0 = 0, s1 = 0;
  if (M::kStats)
    for (int64_t i = 0; i < D; ++i) m.stats(x[i], s0, s1);
  const RowConst<A> rc = m.prepare(s0, s1, D);
  if constexpr (!M::kNeighbours) {  // no neighbour loads or edge selects: a loop that vectorizes
    for (int64_t i = 0; i < D; ++i) g[i] = m.grad(A(0), x[i], A(0), false, false, rc);
    return;
  }
  // The edges apart, so the interior loop has no conditional loads and vectorizes.
  g[0] = m.grad(A(0), x[0], D > 1 ? x[1] : A(0), false, D > 1, rc);
  for (int64_t i = 1; i + 1 < D; ++i) g[i] = m.grad(x[i - 1], x[i], x[i + 1], true, true, rc);
  if (D > 1) g[D - 1] = m.grad(x[D - 2], x[D - 1], A(0), true, false, rc);
}

// Rows that rows_cpu hands kRowLanes at a time to LocalRows::energies / grads, transposed: element i of
// row l at i * kRowLanes + l. The lanes are independent, so the loops vectorize (one row's running sum,
// and a row's neighbour and edge selects, did not), and each row is computed in row_energy's and
// row_grad's order.
constexpr int64_t kRowLanes = 8;

// Whether a row object has that lane-wise path (LocalRows does). C++17: torch 2.11 builds extensions
// with -std=c++17, so no concepts or requires-expressions here (tests/test_cxx17.py).
template <typename Rows, typename A, typename = void>
struct HasLaneRows : std::false_type {};
template <typename Rows, typename A>
struct HasLaneRows<Rows, A, std::void_t<decltype(std::declval<const Rows&>().grads(
                                std::declval<A*>(), std::declval<A*>(), int64_t{}))>> : std::true_type {};

// A local model as a row object (grad, energy), the shape the CPU chains use.
template <typename A, typename M>
struct LocalRows {
  M m;
  void grad(const A* x, A* g, int64_t D) const { row_grad(m, x, g, D); }
  A energy(const A* x, int64_t D) const { return row_energy(m, x, D); }

  // row_energy of kRowLanes rows (x_t transposed, see kRowLanes) into out[l].
  void energies(const A* x_t, int64_t D, A* out) const {
    A s0[kRowLanes] = {}, s1[kRowLanes] = {}, sum[kRowLanes] = {};
    if constexpr (M::kNeighbours) {  // the last element has no neighbour: its own call, with a constant flag
      for (int64_t i = 0; i + 1 < D; ++i) add_terms<true>(x_t + i * kRowLanes, s0, s1, sum);
      if (D > 0) add_terms<false>(x_t + (D - 1) * kRowLanes, s0, s1, sum);
    } else {  // not add_terms<false>: that measured 0-15% slower for these models (session 26, placement)
      for (int64_t i = 0; i < D; ++i) {
        const A* x_i = x_t + i * kRowLanes;
        for (int64_t l = 0; l < kRowLanes; ++l) {
          m.stats(x_i[l], s0[l], s1[l]);
          sum[l] += m.term(x_i[l], A(0), false);
        }
      }
    }
    for (int64_t l = 0; l < kRowLanes; ++l) out[l] = m.finish(sum[l], s0[l], s1[l], D);
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

  // row_grad of kRowLanes rows (x_t and g_t transposed, see kRowLanes).
  void grads(const A* x_t, A* g_t, int64_t D) const {
    A s0[kRowLanes] = {}, s1[kRowLanes] = {}, c0[kRowLanes], c1[kRowLanes];
    if (M::kStats)
      for (int64_t i = 0; i < D; ++i)
        for (int64_t l = 0; l < kRowLanes; ++l) m.stats(x_t[i * kRowLanes + l], s0[l], s1[l]);
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

  static int64_t band_for(int64_t registers) {  // the power of 2 up to 8 that covers them
    return registers > 4 ? 8 : registers > 2 ? 4 : registers;
  }
  template <typename T>  // the last argument only names T
  GaussRows(const at::Tensor& mean, const at::Tensor& precision, int64_t D, const T*)
      : band(band_for((D + kLanes - 1) / kLanes)),
        width((D + band * kLanes - 1) / (band * kLanes) * (band * kLanes)), p(D * width, A(0)), mu(D) {
    TORCH_CHECK(D <= kCpuGaussianMaxD, "GaussRows: rows of D = ", D, " go through a matrix product");
    const at::Tensor m = mean.contiguous(), q = precision.contiguous();
    const T* mp = m.const_data_ptr<T>();
    const T* qp = q.const_data_ptr<T>();
    for (int64_t i = 0; i < D; ++i) {
      mu[i] = static_cast<A>(mp[i]);
      for (int64_t j = 0; j < D; ++j)
        p[i * width + j] = A(0.5) * (static_cast<A>(qp[i * D + j]) + static_cast<A>(qp[j * D + i]));
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
};

#if defined(__AVX__)
// r[i] = column i of the 8 x 8 floats held in rows r[0..8) (an involution): 24 shuffles.
inline void transpose8x8(__m256 (&r)[8]) {
  __m256 t[8], s[8];
  for (int k = 0; k < 4; ++k) {
    t[2 * k] = _mm256_unpacklo_ps(r[2 * k], r[2 * k + 1]);
    t[2 * k + 1] = _mm256_unpackhi_ps(r[2 * k], r[2 * k + 1]);
  }
  for (int k = 0; k < 2; ++k) {
    s[4 * k] = _mm256_shuffle_ps(t[4 * k], t[4 * k + 2], _MM_SHUFFLE(1, 0, 1, 0));
    s[4 * k + 1] = _mm256_shuffle_ps(t[4 * k], t[4 * k + 2], _MM_SHUFFLE(3, 2, 3, 2));
    s[4 * k + 2] = _mm256_shuffle_ps(t[4 * k + 1], t[4 * k + 3], _MM_SHUFFLE(1, 0, 1, 0));
    s[4 * k + 3] = _mm256_shuffle_ps(t[4 * k + 1], t[4 * k + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int k = 0; k < 4; ++k) {
    r[k] = _mm256_permute2f128_ps(s[k], s[k + 4], 0x20);
    r[k + 4] = _mm256_permute2f128_ps(s[k], s[k + 4], 0x31);
  }
}
#endif

// kRowLanes rows of D elements (row stride D) to lanes and back: lanes[i * kRowLanes + l] = rows[l * D + i],
// with scale applied (the scores' sign) on the way back. float32 rows go 8 x 8 floats at a time through
// AVX registers; element by element, the transposition cost more than the energies themselves.
template <typename T, typename A>
void rows_to_lanes(const T* rows, int64_t D, A* lanes) {
  int64_t c = 0;
#if defined(__AVX__)
  if constexpr (std::is_same_v<T, float> && std::is_same_v<A, float> && kRowLanes == 8) {
    for (; c + 8 <= D; c += 8) {
      __m256 r[8];
      for (int l = 0; l < 8; ++l) r[l] = _mm256_loadu_ps(rows + l * D + c);
      transpose8x8(r);
      for (int i = 0; i < 8; ++i) _mm256_storeu_ps(lanes + (c + i) * 8, r[i]);
    }
  }
#endif
  for (int64_t i = c; i < D; ++i)  // (i outer, here and below: measured fastest)
    for (int64_t l = 0; l < kRowLanes; ++l) lanes[i * kRowLanes + l] = static_cast<A>(rows[l * D + i]);
}

template <typename T, typename A>
void lanes_to_rows(const A* lanes, int64_t D, A scale, T* rows) {
  int64_t c = 0;
#if defined(__AVX__)
  if constexpr (std::is_same_v<T, float> && std::is_same_v<A, float> && kRowLanes == 8) {
    const __m256 factor = _mm256_set1_ps(scale);
    for (; c + 8 <= D; c += 8) {
      __m256 r[8];
      for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(lanes + (c + i) * 8);
      transpose8x8(r);
      for (int l = 0; l < 8; ++l) _mm256_storeu_ps(rows + l * D + c, _mm256_mul_ps(r[l], factor));
    }
  }
#endif
  for (int64_t i = c; i < D; ++i)
    for (int64_t l = 0; l < kRowLanes; ++l) rows[l * D + i] = jk::from_opmath<T>(scale * lanes[i * kRowLanes + l]);
}

inline int64_t row_grain(int64_t D) { return std::max<int64_t>(1, jk::kCpuGrain / std::max<int64_t>(D, 1)); }

// Energy (out: (B,)) or score (out: (B, D)) of every row.
template <typename T, typename Rows>
void rows_cpu(const at::Tensor& x, const at::Tensor& out, const Rows& rows, bool score) {
  using A = at::opmath_type<T>;
  const int64_t B = x.size(0), D = x.size(1);
  const T* xp = x.const_data_ptr<T>();
  T* op = out.mutable_data_ptr<T>();
  at::parallel_for(0, B, row_grain(D), [&](int64_t begin, int64_t end) {
    std::vector<A> row(D), g(D);
    if constexpr (HasLaneRows<Rows, A>::value) {  // whole blocks of kRowLanes rows at once
      std::vector<A> x_t(D * kRowLanes), g_t(score ? D * kRowLanes : 0);
      A energy[kRowLanes];
      for (; begin + kRowLanes <= end; begin += kRowLanes) {
        rows_to_lanes(xp + begin * D, D, x_t.data());
        if (!score) {
          rows.energies(x_t.data(), D, energy);
          for (int64_t l = 0; l < kRowLanes; ++l) op[begin + l] = jk::from_opmath<T>(energy[l]);
          continue;
        }
        rows.grads(x_t.data(), g_t.data(), D);
        lanes_to_rows(g_t.data(), D, A(-1), op + begin * D);
      }
    }
    for (int64_t r = begin; r < end; ++r) {  // (the rows left after whole blocks)
      jk::widen(xp + r * D, row.data(), D);
      if (!score) {
        op[r] = jk::from_opmath<T>(rows.energy(row.data(), D));
        continue;
      }
      rows.grad(row.data(), g.data(), D);
      for (int64_t i = 0; i < D; ++i) g[i] = -g[i];
      jk::narrow(g.data(), op + r * D, D);
    }
  });
}


// Energy (out (B,)) or score (out (B, D)) of a local model, for contiguous x on any device.
void local_rows(const at::Tensor& x, const at::Tensor& out, const ModelSpec& spec, bool score) {
  if (x.size(0) == 0) return;
#ifdef JK_WITH_CUDA
  if (x.is_cuda()) {
    local_rows_cuda(x, out, spec, score);
    return;
  }
#endif
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "ebm_local_cpu", [&] {
    using A = at::opmath_type<scalar_t>;
    with_local_model<A>(spec.kind, spec.p, [&](auto m) {
      using M = decltype(m);
      if constexpr (!M::kStats && !M::kNeighbours) {
        if (score) {  // separable: each element's score alone, one flat loop the compiler vectorizes
          jk::cpu_elementwise<scalar_t>(out, SeparableScore<M>{m}, x);
          return;
        }
      }
      rows_cpu<scalar_t>(x, out, LocalRows<A, M>{m}, score);
    });
  });
}

at::Tensor local_op(const at::Tensor& x, const ModelSpec& spec, bool score) {
  check_rows(x, spec.kind == Model::Rosenbrock ? 2 : 1);
  at::Tensor out = score ? at::empty(x.sizes(), x.options()) : at::empty({x.size(0)}, x.options());
  if (x.is_meta()) return out;
  local_rows(x.contiguous(), out, spec, score);
  return out;
}

at::Tensor gaussian_op(const at::Tensor& x, const at::Tensor& mean, const at::Tensor& precision, bool score) {
  check_gaussian_args(x, mean, precision);
  const int64_t D = x.size(1);
  const int64_t max_d = x.is_cuda() ? cuda_gaussian_max_d(x.scalar_type() == at::kDouble) : kCpuGaussianMaxD;
  // On the CPU, float32 and float64 rows go through BLAS at every width: 4-13x faster than the row
  // loops from D = 16 (measured on 2 cores, B = 2^16-2^18), ~5 µs slower only for a handful of rows.
  const bool cpu_blas = x.is_cpu() && (x.scalar_type() == at::kFloat || x.scalar_type() == at::kDouble);
  if (D > max_d || cpu_blas) return gaussian_matmul(x, mean, precision, !score);  // ATen ops: Meta included
  at::Tensor out = score ? at::empty(x.sizes(), x.options()) : at::empty({x.size(0)}, x.options());
  if (x.is_meta() || x.size(0) == 0) return out;
  const at::Tensor xc = x.contiguous(), mc = mean.contiguous(), pc = precision.contiguous();
#ifdef JK_WITH_CUDA
  if (x.is_cuda()) {
    gaussian_rows_cuda(xc, mc, pc, out, score);
    return out;
  }
#endif
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "ebm_gaussian_cpu", [&] {
    using A = at::opmath_type<scalar_t>;
    rows_cpu<scalar_t>(xc, out, GaussRows<A>(mc, pc, D, static_cast<scalar_t*>(nullptr)), score);
  });
  return out;
}

at::Tensor gaussian_energy(const at::Tensor& x, const at::Tensor& mean, const at::Tensor& precision) {
  return gaussian_op(x, mean, precision, false);
}

at::Tensor gaussian_score(const at::Tensor& x, const at::Tensor& mean, const at::Tensor& precision) {
  return gaussian_op(x, mean, precision, true);
}

// The ten local energy/score ops: check the scalar parameters (by name), then local_op.
template <bool kScore>
at::Tensor double_well_op(const at::Tensor& x, double barrier_height, double b) {
  jk::check_finite(barrier_height, "barrier_height");
  jk::check_finite(b, "b");
  return local_op(x, {Model::DoubleWell, {barrier_height, b, 0.0}}, kScore);
}

template <bool kScore>
at::Tensor harmonic_op(const at::Tensor& x, double k) {
  jk::check_finite(k, "k");
  return local_op(x, {Model::Harmonic, {k, 0.0, 0.0}}, kScore);
}

template <bool kScore>
at::Tensor rosenbrock_op(const at::Tensor& x, double a, double b) {
  jk::check_finite(a, "a");
  jk::check_finite(b, "b");
  return local_op(x, {Model::Rosenbrock, {a, b, 0.0}}, kScore);
}

template <bool kScore>
at::Tensor rastrigin_op(const at::Tensor& x, double a) {
  jk::check_finite(a, "a");
  return local_op(x, {Model::Rastrigin, {a, 0.0, 0.0}}, kScore);
}

template <bool kScore>
at::Tensor ackley_op(const at::Tensor& x, double a, double b, double c) {
  jk::check_finite(a, "a");
  jk::check_finite(b, "b");
  jk::check_finite(c, "c");
  return local_op(x, {Model::Ackley, {a, b, c}}, kScore);
}

// ---------------------------------------------------------------- Langevin step

// out = x + a·g + τ·ε elementwise (also into traj when defined); element i takes lane i % 4 of
// Philox block i / 4. The draws of a segment come first, in the batch form the compiler vectorizes;
// with τ = 0 (no noise) none are drawn.
template <typename T>
void langevin_update_cpu(const T* x, const T* g, T* out, T* traj, int64_t n, const LangevinUpdate<double>& u,
                         jk::PhiloxSeed seed) {
  using A = at::opmath_type<T>;
  const LangevinUpdate<A> upd{A(u.a), A(u.tau), A(u.lo), A(u.hi), u.clamp};
  const bool noise = u.tau != 0.0;
  constexpr int64_t kSegment = 1024;  // elements per pass, a multiple of 4
  at::parallel_for(0, (n + kSegment - 1) / kSegment, jk::kCpuGrain / kSegment, [&](int64_t s0, int64_t s1) {
    float drawn[kSegment];
    if (!noise) std::fill(drawn, drawn + kSegment, 0.0f);  // stays zero for every segment
    jk::OpmathSegment<T, kSegment> x_seg, g_seg, out_seg;
    for (int64_t seg = s0; seg < s1; ++seg) {
      const int64_t i0 = seg * kSegment, stop = std::min(n, i0 + kSegment), len = stop - i0;
      if (noise) jk::normal4_batch_cpu(seed.seed, seed.offset / 4 + i0 / 4, (len + 3) / 4, drawn);
      const A* xv = x_seg.read(x + i0, len);  // x and out may be one tensor: read before writing
      const A* gv = g_seg.read(g + i0, len);
      A* ov = out_seg.target(out + i0);
      for (int64_t j = 0; j < len; ++j) ov[j] = upd(xv[j], gv[j], static_cast<A>(drawn[j]));
      out_seg.store(out + i0, len);
      if (traj != nullptr) std::copy(out + i0, out + stop, traj + i0);
    }
  });
}

// out (and traj, when defined) = x + a·g + τ·ε for contiguous tensors of one dtype, any device.
// x and out may be the same tensor.
void langevin_update(const at::Tensor& x, const at::Tensor& g, const at::Tensor& out, const at::Tensor& traj,
                     const LangevinUpdate<double>& u, const std::optional<at::Generator>& generator) {
  if (x.numel() == 0) return;
#ifdef JK_WITH_CUDA
  if (x.is_cuda()) {
    langevin_update_cuda(x, g, out, traj, u, generator);
    return;
  }
#endif
  const jk::PhiloxSeed seed = jk::cpu_philox_seed(generator);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "ebm_langevin_step_cpu", [&] {
    langevin_update_cpu<scalar_t>(x.const_data_ptr<scalar_t>(), g.const_data_ptr<scalar_t>(),
                                  out.mutable_data_ptr<scalar_t>(),
                                  traj.defined() ? traj.mutable_data_ptr<scalar_t>() : nullptr, x.numel(), u, seed);
  });
}

at::Tensor langevin_step(const at::Tensor& x, const at::Tensor& grad, double step_size, double noise_scale,
                         std::optional<double> clamp_min, std::optional<double> clamp_max,
                         std::optional<at::Generator> generator) {
  check_step_args(x, grad, step_size, noise_scale, clamp_min, clamp_max);
  at::Tensor out = at::empty(x.sizes(), x.options());
  if (x.is_meta()) return out;
  langevin_update(x.contiguous(), grad.contiguous(), out, at::Tensor(),
                  make_update(-step_size, noise_scale * std::sqrt(2.0 * step_size), clamp_min, clamp_max), generator);
  return out;
}

void langevin_step_(at::Tensor& x, const at::Tensor& grad, double step_size, double noise_scale,
                    std::optional<double> clamp_min, std::optional<double> clamp_max,
                    std::optional<at::Generator> generator) {
  check_step_args(x, grad, step_size, noise_scale, clamp_min, clamp_max);
  TORCH_CHECK_VALUE(at::has_internal_overlap(x) != at::MemOverlap::Yes,
                    "x (updated in place) has elements that share memory (e.g. an expanded tensor); pass x.clone()");
  if (x.is_meta()) return;
  // Each element is read before it is written by the same thread, so grad may be x itself;
  // a grad that shares only part of x's memory is copied first.
  const bool aliased = at::get_overlap_status(x, grad) != at::MemOverlapStatus::No && !x.is_same(grad);
  const at::Tensor gc = aliased ? grad.clone(at::MemoryFormat::Contiguous) : grad.contiguous();
  const auto u = make_update(-step_size, noise_scale * std::sqrt(2.0 * step_size), clamp_min, clamp_max);
  if (x.is_contiguous()) {
    langevin_update(x, gc, x, at::Tensor(), u, generator);
  } else {
    at::Tensor out = at::empty(x.sizes(), x.options());
    langevin_update(x.contiguous(), gc, out, at::Tensor(), u, generator);
    x.copy_(out);
  }
}

// ---------------------------------------------------------------- chains, one row per task

struct ChainOut {
  at::Tensor x, accept, traj;
};

// Langevin: x ← x − η∇E(x) + τε for n_steps, state of a row in a scratch vector.
template <typename T, typename Rows>
void langevin_rows_cpu(const Rows& rows, const T* x0, T* xo, T* traj, int64_t B, int64_t D, int64_t n_steps,
                       const LangevinUpdate<T>& upd, int64_t thin, jk::PhiloxSeed seed) {
  const int64_t nq = (D + 3) / 4;  // Philox draws per row and step
  at::parallel_for(0, B, 1, [&](int64_t begin, int64_t end) {
    std::vector<T> x(D), g(D);
    std::vector<float> z(4 * nq);
    for (int64_t r = begin; r < end; ++r) {
      std::copy(x0 + r * D, x0 + (r + 1) * D, x.begin());
      for (int64_t step = 0; step < n_steps; ++step) {
        rows.grad(x.data(), g.data(), D);
        jk::normal4_batch_cpu(seed.seed, seed.offset / 4 + step * nq, nq, z.data(), r);
        for (int64_t i = 0; i < D; ++i) x[i] = upd(x[i], g[i], T(z[i]));
        if (thin > 0 && (step + 1) % thin == 0)
          std::copy(x.begin(), x.end(), traj + (((step + 1) / thin - 1) * B + r) * D);
      }
      std::copy(x.begin(), x.end(), xo + r * D);
    }
  });
}

// HMC: momentum p ~ N(0, I), n_leapfrog leapfrog steps of size ε, Metropolis accept on
// H = E(x) + ½|p|². Per step: nq Philox draws for p, one for the accept uniform.
template <typename T, typename Rows>
void hmc_rows_cpu(const Rows& rows, const T* x_in, T* xo, T* acc, T* traj, int64_t B, int64_t D, int64_t n_steps,
                  T eps, int64_t n_leapfrog, int64_t thin, jk::PhiloxSeed seed) {
  const int64_t nq = (D + 3) / 4;
  at::parallel_for(0, B, 1, [&](int64_t begin, int64_t end) {
    std::vector<T> x(D), x0(D), p(D), g(D);
    std::vector<float> z(4 * nq);
    for (int64_t r = begin; r < end; ++r) {
      std::copy(x_in + r * D, x_in + (r + 1) * D, x.begin());
      int64_t accepted = 0;
      for (int64_t step = 0; step < n_steps; ++step) {
        const uint64_t base = seed.offset / 4 + step * (nq + 1);
        jk::normal4_batch_cpu(seed.seed, base, nq, z.data(), r);
        for (int64_t i = 0; i < D; ++i) p[i] = T(z[i]);
        x0 = x;
        T h0 = rows.energy(x.data(), D);
        for (int64_t i = 0; i < D; ++i) h0 += T(0.5) * p[i] * p[i];
        rows.grad(x.data(), g.data(), D);
        for (int64_t i = 0; i < D; ++i) p[i] -= T(0.5) * eps * g[i];
        for (int64_t l = 0; l < n_leapfrog; ++l) {
          for (int64_t i = 0; i < D; ++i) x[i] += eps * p[i];
          rows.grad(x.data(), g.data(), D);
          const T kick = l + 1 == n_leapfrog ? T(0.5) * eps : eps;
          for (int64_t i = 0; i < D; ++i) p[i] -= kick * g[i];
        }
        T h1 = rows.energy(x.data(), D);
        for (int64_t i = 0; i < D; ++i) h1 += T(0.5) * p[i] * p[i];
        const float u = jk::uniform_open0(jk::philox4x32_10(seed.seed, base + nq, r).x);
        if (std::log(T(u)) < h0 - h1) {  // false when h1 is NaN or inf: rejected
          ++accepted;
        } else {
          x = x0;
        }
        if (thin > 0 && (step + 1) % thin == 0)
          std::copy(x.begin(), x.end(), traj + (((step + 1) / thin - 1) * B + r) * D);
      }
      std::copy(x.begin(), x.end(), xo + r * D);
      acc[r] = n_steps > 0 ? T(accepted) / T(n_steps) : T(0);
    }
  });
}

// Calls f(rows) with the row object of the chain's model, in dtype A.
template <typename A, typename F>
void with_rows(const ModelSpec& spec, const at::Tensor& mean, const at::Tensor& precision, int64_t D, F&& f) {
  if (spec.kind == Model::Gaussian) {
    f(GaussRows<A>(mean, precision, D, static_cast<const A*>(nullptr)));
  } else {
    with_local_model<A>(spec.kind, spec.p, [&](auto m) { f(LocalRows<A, decltype(m)>{m}); });
  }
}


// Langevin for wide rows, any device: per step the score (one addmm for the Gaussian, the
// local score kernel otherwise) and one fused update (noise + step + clamp + trajectory).
void langevin_stepwise(const at::Tensor& state, at::Tensor& traj, const ModelSpec& spec,
                       const std::optional<at::Tensor>& mean, const std::optional<at::Tensor>& precision,
                       int64_t n_steps, const LangevinUpdate<double>& u, int64_t thin,
                       const std::optional<at::Generator>& generator) {
  at::Tensor s = at::empty(state.sizes(), state.options());
  at::Tensor neg_p, pmu;
  if (spec.kind == Model::Gaussian) {
    const at::Tensor p_sym = symmetrized(*precision);
    neg_p = p_sym.neg();
    pmu = at::matmul(p_sym, *mean);
  }
  const LangevinUpdate<double> along_score{-u.a, u.tau, u.lo, u.hi, u.clamp};  // x + η·score
  for (int64_t step = 0; step < n_steps; ++step) {
    if (spec.kind == Model::Gaussian) {
      at::addmm_out(s, pmu, state, neg_p);
    } else {
      local_rows(state, s, spec, true);
    }
    const bool save = thin > 0 && (step + 1) % thin == 0;
    langevin_update(state, s, state, save ? traj.select(0, (step + 1) / thin - 1) : at::Tensor(), along_score,
                    generator);
  }
}

std::tuple<at::Tensor, at::Tensor> langevin_chain(const at::Tensor& x, const std::string& model,
                                                  const std::optional<at::Tensor>& mean,
                                                  const std::optional<at::Tensor>& precision,
                                                  at::ArrayRef<double> params, int64_t n_steps, double step_size,
                                                  double noise_scale, int64_t thin, std::optional<double> clamp_min,
                                                  std::optional<double> clamp_max,
                                                  std::optional<at::Generator> generator) {
  check_chain_args(x, n_steps, step_size, thin);
  const ModelSpec spec = parse_model(x, model, mean, precision, params);
  check_step_args(x, x, step_size, noise_scale, clamp_min, clamp_max);
  const int64_t B = x.size(0), D = x.size(1);
  at::Tensor out = at::empty(x.sizes(), x.options());
  at::Tensor traj = at::empty({n_saved(n_steps, thin), B, D}, x.options());
  if (x.is_meta() || B == 0) return {out, traj};
  const at::Tensor xc = x.contiguous();
  const auto u = make_update(-step_size, noise_scale * std::sqrt(2.0 * step_size), clamp_min, clamp_max);
  const bool is_double = x.scalar_type() == at::kDouble;
  const bool stepwise = x.is_cuda() ? D > cuda_langevin_max_d(is_double)
                                    : spec.kind == Model::Gaussian && D > kCpuGaussianMaxD;  // BLAS per step
  if (stepwise) {
    out.copy_(xc);
    langevin_stepwise(out, traj, spec, mean ? std::optional<at::Tensor>(mean->contiguous()) : mean,
                      precision ? std::optional<at::Tensor>(precision->contiguous()) : precision, n_steps, u, thin,
                      generator);
    return {out, traj};
  }
  const at::Tensor mc = mean ? mean->contiguous() : at::Tensor(), pc = precision ? precision->contiguous() : at::Tensor();
#ifdef JK_WITH_CUDA
  if (x.is_cuda()) {
    langevin_chain_cuda(xc, out, traj, spec, mc, pc, n_steps, u, thin, generator);
    return {out, traj};
  }
#endif
  const jk::PhiloxSeed seed = jk::cpu_philox_seed(generator);
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "ebm_langevin_chain_cpu", [&] {
    using T = scalar_t;
    const LangevinUpdate<T> upd{T(u.a), T(u.tau), T(u.lo), T(u.hi), u.clamp};
    with_rows<T>(spec, mc, pc, D, [&](const auto& rows) {
      langevin_rows_cpu<T>(rows, xc.const_data_ptr<T>(), out.mutable_data_ptr<T>(), traj.mutable_data_ptr<T>(), B, D,
                           n_steps, upd, thin, seed);
    });
  });
  return {out, traj};
}

// HMC for wide rows (on the GPU; Gaussian rows past kCpuGaussianMaxD on the CPU), composed of ATen ops and the
// energy/score ops: no host sync.
void hmc_stepwise(const at::Tensor& x, at::Tensor& state, at::Tensor& accepted, at::Tensor& traj,
                  const ModelSpec& spec, const at::Tensor& mean, const at::Tensor& precision, int64_t n_steps,
                  double eps, int64_t n_leapfrog, int64_t thin, const std::optional<at::Generator>& generator) {
  const int64_t B = x.size(0);
  const auto energy = [&](const at::Tensor& y) {
    return spec.kind == Model::Gaussian ? gaussian_op(y, mean, precision, false) : local_op(y, spec, false);
  };
  const auto score = [&](const at::Tensor& y) {
    return spec.kind == Model::Gaussian ? gaussian_op(y, mean, precision, true) : local_op(y, spec, true);
  };
  state.copy_(x);
  accepted.zero_();
  for (int64_t step = 0; step < n_steps; ++step) {
    const at::Tensor mom = at::randn(x.sizes(), generator, x.options());
    const at::Tensor h0 = energy(state).add(mom.mul(mom).sum(1), 0.5);
    at::Tensor xn = state.clone();
    at::Tensor pn = mom.add(score(xn), 0.5 * eps);
    for (int64_t l = 0; l < n_leapfrog; ++l) {
      xn.add_(pn, eps);
      pn.add_(score(xn), l + 1 == n_leapfrog ? 0.5 * eps : eps);
    }
    const at::Tensor h1 = energy(xn).add(pn.mul(pn).sum(1), 0.5);
    const at::Tensor accept = at::rand({B}, generator, x.options()).log_().lt(h0.sub(h1));  // NaN: rejected
    state.copy_(at::where(accept.unsqueeze(1), xn, state));
    accepted.add_(accept);
    if (thin > 0 && (step + 1) % thin == 0) traj.select(0, (step + 1) / thin - 1).copy_(state);
  }
  if (n_steps > 0) accepted.div_(double(n_steps));
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> hmc_chain(const at::Tensor& x, const std::string& model,
                                                         const std::optional<at::Tensor>& mean,
                                                         const std::optional<at::Tensor>& precision,
                                                         at::ArrayRef<double> params, int64_t n_steps,
                                                         double step_size, int64_t n_leapfrog, int64_t thin,
                                                         std::optional<at::Generator> generator) {
  check_chain_args(x, n_steps, step_size, thin);
  TORCH_CHECK_VALUE(n_leapfrog >= 1, "n_leapfrog must be >= 1, got ", std::to_string(n_leapfrog));
  const ModelSpec spec = parse_model(x, model, mean, precision, params);
  const int64_t B = x.size(0), D = x.size(1);
  at::Tensor out = at::empty(x.sizes(), x.options());
  at::Tensor acc = at::empty({B}, x.options());
  at::Tensor traj = at::empty({n_saved(n_steps, thin), B, D}, x.options());
  if (x.is_meta() || B == 0) return {out, acc, traj};
  const at::Tensor xc = x.contiguous();
  const at::Tensor mc = mean ? mean->contiguous() : at::Tensor(), pc = precision ? precision->contiguous() : at::Tensor();
  const bool stepwise = x.is_cuda() ? D > cuda_hmc_max_d(x.scalar_type() == at::kDouble)
                                    : spec.kind == Model::Gaussian && D > kCpuGaussianMaxD;  // BLAS per step
  if (stepwise) {
    hmc_stepwise(xc, out, acc, traj, spec, mc, pc, n_steps, step_size, n_leapfrog, thin, generator);
    return {out, acc, traj};
  }
#ifdef JK_WITH_CUDA
  if (x.is_cuda()) {
    hmc_chain_cuda(xc, out, acc, traj, spec, mc, pc, n_steps, step_size, n_leapfrog, thin, generator);
    return {out, acc, traj};
  }
#endif
  const jk::PhiloxSeed seed = jk::cpu_philox_seed(generator);
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "ebm_hmc_chain_cpu", [&] {
    using T = scalar_t;
    with_rows<T>(spec, mc, pc, D, [&](const auto& rows) {
      hmc_rows_cpu<T>(rows, xc.const_data_ptr<T>(), out.mutable_data_ptr<T>(), acc.mutable_data_ptr<T>(),
                      traj.mutable_data_ptr<T>(), B, D, n_steps, T(step_size), n_leapfrog, thin, seed);
    });
  });
  return {out, acc, traj};
}

// ---------------------------------------------------------------- registration

JK_LIBRARY(m) {
  jk::def_differentiable(m, "gaussian_energy(Tensor x, Tensor mean, Tensor precision) -> Tensor");
  jk::def_differentiable(m, "gaussian_score(Tensor x, Tensor mean, Tensor precision) -> Tensor");
  jk::def_differentiable(m, "double_well_energy(Tensor x, float barrier_height=2.0, float b=1.0) -> Tensor");
  jk::def_differentiable(m, "double_well_score(Tensor x, float barrier_height=2.0, float b=1.0) -> Tensor");
  jk::def_differentiable(m, "harmonic_energy(Tensor x, float k=1.0) -> Tensor");
  jk::def_differentiable(m, "harmonic_score(Tensor x, float k=1.0) -> Tensor");
  jk::def_differentiable(m, "rosenbrock_energy(Tensor x, float a=1.0, float b=100.0) -> Tensor");
  jk::def_differentiable(m, "rosenbrock_score(Tensor x, float a=1.0, float b=100.0) -> Tensor");
  jk::def_differentiable(m, "rastrigin_energy(Tensor x, float a=10.0) -> Tensor");
  jk::def_differentiable(m, "rastrigin_score(Tensor x, float a=10.0) -> Tensor");
  jk::def_differentiable(m, "ackley_energy(Tensor x, float a=20.0, float b=0.2, float c=6.283185307179586) -> Tensor");
  jk::def_differentiable(m, "ackley_score(Tensor x, float a=20.0, float b=0.2, float c=6.283185307179586) -> Tensor");
  jk::def_differentiable(m, "langevin_step(Tensor x, Tensor grad, float step_size, float noise_scale=1.0, float? clamp_min=None, "
        "float? clamp_max=None, Generator? generator=None) -> Tensor");
  jk::def_in_place(m, "langevin_step_(Tensor(a!) x, Tensor grad, float step_size, float noise_scale=1.0, "
        "float? clamp_min=None, float? clamp_max=None, Generator? generator=None) -> ()");
  jk::def_not_differentiable(m, "langevin_chain(Tensor x, str model, Tensor? mean, Tensor? precision, float[] params, int n_steps, "
        "float step_size, float noise_scale=1.0, int thin=0, float? clamp_min=None, float? clamp_max=None, "
        "Generator? generator=None) -> (Tensor, Tensor)");
  jk::def_not_differentiable(m, "hmc_chain(Tensor x, str model, Tensor? mean, Tensor? precision, float[] params, int n_steps, "
        "float step_size, int n_leapfrog, int thin=0, Generator? generator=None) -> (Tensor, Tensor, Tensor)");
}

// The same functions serve every backend.
#define EBM_IMPL_ALL(m)                                                  \
  m.impl("gaussian_energy", &gaussian_energy);                           \
  m.impl("gaussian_score", &gaussian_score);                             \
  m.impl("double_well_energy", &double_well_op<false>);                  \
  m.impl("double_well_score", &double_well_op<true>);                    \
  m.impl("harmonic_energy", &harmonic_op<false>);                        \
  m.impl("harmonic_score", &harmonic_op<true>);                          \
  m.impl("rosenbrock_energy", &rosenbrock_op<false>);                    \
  m.impl("rosenbrock_score", &rosenbrock_op<true>);                      \
  m.impl("rastrigin_energy", &rastrigin_op<false>);                      \
  m.impl("rastrigin_score", &rastrigin_op<true>);                        \
  m.impl("ackley_energy", &ackley_op<false>);                            \
  m.impl("ackley_score", &ackley_op<true>);                              \
  m.impl("langevin_step", &langevin_step);                               \
  m.impl("langevin_step_", &langevin_step_);                             \
  m.impl("langevin_chain", &langevin_chain);                             \
  m.impl("hmc_chain", &hmc_chain)

JK_LIBRARY_IMPL(CPU, m) { EBM_IMPL_ALL(m); }
JK_LIBRARY_IMPL(Meta, m) { EBM_IMPL_ALL(m); }
#ifdef JK_WITH_CUDA
JK_LIBRARY_IMPL(CUDA, m) { EBM_IMPL_ALL(m); }
#endif

}  // namespace ebm
