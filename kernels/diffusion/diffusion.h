// The math of the diffusion ops, shared by the CPU (diffusion.cpp) and CUDA (diffusion.cu,
// diffusion_conv.cu) kernels, and the CUDA launchers that diffusion.cpp calls.
#pragma once
#include <c10/macros/Macros.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#ifdef JK_WITH_CUDA
#include "cuda_launch.cuh"  // the launchers' jk::CudaTensor and jk::CudaLaunch (light: no tensor header)
#endif

namespace diffusion {

// Columns of the (T, kScheduleCols) float64 table made by ddpm_schedule (ops.py lists the names).
enum ScheduleCol : int {
  kBeta = 0,                  // beta_t
  kAlphaCumprod,              // abar_t = prod_{s<=t} (1 - beta_s)
  kSqrtAlphaCumprod,          // sqrt(abar_t)
  kSqrtOneMinusAlphaCumprod,  // sqrt(1 - abar_t)
  kRsqrtAlphaCumprod,         // 1 / sqrt(abar_t)
  kPosteriorCoefX0,           // sqrt(abar_{t-1}) * (1 - abar_t/abar_{t-1}) / (1 - abar_t)
  kPosteriorCoefXt,           // sqrt(abar_t/abar_{t-1}) * (1 - abar_{t-1}) / (1 - abar_t)
  kPosteriorStd,              // sqrt(max(beta~_t, 1e-20)) for t > 0, 0 at t = 0 ("fixed_small")
  kScheduleCols
};

// The DDPM posterior q(x_{t-1} | x_t, x0) = N(coef_x0 x0 + coef_xt x_t, std^2) ("fixed_small") from
// abar_t and abar_{t-1} (1 for the final step, t = 0, which adds no noise). ddpm_schedule fills its
// posterior columns with it and ddpm_step recomputes it from the alphas_cumprod column (as reference.py
// and diffusers do), so the two agree bit for bit on a ddpm_schedule table, and a sliced or strided table
// (S[5:], S[::10]) steps to its own previous row, its row 0 being the final step.
struct Posterior {
  double coef_x0, coef_xt, std;
};

C10_HOST_DEVICE inline Posterior ddpm_posterior(double abar, double abar_prev, bool final_step) {
  const double cur_alpha = abar / abar_prev, cur_beta = 1.0 - cur_alpha;
  const double variance = (1.0 - abar_prev) / (1.0 - abar) * cur_beta;
  return Posterior{sqrt(abar_prev) * cur_beta / (1.0 - abar), sqrt(cur_alpha) * (1.0 - abar_prev) / (1.0 - abar),
                   final_step ? 0.0 : sqrt(variance < 1e-20 ? 1e-20 : variance)};  // NaN stays NaN
}

enum Prediction : int { kEpsilon = 0, kVPrediction = 1, kSample = 2 };

// A timestep argument: one value from the host, or an int32/int64 tensor read per row
// (stride 0: one value for all rows, 1: one per row) on the device that runs the kernel.
struct TimeArg {
  const void* ptr;  // nullptr: use `value`
  bool is64;
  int64_t stride;
  int64_t value;

