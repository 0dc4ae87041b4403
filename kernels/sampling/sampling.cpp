// Family `sampling`: op schemas, argument checks and CPU kernels.
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>

#include <algorithm>
#include <numeric>
#include <tuple>
#include <vector>

#include "jk.h"
#include "philox.h"
#include "sampling.h"

namespace sampling {

// ---------------------------------------------------------------- checks (also used by sampling.cu)

void check_normal_params(const at::Tensor& mean, const at::Tensor& std) {
  jk::check_float(mean, "mean");
  jk::check_dim(mean, "mean", 1);
  jk::check_like(mean, "mean", std, "std");
}

at::ScalarType normal_out_dtype(const at::Tensor& mean, std::optional<at::ScalarType> dtype) {
  const at::ScalarType out = dtype.value_or(mean.scalar_type());
  TORCH_CHECK_VALUE(jk::is_supported_float(out), "dtype must be float32, float64, float16 or bfloat16, got ", out);
  return out;
}

void check_normal_out(const at::Tensor& mean, const at::Tensor& out) {
  jk::check_float(out, "out");
  jk::check_dim(out, "out", 2);
  jk::check_same_device(mean, "mean", out, "out");
  TORCH_CHECK_VALUE(out.size(1) == mean.size(0), "out must have shape (n, d) with d = mean's length ", mean.size(0),
                    ", got ", out.sizes());
  TORCH_CHECK_VALUE(out.is_contiguous(), "out must be contiguous, got strides ", out.strides());
}

void check_cem_update_args(const at::Tensor& samples, const at::Tensor& scores, int64_t n_elite,
                           const at::Tensor& mean, const at::Tensor& std, double smoothing, double min_std) {
  jk::check_float(samples, "samples");
  jk::check_dim(samples, "samples", 2);
  const int64_t n = samples.size(0), d = samples.size(1);
  jk::check_float(scores, "scores");
  jk::check_same_device(samples, "samples", scores, "scores");
  TORCH_CHECK_VALUE(scores.dim() == 1 && scores.size(0) == n, "scores must have shape (n,) = (", n,
                    ",), one score per row of samples, got ", scores.sizes());
  jk::check_same_device(samples, "samples", mean, "mean");
  jk::check_same_dtype(samples, "samples", mean, "mean");
  TORCH_CHECK_VALUE(mean.dim() == 1 && mean.size(0) == d, "mean must have shape (d,) = (", d,
                    ",), one value per column of samples, got ", mean.sizes());
  jk::check_like(mean, "mean", std, "std");
  TORCH_CHECK_VALUE(n_elite >= 1 && n_elite <= n, "n_elite must be in 1..n = 1..", n, ", got ", n_elite);
  TORCH_CHECK_VALUE(smoothing >= 0.0 && smoothing <= 1.0, "smoothing must be in [0, 1], got ", smoothing);
  TORCH_CHECK_VALUE(std::isfinite(min_std) && min_std >= 0.0, "min_std must be a finite number >= 0, got ",
                    min_std);
}

// ---------------------------------------------------------------- normal

namespace {

// On the CPU the values are at hand, so a negative std is an error (CUDA gives NaN instead).
void check_std_nonnegative_cpu(const at::Tensor& std) {
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, std.scalar_type(), "check_std", [&] {
    const at::Tensor s = std.contiguous();
    const scalar_t* p = s.const_data_ptr<scalar_t>();
    for (int64_t j = 0; j < s.numel(); ++j) {
      const float v = static_cast<float>(p[j]);
      TORCH_CHECK_VALUE(!(v < 0), "std must be >= 0 everywhere, got std[", j, "] = ", v);
    }
  });
}

template <typename T, typename P>
void normal_cpu_kernel(T* out, const P* mean, const P* std, int64_t total, int64_t d, jk::PhiloxSeed seed) {
  const int64_t groups = (total + 3) / 4;
  at::parallel_for(0, groups, 8192, [&](int64_t g0, int64_t g1) {
    int64_t col = (g0 * 4) % d;
    for (int64_t g = g0; g < g1; ++g) {
      const jk::Float4 z4 = normal_group(seed, static_cast<uint64_t>(g));
      const float z[4] = {z4.x, z4.y, z4.z, z4.w};
      for (int j = 0; j < 4 && g * 4 + j < total; ++j) {
        out[g * 4 + j] = static_cast<T>(affine(mean[col], std[col], z[j]));
        if (++col == d) col = 0;
      }
    }
  });
}

void normal_fill_cpu(const at::Tensor& out, const at::Tensor& mean, const at::Tensor& std,
                     const std::optional<at::Generator>& generator) {
  check_std_nonnegative_cpu(std);
  if (out.numel() == 0) return;
  const jk::PhiloxSeed seed = jk::cpu_philox_seed(generator);
  // Parameters in double for a float64 output, else in float (draws are float32 either way).
  const at::ScalarType p_type = out.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  const at::Tensor m = mean.to(p_type).contiguous(), s = std.to(p_type).contiguous();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, out.scalar_type(), "normal_cpu", [&] {
    using P = std::conditional_t<std::is_same_v<scalar_t, double>, double, float>;
    normal_cpu_kernel<scalar_t, P>(out.mutable_data_ptr<scalar_t>(), m.const_data_ptr<P>(), s.const_data_ptr<P>(),
                                   out.numel(), out.size(1), seed);
  });
}

