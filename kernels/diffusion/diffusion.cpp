// Family `diffusion`: op schemas, the op functions and their CPU loops.
//   ddpm_schedule   the per-timestep constants (float64 table) the step kernels read
//   ddpm_step       DDPM reverse step t -> t-1 (diffusers DDPMScheduler.step, "fixed_small")
//   ddim_step       DDIM step t -> t_prev (diffusers DDIMScheduler.step)
//   conv1d_gn_mish  Mish(GroupNorm(Conv1d(x)))
//   gn_mish_backward  the backward of Mish(GroupNorm(z)) (conv1d_gn_mish's, ops.py)
// Each op is one function registered for CPU, CUDA and Meta: it checks its arguments, allocates the
// output, stops there on the Meta device (fake tensors), then runs the CPU loop or the CUDA launcher.
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/ops/conv1d.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/zeros.h>

#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "cpu_loops.h"
#include "diffusion.h"
#include "jk.h"
#include "philox_seeds.h"
#ifdef JK_WITH_CUDA
#include "cuda_host.h"
#endif

namespace diffusion {

// ---------------------------------------------------------------- schedule

at::Tensor ddpm_schedule(int64_t num_train_timesteps, c10::string_view beta_schedule, double beta_start,
                         double beta_end) {
  const int64_t T = num_train_timesteps;
  TORCH_CHECK_VALUE(T >= 1 && T <= (int64_t{1} << 24), "num_train_timesteps must be in [1, 2^24], got ",
                    std::to_string(T));
  const std::string_view kind(beta_schedule.data(), beta_schedule.size());
  std::vector<double> betas(T);
  jk::check_finite(beta_start, "beta_start");
  jk::check_finite(beta_end, "beta_end");
  if (kind == "linear" || kind == "scaled_linear") {
    TORCH_CHECK_VALUE(beta_start > 0 && beta_start < 1, "beta_start must be in (0, 1), got ", jk::num(beta_start));
    TORCH_CHECK_VALUE(beta_end > 0 && beta_end < 1, "beta_end must be in (0, 1), got ", jk::num(beta_end));
    const bool scaled = kind == "scaled_linear";  // linear in sqrt(beta), then squared
    const double lo = scaled ? std::sqrt(beta_start) : beta_start, hi = scaled ? std::sqrt(beta_end) : beta_end;
    for (int64_t i = 0; i < T; ++i) {
      const double v = T == 1 ? lo : lo + (hi - lo) * static_cast<double>(i) / static_cast<double>(T - 1);
      betas[i] = scaled ? v * v : v;
    }
  } else if (kind == "squaredcos_cap_v2") {  // Nichol & Dhariwal's cosine schedule, betas capped at 0.999
    auto alpha_bar = [](double s) {
      const double c = std::cos((s + 0.008) / 1.008 * M_PI / 2);
      return c * c;
    };
    for (int64_t i = 0; i < T; ++i) {
      const double t1 = static_cast<double>(i) / T, t2 = static_cast<double>(i + 1) / T;
      betas[i] = std::min(1.0 - alpha_bar(t2) / alpha_bar(t1), 0.999);
    }
  } else {
    TORCH_CHECK_VALUE(false, "beta_schedule must be \"linear\", \"scaled_linear\" or \"squaredcos_cap_v2\", got \"",
                      kind, "\"");
  }
  at::Tensor table = at::empty({T, kScheduleCols}, at::TensorOptions().dtype(at::kDouble));
  double* out = table.mutable_data_ptr<double>();
  double abar = 1.0;
  for (int64_t t = 0; t < T; ++t) {
    const double abar_prev = abar;  // 1 before the first step, as diffusers' `one`
    abar *= 1.0 - betas[t];
    const Posterior post = ddpm_posterior(abar, abar_prev, t == 0);
    double* row = out + t * kScheduleCols;
    row[kBeta] = betas[t];
    row[kAlphaCumprod] = abar;
    row[kSqrtAlphaCumprod] = std::sqrt(abar);
    row[kSqrtOneMinusAlphaCumprod] = std::sqrt(1.0 - abar);
    row[kRsqrtAlphaCumprod] = 1.0 / std::sqrt(abar);
    row[kPosteriorCoefX0] = post.coef_x0;
    row[kPosteriorCoefXt] = post.coef_xt;
    row[kPosteriorStd] = post.std;
  }
  return table;
}

// ---------------------------------------------------------------- step argument checks

int parse_prediction(c10::string_view prediction_type) {
  const std::string_view p(prediction_type.data(), prediction_type.size());
  if (p == "epsilon") return kEpsilon;
  if (p == "v_prediction") return kVPrediction;
  if (p == "sample") return kSample;
  TORCH_CHECK_VALUE(false, "prediction_type must be \"epsilon\", \"v_prediction\" or \"sample\", got \"", p, "\"");
  return kEpsilon;  // unreachable
}

void check_step_tensors(const at::Tensor& model_output, const at::Tensor& sample, const at::Tensor& schedule,
                        const std::optional<at::Tensor>& noise, double clip_sample_range) {
  jk::check_float(sample, "sample");
  TORCH_CHECK_VALUE(sample.dim() >= 1, "sample must have a batch dimension (B, ...), got a 0-d tensor");
  jk::check_like(sample, "sample", model_output, "model_output");
  if (noise.has_value()) jk::check_like(sample, "sample", *noise, "noise");
  TORCH_CHECK_VALUE(schedule.scalar_type() == at::kDouble,
                    "schedule must be the float64 table from ddpm_schedule, got dtype ", schedule.scalar_type());
  TORCH_CHECK_VALUE(schedule.dim() == 2 && schedule.sym_size(1) == kScheduleCols && schedule.sym_size(0) >= 1,
                    "schedule must be the (T, ", std::to_string(kScheduleCols),
                    ") table from ddpm_schedule, got shape ", jk::shape(schedule.sizes()));
  jk::check_same_device(sample, "sample", schedule, "schedule");
  jk::check_positive(clip_sample_range, "clip_sample_range");
}

// A timestep tensor: int32/int64, a scalar or one per batch row, on the sample's device (read there)
// or a CPU scalar (read here).
void check_time_tensor(const at::Tensor& t, const char* name, const at::Tensor& sample) {
  TORCH_CHECK_VALUE(t.scalar_type() == at::kLong || t.scalar_type() == at::kInt, name,
                    " must be an int64 or int32 tensor, got ", t.scalar_type());
  TORCH_CHECK_VALUE(t.dim() <= 1, name, " must be a scalar or 1-D with one entry per batch row, got shape ",
                    jk::shape(t.sizes()));
  // Symbolic counts: under torch.compile with dynamic shapes the batch size is a symbol here (Meta). The message
  // reads int sizes, as every shape message does: sizes() serves a fake tensor (numel() raises on one), and
  // maybe_as_int had printed "a symbolic size" there.
  const c10::SymInt count = t.sym_numel(), batch = sample.sym_size(0);
  TORCH_CHECK_VALUE(count == 1 || count == batch, name, " must have 1 or sample.size(0) = ",
                    std::to_string(sample.size(0)), " entries, got ", std::to_string(t.size(0)));  // count != 1: t is 1-D
  TORCH_CHECK_VALUE(t.device() == sample.device() || (t.is_cpu() && count == 1), name, " is on ", t.device(),
                    " but sample is on ", sample.device(), ": pass ", name,
                    " on the sample's device (or as a CPU scalar)");
}

// Reads a checked timestep tensor: a pointer for the kernel, or the value itself for a CPU tensor with a
// non-CPU sample. Not called on the Meta device (no data).
TimeArg make_time_arg(const at::Tensor& t, const at::Tensor& sample) {
  const bool is64 = t.scalar_type() == at::kLong;
  const int64_t stride = t.numel() == 1 ? 0 : t.stride(0);
  if (t.device() == sample.device()) return TimeArg{t.const_data_ptr(), is64, stride, 0};
  const int64_t value = is64 ? *t.const_data_ptr<int64_t>() : *t.const_data_ptr<int32_t>();
  return TimeArg{nullptr, is64, 0, value};
}

std::string row_suffix(int64_t rows, int64_t r) { return rows > 1 ? " in row " + std::to_string(r) : ""; }

// A table whose alphas_cumprod rises from one step's timestep to the next: its rows are not in ascending
// timestep order (diffusers' `timesteps` are descending), and the step would go the wrong way.
// (The message is built only on failure: this runs once per batch row.)
void check_ascending(bool ascending, int64_t from, int64_t to, int64_t rows, int64_t r) {
  TORCH_CHECK_VALUE(ascending, "schedule must hold its rows in ascending timestep order (alphas_cumprod falling), ",
                    "but alphas_cumprod rises from row ", from < 0 ? "-1 (the final step)" : std::to_string(from),
                    " to row ", std::to_string(to), row_suffix(rows, r),
                    "; a table indexed by diffusers' descending `timesteps` must be flipped");
}

// Host-readable (CPU) timesteps are range-checked here, and against a CPU table its order. Timesteps on a
// GPU cannot be read without a host sync: the kernels check them per row and write NaN to rows whose
// timestep is out of range or whose table rows are out of order (the schedule is only indexed after the
// range check, so it is never read out of bounds).
void check_ddpm_times(const DdpmCoefFn& fn, const at::Tensor& t, int64_t batch, bool schedule_on_host) {
  // An empty batch's per-row timesteps hold nothing to check; a scalar t is checked whatever the batch.
  if (!t.is_cpu() || t.numel() == 0) return;
  const int64_t rows = fn.per_row() ? batch : 1;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t v = fn.t.at(r);
    TORCH_CHECK_VALUE(v >= 0 && v < fn.num_timesteps, "t must be in [0, ", std::to_string(fn.num_timesteps),
                      ") (the schedule's T), got ", std::to_string(v), row_suffix(rows, r));
    if (schedule_on_host) check_ascending(fn.ascending_at(v), v - 1, v, rows, r);
  }
}

