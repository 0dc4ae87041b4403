// Family `linalg`: op schemas, the op functions and their CPU loops.
// Each op is one function registered for CPU, CUDA and Meta: it checks its arguments,
// allocates the output, stops there on the Meta device (fake tensors: torch.compile,
// opcheck), and otherwise runs the CPU loop or calls the CUDA launcher (linalg.cu).
// matrix_inverse_root is built on ATen matrix products, so its driver serves every device;
// only its elementwise step (eye_axpy) has a loop per device, plus, for float32 on CUDA, the
// split of factors into bfloat16 pieces for tensor-core products (class Factor).
#include <ATen/Context.h>
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/ops/_unsafe_view.h>
#include <ATen/ops/bmm.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/linalg_vector_norm.h>
#include <ATen/ops/zeros.h>
#include <c10/util/accumulate.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "cpu_loops.h"
#include "jk.h"
#include "linalg.h"
#ifdef JK_WITH_CUDA
#include "cuda_host.h"
#endif

namespace linalg {

// ---------------------------------------------------------------- matrix_inverse_root

namespace {

constexpr int64_t kMaxP = 32;
constexpr double kMaxCond = 1e16;
// Defaults of max_cond by dtype: the condition number (relative to the Frobenius norm, an
// upper bound of the largest eigenvalue) the fixed iteration count is guaranteed to handle.
constexpr double kDefaultMaxCondFloat = 1e5, kDefaultMaxCondDouble = 1e12;
// How close to 1 the scalar iteration must bring the spectrum of M: about float32 / float64 eps.
constexpr double kTolFloat = 1e-6, kTolDouble = 1e-12;
// alpha * (upper bound of spec M) stays below this fraction of p + 1: at p + 1 a step maps an
// eigenvalue to 0 and beyond it to a negative number, so leave room for rounding.
constexpr double kTopFraction = 0.95;
// ... and no step maps the top of the spectrum below this: eigenvalues pushed near 0 carry
// rounding errors of M relative to their tiny size into X (it mattered for p = 8 in float64).
constexpr double kMinImage = 1e-4;

// One step of the coupled iteration on one eigenvalue m of M: m * ((p + 1 - m) / p)^p.
double newton_map(double m, int64_t p) { return m * std::pow((p + 1 - m) / p, static_cast<double>(p)); }

// The scalings alpha_k of the scaled coupled Newton iteration. The spectrum of M_0 lies in
// [1/max_cond, 1]; each step scales M by alpha, chosen so that both ends of the interval map
// to the same value (the map rises on (0, 1] and falls on [1, p + 1)), which shrinks the
// interval's ratio by up to ~2.4 * alpha (12x for p = 4) per step instead of 2.4x unscaled.
// Computed on the host from (p, max_cond, dtype) only, so the step count is fixed and known
// before any data is read: no host sync, CUDA-graph capturable.
std::vector<double> compute_newton_schedule(int64_t p, double max_cond, double tol) {
  // The largest x in [1, kTopFraction (p + 1)] with newton_map(x) >= kMinImage (it falls there).
  double x_lo = 1.0, x_hi = kTopFraction * (p + 1);
  if (newton_map(x_hi, p) < kMinImage) {
    for (int it = 0; it < 200; ++it) {
      const double mid = 0.5 * (x_lo + x_hi);
      (newton_map(mid, p) >= kMinImage ? x_lo : x_hi) = mid;
    }
    x_hi = x_lo;
  }
  std::vector<double> alphas;
  double lo_end = 1.0 / max_cond, hi_end = 1.0;
  while (alphas.size() < 400) {
    const double a_min = 1.0 / hi_end, a_max = x_hi / hi_end;
    double a = a_max;
    if (newton_map(a_max * lo_end, p) > newton_map(a_max * hi_end, p)) {
      double lo = a_min, hi = a_max;  // the ends' images cross between a_min and a_max: bisect
      for (int it = 0; it < 200; ++it) {
        const double mid = 0.5 * (lo + hi);
        (newton_map(mid * lo_end, p) < newton_map(mid * hi_end, p) ? lo : hi) = mid;
      }
      a = 0.5 * (lo + hi);
    }
    const double f_lo = newton_map(a * lo_end, p), f_hi = newton_map(a * hi_end, p);
    alphas.push_back(a);
    const bool one_inside = a * lo_end <= 1.0 && 1.0 <= a * hi_end;
    hi_end = one_inside ? 1.0 : std::max(f_lo, f_hi);
    lo_end = std::min(f_lo, f_hi);
    if (hi_end - lo_end <= tol) break;
  }
  return alphas;
}

// Step k's factor T_k = scale M_k + shift I for its alpha: alpha^(1/p) ((p + 1) I - alpha M_k) / p.
void newton_step_factor(double alpha, int64_t p, double* scale, double* shift) {
  const double alpha_root = std::pow(alpha, 1.0 / static_cast<double>(p));
  *scale = -alpha_root * alpha / static_cast<double>(p);
  *shift = alpha_root * static_cast<double>(p + 1) / static_cast<double>(p);
}

// newton_schedule, remembered per (p, max_cond, tol): computing it takes ~3,400 calls of std::pow
// (~50 us), and at n = 1024 on the H200 a call's host time (~0.9 ms) is about its GPU time, so
// host work shows in its run time. At most kMaxSchedules are kept (max_cond is the caller's).
std::vector<double> newton_schedule(int64_t p, double max_cond, double tol) {
  constexpr size_t kMaxSchedules = 64;
  static std::mutex mutex;
  static std::map<std::tuple<int64_t, double, double>, std::vector<double>> known;
  const std::lock_guard<std::mutex> lock(mutex);
  const auto key = std::make_tuple(p, max_cond, tol);
  if (const auto it = known.find(key); it != known.end()) return it->second;
  if (known.size() >= kMaxSchedules) known.clear();
  return known[key] = compute_newton_schedule(p, max_cond, tol);
}

template <typename T>
void eye_axpy_cpu(const at::Tensor& out, const at::Tensor& in, const at::Tensor& a_vec, double a_scale,
                  const at::Tensor& d_vec, double d_scale) {
  const int64_t n = out.size(1), rows = out.size(0) * n;
  T* o = out.mutable_data_ptr<T>();
  const T* x = in.defined() ? in.const_data_ptr<T>() : nullptr;
  const T* av = a_vec.defined() ? a_vec.const_data_ptr<T>() : nullptr;
  const T* dv = d_vec.defined() ? d_vec.const_data_ptr<T>() : nullptr;
  at::parallel_for(0, rows, std::max<int64_t>(1, 32768 / n), [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const int64_t b = row / n, i = row % n;
      const T a = static_cast<T>(a_scale) * (av ? av[b] : T(1));
      const T d = static_cast<T>(d_scale) * (dv ? dv[b] : T(1));
      T* orow = o + row * n;
      if (x) {
        const T* xrow = x + row * n;
        for (int64_t j = 0; j < n; ++j) orow[j] = a * xrow[j];
      } else {
        for (int64_t j = 0; j < n; ++j) orow[j] = T(0);
      }
      orow[i] += d;
    }
  });
}

// out[b] = a[b] * in[b] + d[b] * I (see eye_axpy_cuda in linalg.h): the only elementwise
// kernel the Newton iteration needs. All tensors contiguous, (nb, n, n) and (nb,).
void eye_axpy(const at::Tensor& out, const at::Tensor& in, const at::Tensor& a_vec, double a_scale,
              const at::Tensor& d_vec, double d_scale) {
#ifdef JK_WITH_CUDA
  if (out.is_cuda()) {
    jk::TorchCudaLaunch launch(out.device());
    eye_axpy_cuda(launch, out, in, a_vec, a_scale, d_vec, d_scale);
    return;
  }
#endif
  AT_DISPATCH_FLOATING_TYPES(out.scalar_type(), "eye_axpy_cpu", [&] {
    eye_axpy_cpu<scalar_t>(out, in, a_vec, a_scale, d_vec, d_scale);
  });
}

// For each matrix b of A (nb, n, n) whose off-diagonal entries are all 0 and whose diagonal is
// finite (NaN or Inf keep the iteration's NaN, which fallback="auto" reports): X[b] =
// diag((max(a_scale * A_ii, 0) + eps)^(-1/p)), the exact answer, and residual[b] = 0. X is contiguous.
void finish_diagonal(const at::Tensor& A, double a_scale, const at::Tensor& X, const at::Tensor& residual, int64_t p,
                     double eps) {
#ifdef JK_WITH_CUDA
  if (A.is_cuda()) {
    jk::TorchCudaLaunch launch(A.device());
    finish_diagonal_cuda(launch, A, a_scale, X, residual, p, eps);
    return;
  }
#endif
  const int64_t n = A.size(1);
  AT_DISPATCH_FLOATING_TYPES(A.scalar_type(), "finish_diagonal_cpu", [&] {
    const scalar_t* a = A.const_data_ptr<scalar_t>();
    scalar_t* x = X.mutable_data_ptr<scalar_t>();
    scalar_t* r = residual.mutable_data_ptr<scalar_t>();
    const auto scale = static_cast<scalar_t>(a_scale);
    at::parallel_for(0, A.size(0), 1, [&](int64_t begin, int64_t end) {
      for (int64_t b = begin; b < end; ++b) {
        const scalar_t* a_b = a + b * n * n;
        bool diagonal = true;
        for (int64_t e = 0; e < n * n && diagonal; ++e) diagonal = !breaks_diagonal(a_b[e], e % (n + 1) == 0);
        if (!diagonal) continue;
        scalar_t* x_b = x + b * n * n;
        for (int64_t e = 0; e < n * n; ++e)
          x_b[e] = e % (n + 1) == 0 ? diagonal_root(scale * a_b[e], eps, static_cast<int>(p)) : scalar_t(0);
        r[b] = scalar_t(0);
      }
    });
  });
}

// A factor of the iteration's matrix products: the (nb, n, n) batch scale * source + shift * I,
// formed only in the shapes the products or the caller ask for, once (copies share them).
// Float32 on CUDA multiplies on the bfloat16 tensor cores through bfloat16 pieces
// (split_bf16x3_cuda: one bfloat16 GEMM over 6 piece products, float32 accumulation, about
// float32 accuracy) at several times float32 cuBLAS's speed; float64 and the CPU multiply the
// formed matrices with at::bmm.
class Factor {
 public:
  explicit Factor(at::Tensor source, double scale = 1.0, double shift = 0.0)
      : s_(std::make_shared<State>(State{std::move(source), {}, {}, {}, scale, shift})) {
    if (scale == 1.0 && shift == 0.0) s_->value = s_->source;
  }

