// Family `sampling`: op schemas, the op functions and their CPU loops.
// Each op is one function registered for CPU, CUDA and Meta: it checks its arguments,
// allocates the output, and hands the data to the device's loop. On the Meta device (fake
// tensors: torch.compile, opcheck) it stops after allocating, so shape rules and checks live
// in one place and no Python fake is needed.
#include <ATen/Dispatch.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <string>
#include <tuple>
#include <vector>

#include "cpu_loops.h"
#include "jk.h"
#include "philox_seeds.h"
#include "sampling.h"
#ifdef JK_WITH_CUDA
#include "cuda_host.h"
#endif

namespace sampling {

#ifdef JK_WITH_CUDA
// sampling.cu
void normal_cuda(jk::CudaLaunch& launch, const jk::CudaTensor& out, const jk::CudaTensor& mean,
                 const jk::CudaTensor& std);
void cem_update_cuda(jk::CudaLaunch& launch, const jk::CudaTensor& new_mean, const jk::CudaTensor& new_std,
                     const jk::CudaTensor& samples, const jk::CudaTensor& scores, int64_t n_elite,
                     const jk::CudaTensor& mean, const jk::CudaTensor& std, double smoothing, double min_std,
                     bool maximize);
#endif

namespace {

void check_normal_params(const at::Tensor& mean, const at::Tensor& std) {
  jk::check_float(mean, "mean");
  jk::check_dim(mean, "mean", 1);
  jk::check_like(mean, "mean", std, "std");
}

// On the CPU the values are at hand, so a negative std is an error (CUDA gives NaN instead: its check would be a
// host sync). normal refuses a NaN std too, as torch.normal does; cem_update's old std only blends into the
// new one, NaN in NaN out, as in the reference.
void check_std_nonnegative_cpu(const at::Tensor& std, bool refuse_nan) {
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, std.scalar_type(), "check_std", [&] {
    const at::Tensor s = std.contiguous();
    const scalar_t* p = s.const_data_ptr<scalar_t>();
    for (int64_t j = 0; j < s.numel(); ++j) {
      const double v = static_cast<double>(p[j]);
      TORCH_CHECK_VALUE(refuse_nan ? v >= 0 : !(v < 0), "std must be >= 0 everywhere, got std[", std::to_string(j),
                        "] = ", jk::num(v));
    }
  });
}

template <typename T, typename P>
void normal_cpu_kernel(T* out, const P* mean, const P* std, int64_t total, int64_t d, jk::PhiloxSeed seed) {
  constexpr int kPer = normals_per_call<T>();
  constexpr int64_t kChunkCalls = 256;  // drawn into z at once, then scaled row segment by row segment
  const int64_t calls = (total + kPer - 1) / kPer;
  // Narrow rows are scaled a period of whole rows at a time: mean and std repeated to at least kMinPeriod
  // values, so that each run below pays its division and its loop set-up once per period, not once per row
  // (one thread, 2^22 values: d = 1 took 37 ms, 3.4x d = 1024's time and 2x eager's).
  constexpr int64_t kMinPeriod = 256;
  std::vector<P> repeated;
  int64_t period = d;
  if (d < kMinPeriod) {
    period = (kMinPeriod + d - 1) / d * d;
    repeated.resize(2 * period);
    for (int64_t j = 0; j < period; ++j) {
      repeated[j] = mean[j % d];
      repeated[period + j] = std[j % d];
    }
    mean = repeated.data();
    std = repeated.data() + period;
  }
  at::parallel_for(0, calls, 4096, [&](int64_t c0, int64_t c1) {
    float z[kChunkCalls * kPer];
    jk::OpmathSegment<T, kChunkCalls * kPer> out_seg;  // P is T's opmath type
    for (int64_t c = c0; c < c1; c += kChunkCalls) {
      const int64_t chunk = std::min(kChunkCalls, c1 - c);
      normals_batch_cpu<kPer>(seed, static_cast<uint64_t>(c), chunk, z);
      const int64_t begin = c * kPer, end = std::min(total, (c + chunk) * kPer);
      for (int64_t i = begin; i < end;) {
        const int64_t col = i % period, run = std::min(end - i, period - col);
        const float* zi = z + (i - begin);
        P* values = out_seg.target(out + i);
        for (int64_t k = 0; k < run; ++k) {
          const P scaled_std = std[col + k] * static_cast<P>(normal_scale<kPer>());  // as the CUDA kernel
          values[k] = mean_or_nan(mean[col + k], std[col + k]) + scaled_std * static_cast<P>(zi[k]);
        }
        out_seg.store(out + i, run);
        i += run;
      }
    }
  });
}

// Fills a checked, contiguous (n, d) out: the part normal and normal_out share.
void normal_fill(const at::Tensor& out, const at::Tensor& mean, const at::Tensor& std,
                 const std::optional<at::Generator>& generator) {
  if (out.is_meta()) return;
  if (out.is_cpu()) check_std_nonnegative_cpu(std, /*refuse_nan=*/true);
  if (out.numel() == 0) return;
  // Parameters in double for a float64 output, else in float (the draws are float32 either way).
  const at::ScalarType p_type = out.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  const at::Tensor m = mean.to(p_type).contiguous(), s = std.to(p_type).contiguous();
#ifdef JK_WITH_CUDA
  if (out.is_cuda()) {
    jk::TorchCudaLaunch launch(out.device(), generator);
    normal_cuda(launch, out, m, s);
    return;
  }
#endif
  const jk::PhiloxSeed seed = jk::cpu_philox_seed(generator);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, out.scalar_type(), "normal_cpu", [&] {
    using P = std::conditional_t<std::is_same_v<scalar_t, double>, double, float>;
    normal_cpu_kernel<scalar_t, P>(out.mutable_data_ptr<scalar_t>(), m.const_data_ptr<P>(), s.const_data_ptr<P>(),
                                   out.numel(), out.size(1), seed);
  });
}

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