void check_ddim_times(const DdimCoefFn& fn, const at::Tensor& t, const at::Tensor& t_prev, int64_t batch,
                      bool schedule_on_host) {
  // As in check_ddpm_times: an empty batch's per-row timesteps hold nothing to check, a scalar one beside
  // them is checked (one row, read only from the scalar).
  const bool t_read = t.is_cpu() && t.numel() > 0, prev_read = t_prev.is_cpu() && t_prev.numel() > 0;
  const int64_t rows = fn.per_row() && batch > 0 ? batch : 1;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t v = t_read ? fn.t.at(r) : -1;
    if (t_read) {
      TORCH_CHECK_VALUE(v >= 0 && v < fn.num_timesteps, "t must be in [0, ", std::to_string(fn.num_timesteps),
                        ") (the schedule's T), got ", std::to_string(v), row_suffix(rows, r));
    }
    if (!prev_read) continue;
    const int64_t p = fn.t_prev.at(r);
    if (t_read) {
      TORCH_CHECK_VALUE(p >= -1 && p < v, "t_prev must be in [-1, t) (-1: the final step), got t_prev = ",
                        std::to_string(p), " with t = ", std::to_string(v), row_suffix(rows, r));
      if (schedule_on_host) check_ascending(fn.ascending_at(v, p), p, v, rows, r);
    } else {
      TORCH_CHECK_VALUE(p >= -1 && p < fn.num_timesteps - 1, "t_prev must be in [-1, T - 1) = [-1, ",
                        std::to_string(fn.num_timesteps - 1), "), got ", std::to_string(p), row_suffix(rows, r));
    }
  }
}