  const at::Tensor& value() {
    if (!s_->value.defined()) {
      s_->value = at::empty_like(s_->source);
      eye_axpy(s_->value, s_->source, {}, s_->scale, {}, s_->shift);
    }
    return s_->value;
  }

  // a @ b, as one float32 (or float64) batch; through bfloat16 pieces when `pieces` (float32 on CUDA).
  friend at::Tensor product(Factor& a, Factor& b, bool pieces) {
    at::Tensor out = prefill_products() ? a.zeroed_product() : at::Tensor();
#ifdef JK_WITH_CUDA
    if (pieces) {
      a.split(true, a.s_ == b.s_);  // a square: both layouts from one read
      b.split(false, true);
      const at::Tensor &left = a.s_->left, &right = b.s_->right;
      return out.defined() ? at::bmm_out(out, left, right, at::kFloat) : at::bmm(left, right, at::kFloat);
    }
#endif
    return out.defined() ? at::bmm_out(out, a.value(), b.value()) : at::bmm(a.value(), b.value());
  }

 private:
  // Under compute-sanitizer's initcheck only (JITKERNELS_SANITIZE_PREFILL=1, set by
  // tools/sanitize.sh): products go into zero-filled outputs. initcheck cannot see cuBLAS's Hopper
  // GEMMs write their output (bulk-copy stores), so it would call every later read of a product
  // uninitialized; with the outputs filled first it checks everything else our kernels read.
  static bool prefill_products() {
    static const bool on = [] {
      const char* value = std::getenv("JITKERNELS_SANITIZE_PREFILL");
      return value != nullptr && std::string(value) == "1";
    }();
    return on;
  }