  C10_HOST_DEVICE int64_t at(int64_t row) const {
    if (ptr == nullptr) return value;
    return is64 ? static_cast<const int64_t*>(ptr)[row * stride] : static_cast<const int32_t*>(ptr)[row * stride];
  }
};

// One row's update is linear in its inputs (x = sample, m = model output, z = noise):
//   x0  = clip(x0_scale * (a_x * x + a_m * m))
//   out = p_x0 * x0 + p_x * x + p_m * m + p_z * z
// x0_scale is 1 / sqrt(abar_t) for an epsilon model, else 1: the reference divides (x - sqrt(1 - abar) m) by
// sqrt(abar), and folding 1 / sqrt(abar) into a_x and a_m overflowed float32 past abar ~ 1e-77 (linear betas to
// 0.4 over 1000 steps): inf * x - inf * m, NaN where the reference's infinite x0 is clipped to +-1.
// `valid` is false when the row's timestep is out of range or the table is not in ascending timestep order
// there (ascending_at): the row becomes NaN, never zeros.
// `absent` has a bit (1 << Term) for each term that the reference's formula does not have at all for
// this scheduler and prediction type (a coefficient that is structurally 0): step_element leaves those
// out, where a coefficient that merely comes out 0 (t = 0) multiplies as the reference does.
// 16-byte aligned, so the step kernels read a row's coefficients in 16-byte loads (2 for float).
// The terms some formula lacks (a_m * m and p_x0 * x0 are in every one, so they need no bit).
enum Term : int { kAX = 0, kPX, kPM, kPZ };

template <typename acc_t>
struct alignas(16) StepCoefs {
  acc_t a_x, a_m, x0_scale, p_x0, p_x, p_m, p_z;
  bool valid;
  uint8_t absent;
};

C10_HOST_DEVICE constexpr uint8_t term_bit(Term term) { return static_cast<uint8_t>(1u << term); }

// x0 = x0_scale * (a_x * x + a_m * m) for each prediction type, from sqrt(abar_t) and sqrt(1 - abar_t).
struct X0Coefs {
  double a_x, a_m, x0_scale;
};

C10_HOST_DEVICE inline X0Coefs x0_coefs(int prediction, double sa, double s1m) {
  if (prediction == kEpsilon) return {1.0, -s1m, 1.0 / sa};  // x0 = (x - sqrt(1-abar) m) / sqrt(abar)
  if (prediction == kVPrediction) return {sa, -s1m, 1.0};     // x0 = sqrt(abar) x - sqrt(1-abar) v
  return {0.0, 1.0, 1.0};                                     // the model predicts x0
}

template <typename acc_t>
C10_HOST_DEVICE inline StepCoefs<acc_t> cast_coefs(const X0Coefs& x0, double p_x0, double p_x, double p_m, double p_z,
                                                   uint8_t absent) {
  return StepCoefs<acc_t>{static_cast<acc_t>(x0.a_x), static_cast<acc_t>(x0.a_m), static_cast<acc_t>(x0.x0_scale),
                          static_cast<acc_t>(p_x0),   static_cast<acc_t>(p_x),    static_cast<acc_t>(p_m),
                          static_cast<acc_t>(p_z),    true,                       absent};
}

// The terms of x0 that a prediction type has no use for: the model that predicts x0 gives it alone.
C10_HOST_DEVICE inline uint8_t absent_x0_terms(int prediction) { return prediction == kSample ? term_bit(kAX) : 0; }

// DDPM (t -> t-1, diffusers DDPMScheduler.step with variance_type="fixed_small"): from rows t and t-1 of the
// table (t = 0: the final step, whatever the table's row 0 was before a slice).
struct DdpmCoefFn {
  const double* schedule;  // (T, kScheduleCols), contiguous
  int64_t num_timesteps;
  TimeArg t;
  int prediction;

  C10_HOST_DEVICE bool per_row() const { return t.ptr != nullptr && t.stride != 0; }

  // abar of row t - 1, for t in [0, T): 1 before row 0 (the final step).
  C10_HOST_DEVICE double abar_prev(int64_t ti) const {
    return ti > 0 ? schedule[(ti - 1) * kScheduleCols + kAlphaCumprod] : 1.0;
  }

  // For t in [0, T): whether abar falls from row t - 1 to row t, as it does in a table in ascending timestep
  // order. One in diffusers' descending `timesteps` order would step the wrong way.
  C10_HOST_DEVICE bool ascending_at(int64_t ti) const {
    return abar_prev(ti) >= schedule[ti * kScheduleCols + kAlphaCumprod];
  }