void cem_update_cpu(const at::Tensor& new_mean, const at::Tensor& new_std, const at::Tensor& samples,
                    const at::Tensor& scores, int64_t n_elite, const at::Tensor& mean, const at::Tensor& std,
                    double smoothing, double min_std, bool maximize) {
  const int64_t n = samples.size(0), d = samples.size(1);
  std::vector<int64_t> elite;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, scores.scalar_type(), "cem_select_cpu", [&] {
    elite = select_elite_cpu(scores.const_data_ptr<scalar_t>(), n, n_elite, maximize);
  });
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, samples.scalar_type(), "cem_update_cpu", [&] {
    const scalar_t* xp = samples.const_data_ptr<scalar_t>();
    const scalar_t* mp = mean.const_data_ptr<scalar_t>();
    const scalar_t* sp = std.const_data_ptr<scalar_t>();
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
}

}  // namespace

// ---------------------------------------------------------------- the ops

// n is a SymInt: under torch.compile with dynamic shapes the sample count is a symbol here (Meta).
at::Tensor normal(const at::Tensor& mean, const at::Tensor& std, c10::SymInt n,
                  std::optional<at::ScalarType> dtype, std::optional<at::Generator> generator) {
  check_normal_params(mean, std);
  // expect_true: a data-dependent n (a count read from a tensor under torch.compile) cannot be guarded; it is
  // then checked when the graph runs, as torch.randn's n is (a plain or backed n is checked here as before).
  TORCH_CHECK_VALUE(n.sym_ge(0).expect_true(__FILE__, __LINE__), "n must be >= 0, got ",
                    std::to_string(n.guard_int(__FILE__, __LINE__)));
  const at::ScalarType out_type = dtype.value_or(mean.scalar_type());
  TORCH_CHECK_VALUE(jk::is_supported_float(out_type), "dtype must be float32, float64, float16 or bfloat16, got ",
                    out_type);
  at::Tensor out = at::empty_symint({n, mean.sym_size(0)}, mean.options().dtype(out_type));
  normal_fill(out, mean, std, generator);
  return out;
}

void normal_out(const at::Tensor& mean, const at::Tensor& std, const at::Tensor& out,
                std::optional<at::Generator> generator) {
  check_normal_params(mean, std);
  jk::check_float(out, "out");
  jk::check_dim(out, "out", 2);
  jk::check_same_device(mean, "mean", out, "out");
  TORCH_CHECK_VALUE(out.sym_size(1) == mean.sym_size(0), "out must have shape (n, d) with d = mean's length ",
                    std::to_string(mean.size(0)), ", got ", jk::shape(out.sizes()));
  TORCH_CHECK_VALUE(at::has_internal_overlap(out) != at::MemOverlap::Yes,
                    "out has overlapping memory (an expanded or broadcast view): pass a tensor that owns its "
                    "elements");
  TORCH_CHECK_VALUE(out.is_contiguous(), "out must be contiguous, got strides ", jk::shape(out.strides()));
  // A parameter that shares memory with out would be overwritten while it is read. Where torch cannot
  // tell (a strided view: TooHard), the (d,) parameter is copied instead of refused (it was refused,
  // overlapping or not: session 40's review). Meta tensors share nothing.
  at::Tensor params[2] = {mean, std};
  const char* names[2] = {"mean", "std"};
  for (int i = 0; i < 2 && !out.is_meta(); ++i) {
    const at::MemOverlapStatus status = at::get_overlap_status(out, params[i]);
    TORCH_CHECK_VALUE(status == at::MemOverlapStatus::No || status == at::MemOverlapStatus::TooHard,
                      "out shares memory with ", names[i], ", which the samples would overwrite while it is read: pass ",
                      names[i], ".clone()");
    if (status == at::MemOverlapStatus::TooHard) params[i] = params[i].clone();
  }
  normal_fill(out, params[0], params[1], generator);
}