  // A zero-filled output for a product with this factor on the left: (nb, n, n), the source's dtype.
  at::Tensor zeroed_product() const { return at::zeros({s_->source.size(0), s_->source.size(1), s_->source.size(1)}, s_->source.options()); }

  struct State {
    at::Tensor source, value, left, right;  // left, right: the bfloat16 pieces as bmm operands
    double scale, shift;
  };

#ifdef JK_WITH_CUDA
  // Makes the missing ones of the wanted bfloat16 piece layouts: as a left (nb, n, 6n) and as a
  // right (nb, 6n, n) operand of a product.
  void split(bool want_left, bool want_right) {
    State& s = *s_;
    const int64_t nb = s.source.size(0), n = s.source.size(1);
    const at::TensorOptions options = s.source.options().dtype(at::kBFloat16);
    at::Tensor new_left, new_right;
    if (want_left && !s.left.defined()) new_left = s.left = at::empty({nb, n, kSplitTerms * n}, options);
    if (want_right && !s.right.defined()) new_right = s.right = at::empty({nb, kSplitTerms * n, n}, options);
    if (new_left.defined() || new_right.defined()) {
      jk::TorchCudaLaunch launch(s.source.device());
      split_bf16x3_cuda(launch, s.source, s.scale, s.shift, new_left, new_right);
    }
  }
#endif