// ---------------------------------------------------------------- steps

// The timesteps that a row's step coefficients depend on.
std::pair<int64_t, int64_t> step_times(const DdpmCoefFn& fn, int64_t row) { return {fn.t.at(row), 0}; }
std::pair<int64_t, int64_t> step_times(const DdimCoefFn& fn, int64_t row) { return {fn.t.at(row), fn.t_prev.at(row)}; }

template <typename scalar_t, typename CoefFn>
void step_cpu(const at::Tensor& out, const at::Tensor& model_output, const at::Tensor& sample,
              const at::Tensor* noise, const CoefFn& fn, bool clip, double range, bool draw,
              const std::optional<at::Generator>& generator) {
  using acc_t = at::opmath_type<scalar_t>;
  const int64_t n = out.numel(), inner = n / sample.size(0);
  const scalar_t* m = model_output.const_data_ptr<scalar_t>();
  const scalar_t* x = sample.const_data_ptr<scalar_t>();
  const scalar_t* z = noise ? noise->const_data_ptr<scalar_t>() : nullptr;
  scalar_t* o = out.mutable_data_ptr<scalar_t>();
  const uint64_t seed = draw ? jk::cpu_philox_seed(generator).seed : 0;  // offset 0: counters start at 0
  const acc_t r = static_cast<acc_t>(range);
  const bool per_row = fn.per_row();
  at::parallel_for(0, n, jk::kCpuGrain, [&](int64_t begin, int64_t end) {
    // Segments of at most kSegment elements, read (and their noise drawn) at once, then computed a piece of rows
    // with the same timesteps at a time: one coefficient lookup a piece, and plain loops the compiler vectorizes.
    // Element i uses lane i % 4 of the Philox block i / 4, as on the GPU. (Segments that stopped at each row's
    // end made narrow rows with per-row timesteps ~20x dearer per element: one thread, 2^22 rows of 1 took
    // 232 ms with drawn noise, 2^12 rows of 1024 12 ms; each row of 1 drew a whole Philox block, looked its
    // coefficients up and set up its loops.)
    constexpr int64_t kSegment = 1024;
    float drawn[kSegment + 4];  // a segment that starts inside a Philox block draws one block more
    jk::OpmathSegment<scalar_t, kSegment> m_seg, x_seg, z_seg, out_seg;
    for (int64_t i0 = begin; i0 < end;) {
      const int64_t stop = std::min(end, i0 + kSegment), len = stop - i0;
      const acc_t* mv = m_seg.read(m + i0, len);
      const acc_t* xv = x_seg.read(x + i0, len);
      const acc_t* zv = z != nullptr ? z_seg.read(z + i0, len) : nullptr;
      acc_t* ov = out_seg.target(o + i0);
      const int64_t q0 = i0 / 4;
      if (zv == nullptr && draw) jk::normal4_batch_cpu(seed, static_cast<uint64_t>(q0), (stop - 1) / 4 - q0 + 1, drawn);
      const float* dv = drawn + (i0 - 4 * q0);  // element i0 + j's draw at dv[j]
      for (int64_t j0 = 0; j0 < len;) {  // the pieces [j0, j1), each of rows with the same timesteps
        int64_t row = per_row ? (i0 + j0) / inner : 0;
        int64_t j1 = per_row ? std::min(len, (row + 1) * inner - i0) : len;
        const StepCoefs<acc_t> c = fn.template get<acc_t>(row);
        // The rows after it with the same timesteps share its coefficients, and its piece (t = torch.full((B,), t))
        for (const auto times = step_times(fn, row); j1 < len && step_times(fn, row + 1) == times; ++row) {
          j1 = std::min(len, j1 + inner);
        }
        // noise(j): element i0 + j's z; one loop per kind, each vectorizable. Drawn or zero noise is finite.
        auto piece = [&](auto noise, auto noise_finite) {
          for (int64_t j = j0; j < j1; ++j) {
            ov[j] = step_element<decltype(noise_finite)::value>(c, mv[j], xv[j], noise(j), clip, r);
          }
        };
        if (zv != nullptr) {
          piece([&](int64_t j) { return zv[j]; }, std::false_type{});
        } else if (draw) {
          piece([&](int64_t j) { return static_cast<acc_t>(dv[j]); }, std::true_type{});
        } else {
          piece([](int64_t) { return acc_t(0); }, std::true_type{});
        }
        j0 = j1;
      }
      out_seg.store(o + i0, len);
      i0 = stop;
    }
  });
}