at::Tensor normal_cpu(const at::Tensor& mean, const at::Tensor& std, int64_t n, std::optional<at::ScalarType> dtype,
                      std::optional<at::Generator> generator) {
  check_normal_params(mean, std);
  TORCH_CHECK_VALUE(n >= 0, "n must be >= 0, got ", n);
  at::Tensor out = at::empty({n, mean.size(0)}, mean.options().dtype(normal_out_dtype(mean, dtype)));
  normal_fill_cpu(out, mean, std, generator);
  return out;
}

void normal_out_cpu(const at::Tensor& mean, const at::Tensor& std, const at::Tensor& out,
                    std::optional<at::Generator> generator) {
  check_normal_params(mean, std);
  check_normal_out(mean, out);
  normal_fill_cpu(out, mean, std, generator);
}

// ---------------------------------------------------------------- cem_update

// Indices of the n_elite best scores, ascending (the order the sums run in).
template <typename S>
std::vector<int64_t> select_elite_cpu(const S* scores, int64_t n, int64_t n_elite, bool maximize) {
  using K = typename KeyOf<S>::key;
  using R = typename KeyOf<S>::real;
  std::vector<K> key(n);
  for (int64_t i = 0; i < n; ++i) key[i] = order_key<K>(static_cast<R>(scores[i]), maximize);
  std::vector<int64_t> idx(n);
  std::iota(idx.begin(), idx.end(), 0);
  auto before = [&](int64_t a, int64_t b) { return key[a] < key[b] || (key[a] == key[b] && a < b); };
  if (n_elite < n) std::nth_element(idx.begin(), idx.begin() + n_elite, idx.end(), before);
  idx.resize(n_elite);
  std::sort(idx.begin(), idx.end());
  return idx;
}

std::tuple<at::Tensor, at::Tensor> cem_update_cpu(const at::Tensor& samples, const at::Tensor& scores,
                                                  int64_t n_elite, const at::Tensor& mean, const at::Tensor& std,
                                                  double smoothing, double min_std, bool maximize) {
  check_cem_update_args(samples, scores, n_elite, mean, std, smoothing, min_std);
  check_std_nonnegative_cpu(std);
  const int64_t n = samples.size(0), d = samples.size(1);
  std::vector<int64_t> elite;
  const at::Tensor scores_c = scores.contiguous();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, scores.scalar_type(), "cem_select_cpu", [&] {
    elite = select_elite_cpu(scores_c.const_data_ptr<scalar_t>(), n, n_elite, maximize);
  });
  const at::Tensor x = samples.contiguous(), m_old = mean.contiguous(), s_old = std.contiguous();
  at::Tensor new_mean = at::empty({d}, mean.options()), new_std = at::empty({d}, mean.options());
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, samples.scalar_type(), "cem_update_cpu", [&] {
    const scalar_t* xp = x.const_data_ptr<scalar_t>();
    const scalar_t* mp = m_old.const_data_ptr<scalar_t>();
    const scalar_t* sp = s_old.const_data_ptr<scalar_t>();
    scalar_t* nm = new_mean.mutable_data_ptr<scalar_t>();
    scalar_t* ns = new_std.mutable_data_ptr<scalar_t>();
    const int64_t grain = std::max<int64_t>(1, 32768 / n_elite);
    // Columns split across threads; each walks the elite rows in order (two passes: mean, then spread).
    at::parallel_for(0, d, grain, [&](int64_t c0, int64_t c1) {
      std::vector<double> sum(c1 - c0, 0.0), sq(c1 - c0, 0.0);
      for (const int64_t r : elite)
        for (int64_t c = c0; c < c1; ++c) sum[c - c0] += static_cast<double>(xp[r * d + c]);
      for (int64_t c = c0; c < c1; ++c) sum[c - c0] /= static_cast<double>(n_elite);
      for (const int64_t r : elite)
        for (int64_t c = c0; c < c1; ++c) {
          const double dev = static_cast<double>(xp[r * d + c]) - sum[c - c0];
          sq[c - c0] += dev * dev;
        }
      for (int64_t c = c0; c < c1; ++c) {
        double m, s;
        blend<double>(sum[c - c0], std::sqrt(sq[c - c0] / static_cast<double>(n_elite)), static_cast<double>(mp[c]),
                      static_cast<double>(sp[c]), smoothing, min_std, &m, &s);
        nm[c] = static_cast<scalar_t>(m);
        ns[c] = static_cast<scalar_t>(s);
      }
    });
  });
  return {new_mean, new_std};
}

}  // namespace

JK_LIBRARY(m) {
  m.def("normal(Tensor mean, Tensor std, int n, *, ScalarType? dtype=None, Generator? generator=None) -> Tensor");
  m.def("normal_out(Tensor mean, Tensor std, *, Tensor(a!) out, Generator? generator=None) -> ()");
  m.def(
      "cem_update(Tensor samples, Tensor scores, int n_elite, Tensor mean, Tensor std, float smoothing=0.0, "
      "float min_std=0.0, bool maximize=False) -> (Tensor, Tensor)");
}

JK_LIBRARY_IMPL(CPU, m) {
  m.impl("normal", &normal_cpu);
  m.impl("normal_out", &normal_out_cpu);
  m.impl("cem_update", &cem_update_cpu);
}

}  // namespace sampling