  std::shared_ptr<State> s_;
};

// T^p by repeated squaring: 2 products for p = 4, 3 for p = 8.
Factor power(const Factor& T, int64_t p, bool pieces) {
  std::optional<Factor> result;
  Factor base = T;
  while (true) {
    if (p & 1) result = result ? Factor(product(*result, base, pieces)) : base;
    p >>= 1;
    if (p == 0) return *result;
    base = Factor(product(base, base, pieces));
  }
}

// Each row's 2-norm (the Frobenius norms of (nb, n * n) matrices), without the overflow or underflow of
// squaring the entries (float32 past ~1e19: X came out zero; below ~1e-19: NaN): float32 sums its
// squares in float64, float64 divides by the row's max |entry| first. Float64 result.
at::Tensor frobenius_norms(const at::Tensor& rows) {
  if (rows.scalar_type() != at::kDouble) {
    return at::linalg_vector_norm(rows, 2, at::IntArrayRef{1}, /*keepdim=*/false, at::kDouble);
  }
  const at::Tensor peak = rows.abs().amax(1, /*keepdim=*/true);
  const at::Tensor scale = peak.masked_fill(peak.eq(0), 1.0);  // the zero matrix: norm 0
  return at::linalg_vector_norm(rows.div(scale), 2, at::IntArrayRef{1}).mul_(scale.view({-1}));
}

// inverse_root_small's team on the CPU: one thread, the matrices in a buffer of its own.
struct CpuTeam {
  template <typename F>
  void for_each(int count, F&& f) const {
    for (int e = 0; e < count; ++e) f(e);
  }
  // Row i of C as a sum of B's rows: the inner loop runs along rows, so it vectorizes. (Tiles of 4 rows x
  // 64 bytes with their sums in registers through the k loop ran 1.3-4x slower in this build; session 38.)
  template <typename T>
  void product(T* __restrict__ C, const T* __restrict__ A, const T* __restrict__ B, int n) const {
    for (int i = 0; i < n; ++i) {
      T* __restrict__ c = C + i * n;
      for (int j = 0; j < n; ++j) c[j] = T(0);
      for (int k = 0; k < n; ++k) {
        const T a = A[i * n + k];
        const T* __restrict__ b = B + k * n;
        for (int j = 0; j < n; ++j) c[j] += a * b[j];
      }
    }
  }
  double max(double v) const { return v; }
  double sum(double v) const { return v; }
  bool any(int flag) const { return flag != 0; }
  bool leader() const { return true; }
};

// inverse_root_small for each matrix of A (nb, n, n), contiguous; X like A, residual (nb).
template <typename T>
void inverse_root_small_cpu(const at::Tensor& A, const at::Tensor& X, const at::Tensor& residual, int64_t p,
                            double eps, const NewtonSteps& steps) {
  const int64_t nb = A.size(0), n = A.size(1), nn = n * n;
  const T* a = A.const_data_ptr<T>();
  T* x = X.mutable_data_ptr<T>();
  T* r = residual.mutable_data_ptr<T>();
  at::parallel_for(0, nb, 1, [&](int64_t begin, int64_t end) {
    std::vector<T> buffers(kSmallRootBuffers * nn);
    for (int64_t b = begin; b < end; ++b) {
      inverse_root_small(CpuTeam{}, a + b * nn, x + b * nn, r + b, buffers.data(), static_cast<int>(n),
                         static_cast<int>(p), eps, steps);
    }
  });
}

// The root and the residual in A's shape, as tensors of their own: a view of the (nb, n, n) and (nb,) buffers
// (Tensor::view) became an autograd view when the call recorded a gradient, which refused in-place ops on it
// ("Output 0 of matrix_inverse_root_backward is a view and is being modified inplace"). _unsafe_view reshapes
// without that record, as ATen's own ops do for buffers of their own.
std::tuple<at::Tensor, at::Tensor> new_outputs(const at::Tensor& X, const at::Tensor& residual, at::IntArrayRef shape,
                                               at::IntArrayRef batch) {
  return {at::_unsafe_view(X, shape), at::_unsafe_view(residual, batch)};
}

}  // namespace