// The part of ddpm_step and ddim_step after their checks: `out` is allocated, not Meta.
template <typename CoefFn>
void run_step(const at::Tensor& out, const at::Tensor& model_output, const at::Tensor& sample,
              const std::optional<at::Tensor>& noise, const CoefFn& fn, bool clip, double range, bool draw,
              const std::optional<at::Generator>& generator) {
  if (out.numel() == 0) return;
  const at::Tensor m = model_output.contiguous(), x = sample.contiguous();
  const at::Tensor z = noise.has_value() ? noise->contiguous() : at::Tensor();
  const at::Tensor* zp = noise.has_value() ? &z : nullptr;
  draw = draw && zp == nullptr;
#ifdef JK_WITH_CUDA
  if (out.is_cuda()) {
    jk::TorchCudaLaunch launch(out.device(), generator);  // draws the noise (default generator: None)
    if constexpr (std::is_same_v<CoefFn, DdpmCoefFn>) {
      ddpm_step_cuda(launch, out, m, x, z, fn, clip, range, draw);  // z: undefined without noise
    } else {
      ddim_step_cuda(launch, out, m, x, z, fn, clip, range, draw);
    }
    return;
  }
#endif
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, sample.scalar_type(), "diffusion_step_cpu", [&] {
    step_cpu<scalar_t>(out, m, x, zp, fn, clip, range, draw, generator);
  });
}

at::Tensor ddpm_step(const at::Tensor& model_output, const at::Tensor& t, const at::Tensor& sample,
                     const at::Tensor& schedule, const std::optional<at::Tensor>& noise,
                     c10::string_view prediction_type, bool clip_sample, double clip_sample_range,
                     std::optional<at::Generator> generator) {
  check_step_tensors(model_output, sample, schedule, noise, clip_sample_range);
  check_time_tensor(t, "t", sample);
  const int prediction = parse_prediction(prediction_type);
  at::Tensor out = at::empty_symint(sample.sym_sizes(), sample.options());
  if (sample.is_meta()) return out;
  const at::Tensor sched = schedule.contiguous();  // alive until the (asynchronous) kernel has read it
  const DdpmCoefFn fn{sched.const_data_ptr<double>(), sched.size(0), make_time_arg(t, sample), prediction};
  check_ddpm_times(fn, t, sample.size(0), schedule.is_cpu());
  const bool no_noise = t.is_cpu() && !fn.per_row() && fn.t.at(0) == 0;  // sigma_0 = 0: nothing to draw
  run_step(out, model_output, sample, noise, fn, clip_sample, clip_sample_range, !no_noise, generator);
  return out;
}

at::Tensor ddim_step(const at::Tensor& model_output, const at::Tensor& t, const at::Tensor& t_prev,
                     const at::Tensor& sample, const at::Tensor& schedule, double eta,
                     const std::optional<at::Tensor>& noise, c10::string_view prediction_type, bool clip_sample,
                     double clip_sample_range, bool set_alpha_to_one, bool use_clipped_model_output,
                     std::optional<at::Generator> generator) {
  check_step_tensors(model_output, sample, schedule, noise, clip_sample_range);
  check_time_tensor(t, "t", sample);
  check_time_tensor(t_prev, "t_prev", sample);
  TORCH_CHECK_VALUE(std::isfinite(eta) && eta >= 0, "eta must be a finite number >= 0, got ", jk::num(eta));
  const int prediction = parse_prediction(prediction_type);
  at::Tensor out = at::empty_symint(sample.sym_sizes(), sample.options());
  if (sample.is_meta()) return out;
  const at::Tensor sched = schedule.contiguous();
  const DdimCoefFn fn{sched.const_data_ptr<double>(), sched.size(0), make_time_arg(t, sample),
                      make_time_arg(t_prev, sample), prediction, eta, set_alpha_to_one, use_clipped_model_output};
  check_ddim_times(fn, t, t_prev, sample.size(0), schedule.is_cpu());
  // Without eta > 0 the noise term is zero and nothing is drawn (diffusers ignores `noise` then too).
  const std::optional<at::Tensor> used_noise = eta > 0 ? noise : std::nullopt;
  run_step(out, model_output, sample, used_noise, fn, clip_sample, clip_sample_range, eta > 0, generator);
  return out;
}

// ---------------------------------------------------------------- conv1d_gn_mish