  template <typename acc_t>
  C10_HOST_DEVICE StepCoefs<acc_t> get(int64_t row) const {
    const int64_t ti = t.at(row);
    if (ti < 0 || ti >= num_timesteps || !ascending_at(ti)) return StepCoefs<acc_t>{0, 0, 0, 0, 0, 0, 0, false, 0};
    const double* r = schedule + ti * kScheduleCols;
    const Posterior post = ddpm_posterior(r[kAlphaCumprod], abar_prev(ti), ti == 0);
    const X0Coefs x0 = x0_coefs(prediction, r[kSqrtAlphaCumprod], r[kSqrtOneMinusAlphaCumprod]);
    return cast_coefs<acc_t>(x0, post.coef_x0, post.coef_xt, 0.0, post.std,
                             absent_x0_terms(prediction) | term_bit(kPM));  // the posterior mean has no m term
  }
};

// DDIM (t -> t_prev, diffusers DDIMScheduler.step); t_prev = -1 is the final step, whose abar is
// 1 (set_alpha_to_one) or abar_0.
struct DdimCoefFn {
  const double* schedule;
  int64_t num_timesteps;
  TimeArg t, t_prev;
  int prediction;
  double eta;
  bool alpha_to_one, clipped_model_output;

  C10_HOST_DEVICE bool per_row() const {
    return (t.ptr != nullptr && t.stride != 0) || (t_prev.ptr != nullptr && t_prev.stride != 0);
  }

  // abar of t_prev in [-1, t): the final step's is 1 (set_alpha_to_one) or row 0's.
  C10_HOST_DEVICE double abar_prev(int64_t tp) const {
    return tp >= 0 ? schedule[tp * kScheduleCols + kAlphaCumprod] : (alpha_to_one ? 1.0 : schedule[kAlphaCumprod]);
  }

  // As DdpmCoefFn::ascending_at: abar falls from t_prev to t in a table in ascending timestep order.
  C10_HOST_DEVICE bool ascending_at(int64_t ti, int64_t tp) const {
    return abar_prev(tp) >= schedule[ti * kScheduleCols + kAlphaCumprod];
  }