// Coupled Newton iteration for (A + eps I)^(-1/p) (Guo & Higham 2006), scaled per step:
//   M_0 = (A + eps I) / u,  X_0 = u^(-1/p) I,  u = ||A||_F + eps >= lambda_max(A + eps I)
//   T_k = alpha^(1/p) ((p + 1) I - alpha M_k) / p,  X_{k+1} = X_k T_k,  M_{k+1} = T_k^p M_k
// keeps M_k = X_k^p (A + eps I) and drives M_k -> I, so X_k -> (A + eps I)^(-1/p). It is
// stable (errors in M are damped, errors in X not amplified). residual = ||M - I||_F before
// the last step (the last M is never formed); the last step squares it, roughly. Small matrices take
// the same steps one matrix at a time (linalg.h's inverse_root_small): on the GPU n <= kSmallRootMaxN in
// one kernel, on the CPU batches of little work; the rest take the batched products below.
std::tuple<at::Tensor, at::Tensor> matrix_inverse_root(const at::Tensor& A_in, int64_t p, double eps,
                                                       double max_cond) {
  jk::check_float32_or_64(A_in, "A");
  TORCH_CHECK_VALUE(A_in.dim() >= 2, "A must be a square matrix (n, n) or a batch of them (..., n, n), got shape ",
                    jk::shape(A_in.sizes()));
  TORCH_CHECK_VALUE(A_in.sym_size(-1) == A_in.sym_size(-2), "A must be square in its last two dims, got shape ",
                    jk::shape(A_in.sizes()));
  TORCH_CHECK_VALUE(p >= 1 && p <= kMaxP, "p must be an integer in [1, ", std::to_string(kMaxP), "], got ",
                    std::to_string(p));
  TORCH_CHECK_VALUE(std::isfinite(eps) && eps >= 0, "eps must be finite and >= 0, got ", jk::num(eps));
  TORCH_CHECK_VALUE(max_cond == 0 || (max_cond >= 1 && max_cond <= kMaxCond),
                    "max_cond must be 0 (the dtype's default) or in [1, 1e16], got ", jk::num(max_cond));
  if (A_in.is_meta())  // symbolic sizes under torch.compile with dynamic shapes
    return {at::empty_symint(A_in.sym_sizes(), A_in.options()),
            at::empty_symint(A_in.sym_sizes().slice(0, A_in.dim() - 2), A_in.options())};
  const int64_t n = A_in.size(-1);
  const std::vector<int64_t> batch(A_in.sizes().begin(), A_in.sizes().end() - 2);
  const int64_t nb = c10::multiply_integers(batch);
  if (nb == 0 || n == 0) return {at::empty(A_in.sizes(), A_in.options()), at::zeros(batch, A_in.options())};

  const at::Tensor A_flat = A_in.contiguous().view({nb, n, n});
  const bool is_double = A_flat.scalar_type() == at::kDouble;
  if (max_cond == 0) max_cond = is_double ? kDefaultMaxCondDouble : kDefaultMaxCondFloat;
  const std::vector<double> alphas = newton_schedule(p, max_cond, is_double ? kTolDouble : kTolFloat);
  const int64_t steps = static_cast<int64_t>(alphas.size());
  // Small matrices: the whole iteration per matrix at once (inverse_root_small, linalg.h), on the GPU a
  // block per matrix in one kernel (linalg.cu), on the CPU a thread per matrix (for little work only).
  const bool small = A_flat.is_cuda() ? n <= kSmallRootMaxN : n <= 32 && nb * n * n * n <= kSmallRootCpuWork;
  if (small && steps <= kSmallRootMaxSteps) {
    NewtonSteps schedule{};
    schedule.count = static_cast<int>(steps);
    for (int64_t k = 0; k < steps; ++k) newton_step_factor(alphas[k], p, &schedule.scale[k], &schedule.shift[k]);
    at::Tensor X = at::empty_like(A_flat), residual = at::empty({nb}, A_flat.options());
    bool done = false;
    if (!A_flat.is_cuda()) {
      AT_DISPATCH_FLOATING_TYPES(A_flat.scalar_type(), "inverse_root_small_cpu", [&] {
        inverse_root_small_cpu<scalar_t>(A_flat, X, residual, p, eps, schedule);
      });
      done = true;
    }
#ifdef JK_WITH_CUDA
    if (!done) {
      jk::TorchCudaLaunch launch(A_flat.device());
      done = inverse_root_small_cuda(launch, A_flat, X, residual, p, eps, schedule);
    }
#endif
    if (done) return new_outputs(X, residual, A_in.sizes(), batch);
  }

  const at::NoTF32Guard no_tf32;  // float32 at::bmm in full precision, whatever the global flag says
  // Only the symmetric part (A + Aᵀ) / 2 is used, as by the reference and the eigh fallback (the
  // iteration alone would take the root of A itself, so a slightly asymmetric A gave another answer).
  // S = A + Aᵀ is formed, and the 1/2 rides on the scalars below: each launch costs this host-bound op.
  const at::Tensor S = A_flat.add(A_flat.mT());
  // Float32 products on the bfloat16 tensor cores (3 pieces per factor) only for p >= 4: measured
  // on the H200 (tools/linalg_accuracy.py, cond 1e3), p = 4 and 8 stay under 4.5e-4 up to
  // n = 4096, while p = 1 and 2 pass the 1e-3 bar at n = 1024 but not at 1500-4096 (up to
  // 5.9e-3): their iteration amplifies the pieces' rounding, so they keep float32 cuBLAS.
  const bool pieces = S.is_cuda() && S.scalar_type() == at::kFloat && p >= 4;

  // u = ||(A + Aᵀ) / 2||_F + eps
  const at::Tensor u = frobenius_norms(S.view({nb, n * n})).mul_(0.5).add_(eps).to(S.scalar_type());
  const at::Tensor inv_u = u.reciprocal(), x0 = u.pow(-1.0 / static_cast<double>(p));
  at::Tensor M0 = at::empty({nb, n, n}, S.options());
  eye_axpy(M0, S, inv_u, 0.5, inv_u, eps);  // M_0 = ((A + Aᵀ) / 2 + eps I) / u
  Factor M(M0);
  std::optional<Factor> X;
  at::Tensor residual;
  for (int64_t k = 0; k < steps; ++k) {
    double scale, shift;
    newton_step_factor(alphas[k], p, &scale, &shift);
    Factor T(M.value(), scale, shift);
    std::optional<Factor> T_p;
    if (k < steps - 1) T_p = power(T, p, pieces);  // first: T @ T splits T once for both sides
    if (k == 0) {
      at::Tensor X1 = at::empty_like(M0);
      eye_axpy(X1, T.value(), x0, 1.0, {}, 0.0);  // X_1 = u^(-1/p) T_0: no product needed
      X.emplace(X1);
    } else {
      X.emplace(product(*X, T, pieces));
    }
    if (k == steps - 1) {
      at::Tensor R = at::empty_like(M0);
      eye_axpy(R, M.value(), {}, 1.0, {}, -1.0);
      residual = at::linalg_vector_norm(R.view({nb, n * n}), 2, at::IntArrayRef{1});
      break;  // the last M is never used
    }
    M = Factor(product(*T_p, M, pieces));
  }
  at::Tensor X_out = X->value();

  // Diagonal input (n = 1, A = I, ...): the exact elementwise answer, as the reference
  // computes it (eigenvalues clamped at 0), and residual 0. Decided on the device: no sync.
  finish_diagonal(S, 0.5, X_out, residual, p, eps);
  return new_outputs(X_out, residual, A_in.sizes(), batch);
}