// Returns the padding to use.
int64_t check_conv_args(const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                        const at::Tensor& gn_weight, const at::Tensor& gn_bias, int64_t num_groups,
                        std::optional<int64_t> padding, double eps) {
  jk::check_float(x, "x");
  jk::check_dim(x, "x", 3);
  jk::check_dim(weight, "weight", 3);
  jk::check_same_device(x, "x", weight, "weight");
  jk::check_same_dtype(x, "x", weight, "weight");
  // Symbolic sizes: under torch.compile with dynamic shapes they are symbols here (Meta).
  const c10::SymInt c_out = weight.sym_size(0), kernel = weight.sym_size(2);
  TORCH_CHECK_VALUE(weight.sym_size(1) == x.sym_size(1), "weight must be (C_out, C_in, K) with C_in = x.size(1) = ",
                    std::to_string(x.size(1)), ", got shape ", jk::shape(weight.sizes()));
  // C_in = 0 is refused: PyTorch's conv1d then returns (B, 0, L_out), not (B, C_out, L_out) (the reference
  // raises in group_norm), so the GroupNorm pass read an empty y as (B, C_out, L_out) and the direct CUDA
  // kernel's block shape (conv_blocks: no input channels, no splits) grew past its 8 warps.
  TORCH_CHECK_VALUE(kernel >= 1 && c_out >= 1 && weight.sym_size(1) >= 1,
                    "weight must have C_out >= 1, C_in >= 1 and a kernel size K >= 1, got shape ",
                    jk::shape(weight.sizes()));
  auto check_vector = [&](const at::Tensor& v, const char* name) {
    jk::check_same_device(x, "x", v, name);
    jk::check_same_dtype(x, "x", v, name);
    TORCH_CHECK_VALUE(v.dim() == 1 && v.sym_size(0) == c_out, name, " must have shape (C_out,) = (",
                      std::to_string(weight.size(0)), ",), got ", jk::shape(v.sizes()));
  };
  if (bias.has_value()) check_vector(*bias, "bias");
  check_vector(gn_weight, "gn_weight");
  check_vector(gn_bias, "gn_bias");
  TORCH_CHECK_VALUE(num_groups >= 1 && c_out % num_groups == 0, "num_groups must divide the output channels (",
                    std::to_string(weight.size(0)), "), got ", std::to_string(num_groups));
  // Checked where the batch is a number: a symbolic one (torch.compile, torch.export) is checked when the
  // op runs on real tensors, as a guard here would narrow the dynamic batch's range (export refuses that).
  if (const std::optional<int64_t> batch = x.sym_size(0).maybe_as_int()) {
    TORCH_CHECK_VALUE(*batch * num_groups < (int64_t{1} << 31), "x.size(0) * num_groups must be < 2^31, got ",
                      std::to_string(*batch * num_groups));
  }
  TORCH_CHECK_VALUE(std::isfinite(eps) && eps >= 0, "eps must be a finite number >= 0, got ", jk::num(eps));
  int64_t pad;
  if (padding.has_value()) {
    pad = *padding;
    TORCH_CHECK_VALUE(pad >= 0 && pad < (int64_t{1} << 31), "padding must be in [0, 2^31), got ",
                      std::to_string(pad));
  } else {
    // K is the weight's: pinned here (padding=None sets the padding, an int, from it).
    const int64_t k = kernel.guard_int(__FILE__, __LINE__);
    TORCH_CHECK_VALUE(k % 2 == 1, "padding=None keeps the length only for odd kernel sizes; weight has K = ",
                      std::to_string(k), ": pass padding explicitly");
    pad = k / 2;
  }
  TORCH_CHECK_VALUE(x.sym_size(2) + 2 * pad - kernel + 1 >= 1, "x has length ", std::to_string(x.size(2)),
                    ", too short for K = ", std::to_string(weight.size(2)), " with padding ", std::to_string(pad));
  // Length 0 with padding enough for an output: PyTorch's conv1d (the reference's, the CPU route's) refuses
  // it unless the batch is empty, where the direct CUDA kernel convolved the padding alone and Meta accepted.
  TORCH_CHECK_VALUE(x.sym_size(2) >= 1 || x.sym_size(0) == 0, "x has length 0 (shape ", jk::shape(x.sizes()),
                    "): conv1d_gn_mish needs at least one input position per row");
  return pad;
}

// Mish for the CPU's float loop: h·n/(n + 2) with n = e^h(e^h + 2), which is tanh(softplus(h)) with
// one exponential (jk::exp_float: a polynomial, so the loop vectorizes). std::exp, std::log1p and
// std::tanh were three scalar library calls an element: conv1d_gn_mish at B=1 ran at 0.4x eager.
// e^h is taken at min(h, 20): beyond, n/(n + 2) is 1 in float. Below -87, where e^h leaves float's
// normal range, n is 0, so the result is -0 and -inf gives NaN, as torch's; NaN stays NaN.
inline float mish_cpu(float h) {
  const float e = jk::exp_float(h < 20.0f ? h : 20.0f);
  return mish_given_exp(h, h > -87.0f ? e : 0.0f);  // n = 0 below -87 (exp_float's subnormals there: not kept)
}
inline double mish_cpu(double h) { return mish(h); }

// The mean and 1/std of a group's n values, in double: two passes, no cancellation when the mean is large.
template <typename acc_t>
std::pair<double, double> group_statistics_cpu(const acc_t* v, int64_t n, double eps) {
  double sum = 0, sq = 0;
  for (int64_t i = 0; i < n; ++i) sum += v[i];
  const double mean = sum / n;
  for (int64_t i = 0; i < n; ++i) sq += (v[i] - mean) * (v[i] - mean);
  return {mean, 1.0 / std::sqrt(sq / n + eps)};
}

// out = Mish(GroupNorm(y)) for the convolution's output y (B, C, L), contiguous, of dtype Y (out's, or
// float for a half-type out convolved in float32); one task per (batch, group), the statistics in double.
template <typename scalar_t, typename Y = scalar_t>
void gn_mish_cpu(const at::Tensor& out, const at::Tensor& y, const at::Tensor& gn_weight, const at::Tensor& gn_bias,
                 int64_t groups, double eps) {
  using acc_t = at::opmath_type<scalar_t>;
  const int64_t batch = y.size(0), channels = y.size(1), length = y.size(2);
  const int64_t cg = channels / groups, n = cg * length;
  const Y* src = y.const_data_ptr<Y>();
  const scalar_t* gamma = gn_weight.const_data_ptr<scalar_t>();
  const scalar_t* beta = gn_bias.const_data_ptr<scalar_t>();
  scalar_t* dst = out.mutable_data_ptr<scalar_t>();
  at::parallel_for(0, batch * groups, std::max<int64_t>(1, jk::kCpuGrain / std::max<int64_t>(n, 1)),
                   [&](int64_t begin, int64_t end) {
    std::vector<acc_t> v(n), row(length);  // the group's values in acc_t (widened once), one channel's results
    for (int64_t bg = begin; bg < end; ++bg) {
      jk::widen(src + bg * n, v.data(), n);
      const auto [mean, rstd] = group_statistics_cpu(v.data(), n, eps);
      const int64_t g = bg % groups;
      for (int64_t c = 0; c < cg; ++c) {
        const int64_t ch = g * cg + c;
        const double scale = rstd * static_cast<double>(gamma[ch]), shift = static_cast<double>(beta[ch]);
        const acc_t* vc = v.data() + c * length;
        // the affine in double (beta and the normalized value may nearly cancel), Mish in acc_t
        for (int64_t l = 0; l < length; ++l) row[l] = mish_cpu(static_cast<acc_t>((vc[l] - mean) * scale + shift));
        jk::narrow(row.data(), dst + bg * n + c * length, length);
      }
    }
  });
}