  template <typename acc_t>
  C10_HOST_DEVICE StepCoefs<acc_t> get(int64_t row) const {
    const int64_t ti = t.at(row), tp = t_prev.at(row);
    if (ti < 0 || ti >= num_timesteps || tp < -1 || tp >= ti || !ascending_at(ti, tp)) {
      return StepCoefs<acc_t>{0, 0, 0, 0, 0, 0, 0, false, 0};
    }
    const double at = schedule[ti * kScheduleCols + kAlphaCumprod];
    const double ap = abar_prev(tp);
    const double sa = schedule[ti * kScheduleCols + kSqrtAlphaCumprod];
    const double s1m = schedule[ti * kScheduleCols + kSqrtOneMinusAlphaCumprod];
    const X0Coefs x0 = x0_coefs(prediction, sa, s1m);
    const double variance = (1.0 - ap) / (1.0 - at) * (1.0 - at / ap);
    const double std_dev = eta * sqrt(variance);
    const double direction = sqrt(1.0 - ap - std_dev * std_dev);  // coefficient of the predicted epsilon
    const double sqrt_ap = sqrt(ap);
    const uint8_t no_noise = eta > 0 ? 0 : term_bit(kPZ);  // the formula adds noise only for eta > 0
    if (clipped_model_output) {  // eps = (x - sqrt(abar) x0_clipped) / sqrt(1 - abar)
      return cast_coefs<acc_t>(x0, sqrt_ap - direction * sa / s1m, direction / s1m, 0.0, std_dev,
                               absent_x0_terms(prediction) | term_bit(kPM) | no_noise);
    }
    double e_x, e_m;  // eps = e_x * x + e_m * m, from the unclipped x0
    if (prediction == kEpsilon) {
      e_x = 0.0;
      e_m = 1.0;
    } else if (prediction == kVPrediction) {  // eps = sqrt(abar) v + sqrt(1-abar) x
      e_x = s1m;
      e_m = sa;
    } else {  // eps = (x - sqrt(abar) x0) / sqrt(1-abar)
      e_x = 1.0 / s1m;
      e_m = -sa / s1m;
    }
    const uint8_t eps_without_x = prediction == kEpsilon ? term_bit(kPX) : 0;  // eps = m
    return cast_coefs<acc_t>(x0, sqrt_ap, direction * e_x, direction * e_m, std_dev,
                             absent_x0_terms(prediction) | eps_without_x | no_noise);
  }
};

// coef * v, or 0 for a term the reference's formula does not have: 0 * inf would turn an infinite input
// that the formula clips into NaN (and a NaN there would appear where the formula has none).
template <typename acc_t>
C10_HOST_DEVICE inline acc_t step_term(const StepCoefs<acc_t>& c, Term term, acc_t coef, acc_t v) {
  return (c.absent & term_bit(term)) ? acc_t(0) : coef * v;
}

// kNoiseFinite: the noise is drawn or 0, never inf or NaN, and an absent noise term has p_z = 0, so
// that term needs no select (each select costs the drawing GPU kernel time: it is not memory-bound).
template <bool kNoiseFinite = false, typename acc_t>
C10_HOST_DEVICE inline acc_t step_element(const StepCoefs<acc_t>& c, acc_t m, acc_t x, acc_t z, bool clip,
                                          acc_t range) {
  if (!c.valid) return std::numeric_limits<acc_t>::quiet_NaN();
  acc_t x0 = c.x0_scale * (step_term(c, kAX, c.a_x, x) + c.a_m * m);
  if (clip) x0 = x0 < -range ? -range : (x0 > range ? range : x0);  // NaN stays NaN, like torch.clamp
  const acc_t noise_term = kNoiseFinite ? c.p_z * z : step_term(c, kPZ, c.p_z, z);
  return c.p_x0 * x0 + step_term(c, kPX, c.p_x, x) + step_term(c, kPM, c.p_m, m) + noise_term;
}

// Mish from e = exp(min(h, 20)), one exponential instead of exp, log1p and tanh: tanh(log1p(e^h)) =
// n / (n + 2) with n = e^h (e^h + 2). Past h = 20 the ratio is 1 in float (and e^2h would overflow past
// 44); h = -inf gives NaN, as torch's Mish does. The float paths of both devices use it.
C10_HOST_DEVICE inline float mish_given_exp(float h, float e) {
  const float n = e * (e + 2.0f);
  return h * (n / (n + 2.0f));
}

// Mish's derivative tanh(sp) + h sech^2(sp) sigmoid(h), sp = softplus(h), from e = exp(min(h, clamp)): with
// n = e (e + 2) and d = n + 2, tanh(sp) = n / d, sech^2(sp) = 4 (n + 1) / d^2 (1 - tanh^2 would cancel where tanh
// is near 1) and sigmoid(h) = e / (1 + e), over one common denominator (one division), which still fits the type
// at the clamp (15 for float: d^2 (1 + e) ~ e^5; 40 for double). From the clamp on the derivative is 1 in the
// type (the formula with e held there would grow with h); NaN stays NaN.
template <typename acc_t>
C10_HOST_DEVICE constexpr acc_t mish_derivative_clamp() {
  return std::is_same_v<acc_t, double> ? acc_t(40) : acc_t(15);
}

template <typename acc_t>
C10_HOST_DEVICE inline acc_t mish_derivative_given_exp(acc_t h, acc_t e) {
  const acc_t n = e * (e + acc_t(2)), d = n + acc_t(2), one_e = acc_t(1) + e;
  return h >= mish_derivative_clamp<acc_t>() ? acc_t(1)
                                             : (n * d * one_e + acc_t(4) * h * (n + acc_t(1)) * e) / (d * d * one_e);
}

// Mish' in double, on both devices (float's exponential differs per device: diffusion.cpp, diffusion_conv.cu).
C10_HOST_DEVICE inline double mish_derivative(double h) {
  const double at = h < mish_derivative_clamp<double>() ? h : mish_derivative_clamp<double>();
#ifdef __CUDA_ARCH__
  return mish_derivative_given_exp(h, ::exp(at));
#else
  return mish_derivative_given_exp(h, std::exp(at));
#endif
}

// Where gn_mish_backward's partial sum j (0: dh * zn, 1: dh, 2: grad_z) of (channel, batch row b) lies in its
// (3, C, B) buffer: the batch innermost, so that one contiguous reduction sums it for all three.
C10_HOST_DEVICE inline int64_t partial_at(int64_t j, int64_t channel, int64_t b, int64_t channels, int64_t batch) {
  return (j * channels + channel) * batch + b;
}

// Mish(h) = h * tanh(softplus(h)), as torch computes it (double).
template <typename acc_t>
C10_HOST_DEVICE inline acc_t mish(acc_t h) {
#ifdef __CUDA_ARCH__
  return h * ::tanh(::log1p(::exp(h)));
#else
  return h * std::tanh(std::log1p(std::exp(h)));
#endif
}

#ifdef __CUDACC__
// Asks for the 32-byte sector holding p to be brought into L2 (no register waits for it).
__device__ __forceinline__ void prefetch_l2(const void* p) { asm volatile("prefetch.global.L2 [%0];" ::"l"(p)); }
#endif

#ifdef JK_WITH_CUDA
// diffusion.cu (steps) and diffusion_conv.cu (the rest), called with the op's jk::TorchCudaLaunch (diffusion.cpp).
// Arguments were checked by diffusion.cpp; tensors are contiguous, `out` is allocated and non-empty. `noise` may
// be undefined (absent); `draw`: draw z in the kernel (only when noise is absent).
void ddpm_step_cuda(jk::CudaLaunch& launch, const jk::CudaTensor& out, const jk::CudaTensor& model_output,
                    const jk::CudaTensor& sample, const jk::CudaTensor& noise, const DdpmCoefFn& fn, bool clip,
                    double range, bool draw);
void ddim_step_cuda(jk::CudaLaunch& launch, const jk::CudaTensor& out, const jk::CudaTensor& model_output,
                    const jk::CudaTensor& sample, const jk::CudaTensor& noise, const DdimCoefFn& fn, bool clip,
                    double range, bool draw);
// y = conv1d(x, weight, bias) (stride 1) into y, (B, C_out, L_out) in the accumulation type, by a direct
// kernel when batch x length is small; returns false, having done nothing, when cuDNN should convolve.
// `bias` may be undefined (absent), here and below.
bool conv1d_direct_cuda(jk::CudaLaunch& launch, const jk::CudaTensor& y, const jk::CudaTensor& x,
                        const jk::CudaTensor& weight, const jk::CudaTensor& bias, int64_t pad);
// out = Mish(GroupNorm(conv1d(x, weight, bias))) in one launch (the direct kernel, its blocks of one group
// a thread-block cluster); returns false, having done nothing, when this path does not apply.
bool conv1d_gn_mish_direct_cuda(jk::CudaLaunch& launch, const jk::CudaTensor& out, const jk::CudaTensor& x,
                                const jk::CudaTensor& weight, const jk::CudaTensor& bias,
                                const jk::CudaTensor& gn_weight, const jk::CudaTensor& gn_bias, int64_t groups,
                                int64_t pad, double eps);
// The backward of out = Mish(GroupNorm(z)) (gn_mish_backward): grad_z, and per (channel, batch row) the sums
// over the row's positions of dh * zn, dh and grad_z (partials (3, C, B) in the accumulation type: summed over
// B, gn_weight's, gn_bias's and a convolution bias's gradients). grad and z: (B, C, L), contiguous, of
// gn_weight's dtype.
void gn_mish_backward_cuda(jk::CudaLaunch& launch, const jk::CudaTensor& grad_z, const jk::CudaTensor& partials,
                           const jk::CudaTensor& grad, const jk::CudaTensor& z, const jk::CudaTensor& gn_weight,
                           const jk::CudaTensor& gn_bias, int64_t groups, double eps);
// out = Mish(GroupNorm(y + bias)) for a convolution result y of out's shape, in out's dtype or its
// accumulation type; bias (per channel, out's dtype) may be undefined.
void gn_mish_cuda(jk::CudaLaunch& launch, const jk::CudaTensor& out, const jk::CudaTensor& y,
                  const jk::CudaTensor& bias, const jk::CudaTensor& gn_weight, const jk::CudaTensor& gn_bias,
                  int64_t groups, double eps);
#endif

}  // namespace diffusion