// ---------------------------------------------------------------- kron, per-sample grads

namespace {

// One output row of a kron: o[j q + l] = a[j] b[l] for j < n, l < q (V: float, double, or the 16-bit
// types' float). Short runs of q products (kron with a column or a 2x2 / 3x3 matrix on the right) take a
// loop with q fixed at compile time, which vectorizes along j: with q known only at run time it ran a few
// products at a time (float32 (1, 64) x (64, 1): 2.3x eager's time; (512, 512) x (2, 2) 8x slower alone).
template <typename V, int Q>
inline void kron_row_fixed(V* __restrict__ o, const V* __restrict__ a, const V* __restrict__ b, int64_t n) {
  V b_fixed[Q];
  for (int l = 0; l < Q; ++l) b_fixed[l] = b[l];
  for (int64_t j = 0; j < n; ++j)
    for (int l = 0; l < Q; ++l) o[j * Q + l] = a[j] * b_fixed[l];
}

template <typename V>
inline void kron_row(V* __restrict__ o, const V* __restrict__ a, const V* __restrict__ b, int64_t n, int64_t q) {
  switch (q) {
    case 1: return kron_row_fixed<V, 1>(o, a, b, n);
    case 2: return kron_row_fixed<V, 2>(o, a, b, n);
    case 3: return kron_row_fixed<V, 3>(o, a, b, n);
    default:
      for (int64_t j = 0; j < n; ++j) {
        const V aj = a[j];
        for (int64_t l = 0; l < q; ++l) o[j * q + l] = aj * b[l];
      }
  }
}

template <typename T>
void kron_cpu(const at::Tensor& out, const at::Tensor& A, const at::Tensor& B) {
  const int64_t m = A.size(1), n = A.size(2), p = B.size(1), q = B.size(2);
  const int64_t rows = out.size(0) * m * p, cols = n * q;
  T* o = out.mutable_data_ptr<T>();
  const T* a_data = A.const_data_ptr<T>();
  const T* b_data = B.const_data_ptr<T>();
  at::parallel_for(0, rows, std::max<int64_t>(1, 32768 / cols), [&](int64_t begin, int64_t end) {
    using acc_t = at::opmath_type<T>;
    // 16-bit types: B's row widened once (not again while the next rows use it), A's entries and the
    // products of up to kRun of them widened and narrowed at once (jk::widen / jk::narrow vectorize; a
    // conversion per element did not, and a narrow per run of q products was a call per element for short
    // runs: 5.9x eager's time for bfloat16 (1, 64) x (64, 1)).
    constexpr int64_t kRun = 1024;
    const int64_t js = std::max<int64_t>(1, kRun / q);  // A's entries per narrow (q >= 1: out is not empty)
    std::vector<acc_t> a_wide(jk::kReducedFloat<T> ? js : 0), b_wide(jk::kReducedFloat<T> ? q : 0),
        products(jk::kReducedFloat<T> ? js * q : 0);
    const T* b_widened = nullptr;
    // The row's (batch entry, row of A, row of B), counted along: three divisions per row were most of the
    // time of short rows (per_sample_grad_linear B=256 16 -> 1024 float32: 1.7-2.4x eager's einsum).
    int64_t b = begin / (m * p), i = begin / p % m, k = begin % p;
    for (int64_t row = begin; row < end;) {
      // A column times a row (n = p = 1: per_sample_grad_linear's outer products): the batch entry's rows
      // from here on are one row, A's column times B's row (a call per row of 16 products: 1.4x eager's time)
      const int64_t run = n == 1 && p == 1 ? std::min(end - row, m - i) : 1;
      const T* a_row = a_data + (b * m + i) * n;
      const T* b_row = b_data + (b * p + k) * q;
      T* o_row = o + row * cols;
      if constexpr (jk::kReducedFloat<T>) {
        if (b_row != b_widened) {
          jk::widen(b_row, b_wide.data(), q);
          b_widened = b_row;
        }
        for (int64_t j = 0; j < run * n; j += js) {
          const int64_t count = std::min(js, run * n - j);
          jk::widen(a_row + j, a_wide.data(), count);
          kron_row(products.data(), a_wide.data(), b_wide.data(), count, q);
          jk::narrow(products.data(), o_row + j * q, count * q);
        }
      } else {
        kron_row(o_row, a_row, b_row, run * n, q);
      }
      row += run;
      if (++k == p) {
        k = 0;
        i += run;
        if (i == m) {
          i = 0;
          ++b;
        }
      }
    }
  });
}

// out (nb, m*p, n*q) = per-batch kron(A (nb, m, n), B (nb, p, q)); all contiguous, one dtype.
// Shared by kron and per_sample_grad_linear (an outer product is a kron of a column and a row).
void kron_into(const at::Tensor& out, const at::Tensor& A, const at::Tensor& B) {
  if (out.numel() == 0) return;
#ifdef JK_WITH_CUDA
  if (out.is_cuda()) {
    jk::TorchCudaLaunch launch(out.device());
    kron_cuda(launch, out, A, B);
    return;
  }
#endif
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, out.scalar_type(), "kron_cpu",
                                  [&] { kron_cpu<scalar_t>(out, A, B); });
}

}  // namespace