// Mish' on the CPU: float's exponential from jk::exp_float with e = 0 below -87, as mish_cpu.
inline float mish_derivative_cpu(float h) {
  const float e = jk::exp_float(h < mish_derivative_clamp<float>() ? h : mish_derivative_clamp<float>());
  return mish_derivative_given_exp(h, h > -87.0f ? e : 0.0f);
}
inline double mish_derivative_cpu(double h) { return mish_derivative(h); }

// gn_mish_backward's CPU loop (the CUDA kernel's maths): one task per (batch, group), the statistics in
// double as gn_mish_cpu's; per (channel, batch row) the sums of dh * zn, dh and grad_z into partials (3, C, B).
template <typename scalar_t>
void gn_mish_backward_cpu(const at::Tensor& grad_z, const at::Tensor& partials, const at::Tensor& grad,
                          const at::Tensor& z, const at::Tensor& gn_weight, const at::Tensor& gn_bias, int64_t groups,
                          double eps) {
  using acc_t = at::opmath_type<scalar_t>;
  const int64_t batch = z.size(0), channels = z.size(1), length = z.size(2), cg = channels / groups, n = cg * length;
  const scalar_t* gamma = gn_weight.const_data_ptr<scalar_t>();
  const scalar_t* beta = gn_bias.const_data_ptr<scalar_t>();
  acc_t* sums = partials.mutable_data_ptr<acc_t>();
  at::parallel_for(0, batch * groups, std::max<int64_t>(1, jk::kCpuGrain / std::max<int64_t>(n, 1)),
                   [&](int64_t begin, int64_t end) {
    std::vector<acc_t> v(n), dzn(n), row(length);  // the group's z, grad then dh * gamma, one channel's grad_z
    for (int64_t bg = begin; bg < end; ++bg) {
      jk::widen(z.const_data_ptr<scalar_t>() + bg * n, v.data(), n);
      jk::widen(grad.const_data_ptr<scalar_t>() + bg * n, dzn.data(), n);
      const auto [mean, rstd] = group_statistics_cpu(v.data(), n, eps);
      const int64_t b = bg / groups, ch0 = bg % groups * cg;
      const auto partial = [&](int64_t j, int64_t c) -> acc_t& {
        return sums[partial_at(j, ch0 + c, b, channels, batch)];
      };
      double dzn_sum = 0, dzn_zn_sum = 0;
      for (int64_t c = 0; c < cg; ++c) {
        const double g = static_cast<double>(gamma[ch0 + c]), shift = static_cast<double>(beta[ch0 + c]);
        double weight_sum = 0, bias_sum = 0;
        for (int64_t i = c * length; i < (c + 1) * length; ++i) {
          const double zn = (v[i] - mean) * rstd;
          const acc_t dh = dzn[i] * mish_derivative_cpu(static_cast<acc_t>(zn * g + shift));
          weight_sum += dh * zn;
          bias_sum += dh;
          dzn[i] = static_cast<acc_t>(dh * g);
        }
        partial(0, c) = static_cast<acc_t>(weight_sum);
        partial(1, c) = static_cast<acc_t>(bias_sum);
        dzn_sum += g * bias_sum;
        dzn_zn_sum += g * weight_sum;
      }
      for (int64_t c = 0; c < cg; ++c) {
        double dz_sum = 0;
        for (int64_t l = 0; l < length; ++l) {
          const int64_t i = c * length + l;
          row[l] = static_cast<acc_t>(rstd * (dzn[i] - dzn_sum / n - (v[i] - mean) * rstd * dzn_zn_sum / n));
          dz_sum += row[l];
        }
        partial(2, c) = static_cast<acc_t>(dz_sum);
        jk::narrow(row.data(), grad_z.mutable_data_ptr<scalar_t>() + bg * n + c * length, length);
      }
    }
  });
}