std::tuple<at::Tensor, at::Tensor> cem_update(const at::Tensor& samples, const at::Tensor& scores, int64_t n_elite,
                                              const at::Tensor& mean, const at::Tensor& std, double smoothing,
                                              double min_std, bool maximize) {
  jk::check_float(samples, "samples");
  jk::check_dim(samples, "samples", 2);
  const c10::SymInt n = samples.sym_size(0), d = samples.sym_size(1);  // symbolic under torch.compile (Meta)
  // expect_true, as in normal: rows picked by a mask (samples[feasible]) have a data-dependent count under
  // torch.compile, which a guard cannot take ("Could not guard on data-dependent expression"); checked at run time.
  TORCH_CHECK_VALUE(n.sym_ge(1).expect_true(__FILE__, __LINE__),
                    "samples has no rows: cem_update needs at least one scored sample");
  jk::check_float(scores, "scores");
  jk::check_same_device(samples, "samples", scores, "scores");
  TORCH_CHECK_VALUE(scores.dim() == 1 && scores.sym_size(0) == n, "scores must have shape (n,) = (",
                    std::to_string(samples.size(0)), ",), one score per row of samples, got ",
                    jk::shape(scores.sizes()));
  jk::check_same_device(samples, "samples", mean, "mean");
  jk::check_same_dtype(samples, "samples", mean, "mean");
  TORCH_CHECK_VALUE(mean.dim() == 1 && mean.sym_size(0) == d, "mean must have shape (d,) = (",
                    std::to_string(samples.size(1)), ",), one value per column of samples, got ",
                    jk::shape(mean.sizes()));
  jk::check_like(mean, "mean", std, "std");
  TORCH_CHECK_VALUE(n_elite >= 1 && n.sym_ge(n_elite).expect_true(__FILE__, __LINE__), "n_elite must be in 1..n = 1..",
                    std::to_string(samples.size(0)),
                    ", got ", std::to_string(n_elite));
  TORCH_CHECK_VALUE(smoothing >= 0.0 && smoothing <= 1.0, "smoothing must be in [0, 1], got ", jk::num(smoothing));
  TORCH_CHECK_VALUE(std::isfinite(min_std) && min_std >= 0.0, "min_std must be a finite number >= 0, got ",
                    jk::num(min_std));
  at::Tensor new_mean = at::empty_symint({d}, mean.options()), new_std = at::empty_symint({d}, mean.options());
  if (samples.is_meta()) return {new_mean, new_std};
  if (samples.is_cpu()) check_std_nonnegative_cpu(std, /*refuse_nan=*/false);
  if (samples.size(1) == 0) return {new_mean, new_std};
  const at::Tensor x = samples.contiguous(), sc = scores.contiguous(), m = mean.contiguous(), s = std.contiguous();
#ifdef JK_WITH_CUDA
  if (samples.is_cuda()) {
    jk::TorchCudaLaunch launch(samples.device());
    cem_update_cuda(launch, new_mean, new_std, x, sc, n_elite, m, s, smoothing, min_std, maximize);
    return {new_mean, new_std};
  }
#endif
  cem_update_cpu(new_mean, new_std, x, sc, n_elite, m, s, smoothing, min_std, maximize);
  return {new_mean, new_std};
}

JK_LIBRARY(m) {
  jk::def_not_differentiable(m, "normal(Tensor mean, Tensor std, SymInt n, *, ScalarType? dtype=None, Generator? generator=None) -> Tensor",
                             jk::draws_tags());
  jk::def_in_place(m, "normal_out(Tensor mean, Tensor std, *, Tensor(a!) out, Generator? generator=None) -> ()", jk::draws_tags());
  jk::def_not_differentiable(
      m, "cem_update(Tensor samples, Tensor scores, int n_elite, Tensor mean, Tensor std, float smoothing=0.0, "
      "float min_std=0.0, bool maximize=False) -> (Tensor, Tensor)");
}

JK_LIBRARY_IMPL(CPU, m) {
  m.impl("normal", &normal);
  m.impl("normal_out", &normal_out);
  m.impl("cem_update", &cem_update);
}
JK_LIBRARY_IMPL(Meta, m) {
  m.impl("normal", &normal);
  m.impl("normal_out", &normal_out);
  m.impl("cem_update", &cem_update);
}
#ifdef JK_WITH_CUDA
JK_LIBRARY_IMPL(CUDA, m) {
  m.impl("normal", &normal);
  m.impl("normal_out", &normal_out);
  m.impl("cem_update", &cem_update);
}
#endif

}  // namespace sampling