at::Tensor kron(const at::Tensor& A, const at::Tensor& B) {
  jk::check_float(A, "A");
  jk::check_same_device(A, "A", B, "B");
  jk::check_same_dtype(A, "A", B, "B");
  TORCH_CHECK_VALUE(A.dim() >= 2, "A must be a matrix (m, n) or a batch of them (..., m, n), got shape ",
                    jk::shape(A.sizes()));
  TORCH_CHECK_VALUE(B.dim() == A.dim() &&
                        B.sym_sizes().slice(0, B.dim() - 2) == A.sym_sizes().slice(0, A.dim() - 2),
                    "B must have the same batch dims as A (shapes (..., m, n) and (..., p, q)), got A ",
                    jk::shape(A.sizes()), " and B ", jk::shape(B.sizes()));
  std::vector<c10::SymInt> shape(A.sym_sizes().begin(), A.sym_sizes().end() - 2);  // symbolic on Meta
  shape.push_back(A.sym_size(-2) * B.sym_size(-2));
  shape.push_back(A.sym_size(-1) * B.sym_size(-1));
  at::Tensor out = at::empty_symint(shape, A.options());
  if (A.is_meta()) return out;
  const int64_t m = A.size(-2), n = A.size(-1), p = B.size(-2), q = B.size(-1);
  const int64_t nb = c10::multiply_integers(A.sizes().begin(), A.sizes().end() - 2);
  kron_into(out.view({nb, m * p, n * q}), A.contiguous().view({nb, m, n}), B.contiguous().view({nb, p, q}));
  return out;
}