// The backward of out = Mish(GroupNorm(conv_out)) with gn_weight and gn_bias: grad_conv_out (grad_z below) and,
// in one (3, C) tensor, the gradients of gn_weight, of gn_bias and of a bias the convolution added (grad_conv_out
// summed over batch and length; ops.py's face hands them out as three tensors). conv1d_gn_mish's backward
// (ops.py) calls it with the conv_out its autograd twin kept. One kernel and one reduction over the batch, where
// torch's GroupNorm and Mish backward and the bias's sum took 5 launches and, at a diffusion policy's short
// lengths, much of its backward time (see gn_mish_backward_kernel).
std::tuple<at::Tensor, at::Tensor> gn_mish_backward(
    const at::Tensor& grad, const at::Tensor& conv_out, const at::Tensor& gn_weight, const at::Tensor& gn_bias,
    int64_t num_groups, double eps) {
  jk::check_float(conv_out, "conv_out");
  jk::check_dim(conv_out, "conv_out", 3);
  jk::check_same_device(conv_out, "conv_out", grad, "grad");
  jk::check_same_dtype(conv_out, "conv_out", grad, "grad");
  TORCH_CHECK_VALUE(grad.sym_sizes() == conv_out.sym_sizes(), "grad must have conv_out's shape ",
                    jk::shape(conv_out.sizes()), ", got ", jk::shape(grad.sizes()));
  const c10::SymInt channels = conv_out.sym_size(1);
  for (const auto& [v, name] : {std::pair{&gn_weight, "gn_weight"}, std::pair{&gn_bias, "gn_bias"}}) {
    jk::check_same_device(conv_out, "conv_out", *v, name);
    jk::check_same_dtype(conv_out, "conv_out", *v, name);
    TORCH_CHECK_VALUE(v->dim() == 1 && v->sym_size(0) == channels, name, " must have shape (C,) = (",
                      std::to_string(conv_out.size(1)), ",), got ", jk::shape(v->sizes()));
  }
  TORCH_CHECK_VALUE(num_groups >= 1 && channels % num_groups == 0, "num_groups must divide conv_out's channels (",
                    std::to_string(conv_out.size(1)), "), got ", std::to_string(num_groups));
  if (const std::optional<int64_t> batch = conv_out.sym_size(0).maybe_as_int()) {
    TORCH_CHECK_VALUE(*batch * num_groups < (int64_t{1} << 31), "conv_out.size(0) * num_groups must be < 2^31, got ",
                      std::to_string(*batch * num_groups));
  }
  TORCH_CHECK_VALUE(std::isfinite(eps) && eps >= 0, "eps must be a finite number >= 0, got ", jk::num(eps));
  at::Tensor grad_z = at::empty_symint(conv_out.sym_sizes(), conv_out.options());
  if (conv_out.is_meta()) return {grad_z, at::empty_symint({3, channels}, gn_weight.options())};
  if (conv_out.numel() == 0) return {grad_z, at::zeros({3, conv_out.size(1)}, gn_weight.options())};
  const at::ScalarType acc = conv_out.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  // (3, C, B): partial_at's layout
  const at::Tensor partials = at::empty({3, conv_out.size(1), conv_out.size(0)}, conv_out.options().dtype(acc));
  const at::Tensor gc = grad.contiguous(), zc = conv_out.contiguous();
  const at::Tensor gamma = gn_weight.contiguous(), beta = gn_bias.contiguous();
#ifdef JK_WITH_CUDA
  if (conv_out.is_cuda()) {
    jk::TorchCudaLaunch launch(conv_out.device());
    gn_mish_backward_cuda(launch, grad_z, partials, gc, zc, gamma, beta, num_groups, eps);
  } else
#endif
  {
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, conv_out.scalar_type(), "gn_mish_backward_cpu", [&] {
      gn_mish_backward_cpu<scalar_t>(grad_z, partials, gc, zc, gamma, beta, num_groups, eps);
    });
  }
  return {grad_z, partials.sum(-1).to(gn_weight.scalar_type())};
}

// out = Mish(GroupNorm(Conv1d(x))), and with keep_conv the convolution's output z (bias added, in x's
// dtype) for the backward (conv1d_gn_mish_autograd, the twin that calls needing a gradient take; else z
// is undefined). Keeping z skips the one-launch CUDA path, whose convolution never leaves the chip.
std::tuple<at::Tensor, at::Tensor> conv1d_gn_mish_outputs(
    const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>& bias, const at::Tensor& gn_weight,
    const at::Tensor& gn_bias, int64_t num_groups, std::optional<int64_t> padding, double eps, bool keep_conv) {
  const int64_t pad = check_conv_args(x, weight, bias, gn_weight, gn_bias, num_groups, padding, eps);
  const c10::SymInt l_out = x.sym_size(2) + 2 * pad - weight.sym_size(2) + 1;
  at::Tensor out = at::empty_symint({x.sym_size(0), weight.sym_size(0), l_out}, x.options());
  if (x.is_meta() || out.numel() == 0) {
    return {out, keep_conv ? at::empty_symint(out.sym_sizes(), out.options()) : at::Tensor()};
  }
  const at::Tensor xc = x.contiguous(), wc = weight.contiguous();
  const at::Tensor gamma = gn_weight.contiguous(), beta = gn_bias.contiguous();
  const std::optional<at::Tensor> bc = bias.has_value() ? std::optional<at::Tensor>(bias->contiguous()) : std::nullopt;
#ifdef JK_WITH_CUDA
  if (x.is_cuda()) {
    // Small batch x length, K <= 7: the direct kernel, with GroupNorm + Mish in the same launch
    // where a group's blocks fit one cluster. Otherwise cuDNN (tensor cores) or the direct kernel, then one
    // fused GroupNorm + Mish kernel.
    jk::TorchCudaLaunch launch(x.device());
    const at::Tensor b = bc.value_or(at::Tensor());  // undefined without a bias
    if (!keep_conv && conv1d_gn_mish_direct_cuda(launch, out, xc, wc, b, gamma, beta, num_groups, pad, eps)) {
      return {out, at::Tensor()};
    }
    const at::ScalarType acc = x.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
    at::Tensor y = at::empty(out.sizes(), out.options().dtype(acc));
    at::Tensor bias_left;  // a bias the convolution left to the GroupNorm kernel (undefined: none)
    if (!conv1d_direct_cuda(launch, y, xc, wc, b, pad)) {
      // cuDNN would add the bias in a pass of its own over y: the GroupNorm kernel adds it as it reads y,
      // unless y is kept (z includes the bias)
      y = at::conv1d(xc, wc, keep_conv ? bc : std::nullopt, 1, pad).contiguous();
      if (!keep_conv) bias_left = b;
    }
    gn_mish_cuda(launch, out, y, bias_left, gamma, beta, num_groups, eps);
    // A half-type z is rounded where the forward's GroupNorm read the float32 y (the direct kernel's): the
    // backward's statistics are then those of z, as eager's are of its own rounded convolution output.
    return {out, keep_conv ? y.to(x.scalar_type()) : at::Tensor()};
  }
#endif
  // The CPU convolution runs in x's dtype, as eager's does (oneDNN accumulates bfloat16 in float32 and
  // rounds its output to it, as cuDNN does above), then one fused pass. Converting bfloat16 inputs to
  // float32 instead took 2.2-2.4 ms at B=8 256->512 L=16 against eager's 0.4-1.0 ms (2 cores, session
  // 21): allocating the 1.3 MB float32 weight each call made the float32 convolution itself 2.5x slower
  // (0.95 -> 2.4 ms; a clone of an unused tensor did the same), not the conversion (0.05 ms).
  // float16 (and bfloat16 where oneDNN has no bfloat16 path: jk::cpu_products_fast) the other way round:
  // PyTorch's own convolution is then far slower than in float32 (dev machine, AMD EPYC, torch 2.14, one
  // thread, float16: 39 ms at that shape against 1.9 ms in float32 with the conversions, 317 against 14 ms
  // at B=64), so these convolve in float32 and the fused pass reads the float32 result (as the CUDA
  // direct kernel's: no rounding in between).
  const bool in_float = !jk::cpu_products_fast(x.scalar_type());
  auto conv_input = [&](const at::Tensor& t) { return in_float ? t.to(at::kFloat) : t; };
  const std::optional<at::Tensor> b = bc.has_value() ? std::optional<at::Tensor>(conv_input(*bc)) : std::nullopt;
  const at::Tensor y = at::conv1d(conv_input(xc), conv_input(wc), b, 1, pad).contiguous();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "conv1d_gn_mish_cpu", [&] {
    if constexpr (jk::kReducedFloat<scalar_t>) {  // (float32 and float64 are never convolved in float32)
      if (in_float) return gn_mish_cpu<scalar_t, float>(out, y, gamma, beta, num_groups, eps);
    }
    gn_mish_cpu<scalar_t>(out, y, gamma, beta, num_groups, eps);
  });
  return {out, keep_conv ? y.to(x.scalar_type()) : at::Tensor()};
}

at::Tensor conv1d_gn_mish(const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                          const at::Tensor& gn_weight, const at::Tensor& gn_bias, int64_t num_groups,
                          std::optional<int64_t> padding, double eps) {
  return std::get<0>(conv1d_gn_mish_outputs(x, weight, bias, gn_weight, gn_bias, num_groups, padding, eps, false));
}

std::tuple<at::Tensor, at::Tensor> conv1d_gn_mish_keeping_conv(
    const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>& bias, const at::Tensor& gn_weight,
    const at::Tensor& gn_bias, int64_t num_groups, std::optional<int64_t> padding, double eps) {
  return conv1d_gn_mish_outputs(x, weight, bias, gn_weight, gn_bias, num_groups, padding, eps, true);
}

// ---------------------------------------------------------------- registration

JK_LIBRARY(m) {
  jk::def_not_differentiable(m, "ddpm_schedule(int num_train_timesteps=1000, str beta_schedule=\"linear\", float beta_start=0.0001, "
        "float beta_end=0.02) -> Tensor");
  jk::def_differentiable(m, "ddpm_step(Tensor model_output, Tensor t, Tensor sample, Tensor schedule, Tensor? noise=None, "
        "str prediction_type=\"epsilon\", bool clip_sample=True, float clip_sample_range=1.0, Generator? generator=None) -> Tensor",
        jk::draws_tags());
  jk::def_differentiable(m, "ddim_step(Tensor model_output, Tensor t, Tensor t_prev, Tensor sample, Tensor schedule, float eta=0.0, "
        "Tensor? noise=None, str prediction_type=\"epsilon\", bool clip_sample=True, float clip_sample_range=1.0, "
        "bool set_alpha_to_one=True, bool use_clipped_model_output=False, Generator? generator=None) -> Tensor",
        jk::draws_tags());
  jk::def_differentiable_saving(m, "conv1d_gn_mish(Tensor x, Tensor weight, Tensor? bias, Tensor gn_weight, Tensor gn_bias, "
        "int num_groups, int? padding=None, float eps=1e-05) -> Tensor", "Tensor conv_out");
  jk::def_not_differentiable(m, "gn_mish_backward(Tensor grad, Tensor conv_out, Tensor gn_weight, Tensor gn_bias, "
        "int num_groups, float eps=1e-05) -> (Tensor, Tensor)");
}

// The schedule is a small host-side table with no tensor inputs: one kernel for every backend.
JK_LIBRARY_IMPL(CompositeExplicitAutograd, m) { m.impl("ddpm_schedule", &ddpm_schedule); }

#define DIFFUSION_IMPLS(m)                                         \
  m.impl("ddpm_step", &ddpm_step);                                 \
  m.impl("ddim_step", &ddim_step);                                 \
  m.impl("conv1d_gn_mish", &conv1d_gn_mish);                       \
  m.impl("conv1d_gn_mish_autograd", &conv1d_gn_mish_keeping_conv); \
  m.impl("gn_mish_backward", &gn_mish_backward)

JK_LIBRARY_IMPL(CPU, m) { DIFFUSION_IMPLS(m); }
JK_LIBRARY_IMPL(Meta, m) { DIFFUSION_IMPLS(m); }
#ifdef JK_WITH_CUDA
JK_LIBRARY_IMPL(CUDA, m) { DIFFUSION_IMPLS(m); }
#endif

}  // namespace diffusion