std::tuple<at::Tensor, at::Tensor> per_sample_grad_linear(const at::Tensor& x, const at::Tensor& grad_out,
                                                          bool with_bias) {
  jk::check_float(x, "x");
  jk::check_same_device(x, "x", grad_out, "grad_out");
  jk::check_same_dtype(x, "x", grad_out, "grad_out");
  jk::check_dim(x, "x", 2);
  jk::check_dim(grad_out, "grad_out", 2);
  TORCH_CHECK_VALUE(grad_out.sym_size(0) == x.sym_size(0), "grad_out has batch size ",
                    std::to_string(grad_out.size(0)), " but x has batch size ", std::to_string(x.size(0)));
  // Symbolic sizes on Meta (torch.compile with dynamic shapes), ints below.
  at::Tensor grad_w = at::empty_symint({x.sym_size(0), grad_out.sym_size(1), x.sym_size(1)}, x.options());
  at::Tensor grad_b = at::empty_symint({x.sym_size(0), with_bias ? grad_out.sym_size(1) : 0}, x.options());
  if (x.is_meta()) return {grad_w, grad_b};
  const int64_t batch = x.size(0), in = x.size(1), out = grad_out.size(1);
  // The outer product g_b x_b^T is kron of a column (out, 1) and a row (1, in).
  kron_into(grad_w, grad_out.contiguous().view({batch, out, 1}), x.contiguous().view({batch, 1, in}));
  if (with_bias) grad_b.copy_(grad_out);
  return {grad_w, grad_b};
}

JK_LIBRARY(m) {
  jk::def_differentiable(m, "matrix_inverse_root(Tensor A, int p=4, float eps=1e-6, float max_cond=0.0) -> (Tensor, Tensor)");
  jk::def_differentiable(m, "kron(Tensor A, Tensor B) -> Tensor");
  jk::def_differentiable(m, "per_sample_grad_linear(Tensor x, Tensor grad_out, bool with_bias=True) -> (Tensor, Tensor)");
}

#define JK_LINALG_IMPL(key)                                          \
  JK_LIBRARY_IMPL(key, m) {                                          \
    m.impl("matrix_inverse_root", &matrix_inverse_root);             \
    m.impl("kron", &kron);                                           \
    m.impl("per_sample_grad_linear", &per_sample_grad_linear);       \
  }
JK_LINALG_IMPL(CPU)
JK_LINALG_IMPL(Meta)
#ifdef JK_WITH_CUDA
JK_LINALG_IMPL(CUDA)
#endif

}  // namespace linalg
