// Family `ebm`: op schemas and registration, the energy, score and Langevin-step ops, and the Langevin step's
// CPU loop (the chains are in ebm_chains.cpp, the energies' and scores' CPU loops in ebm_rows_cpu.cpp; what
// the files share, in ebm_cpu.h).
// Each op is one function registered for CPU, CUDA and Meta: it checks its arguments,
// allocates the outputs and stops there on the Meta device (fake tensors), then runs the
// CPU loop or the CUDA launcher (ebm.cu). The parts made of ATen ops (wide Gaussian rows
// through a matrix product) live here too and serve every device, so ebm.cu holds only
// custom kernels (and its cold nvcc time stays low).
#include <ATen/Dispatch.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/matmul.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>

#include "cpu_loops.h"
#include "ebm_cpu.h"
#include "jk.h"
#include "philox_seeds.h"
#ifdef JK_WITH_CUDA
#include "cuda_host.h"
#endif

namespace ebm {

#ifdef JK_WITH_CUDA
// ebm.cu, ebm_local.cu: launchers for contiguous tensors that ebm.cpp has checked and allocated.
void local_rows_cuda(jk::CudaLaunch& launch, const jk::CudaTensor& x, const jk::CudaTensor& out, const ModelSpec& spec,
                     bool score);
void gaussian_rows_cuda(jk::CudaLaunch& launch, const jk::CudaTensor& x, const jk::CudaTensor& mean,
                        const jk::CudaTensor& precision, const jk::CudaTensor& out, bool score);
void langevin_update_cuda(jk::CudaLaunch& launch, const jk::CudaTensor& x, const jk::CudaTensor& g,
                          const jk::CudaTensor& out, const jk::CudaTensor& traj, const LangevinUpdate<double>& u);
#endif

// ---------------------------------------------------------------- checks

// x is a (B, D) batch of floating rows with D >= min_cols.
void check_rows(const at::Tensor& x, int64_t min_cols) {
  jk::check_float(x, "x");
  jk::check_dim(x, "x", 2);
  TORCH_CHECK_VALUE(x.sym_size(1) >= min_cols, "x must have at least ", std::to_string(min_cols),
                    " column(s) (D), got shape ", jk::shape(x.sizes()));
  // The CUDA kernels index within a row in 32 bits (a row of 2^31 elements read nothing: energy 0). 64-bit
  // row indices cost the local models' lane-group kernel 11-20% on ordinary rows (session 42 call 5), so
  // rows this wide are refused instead, on every device alike.
  TORCH_CHECK_VALUE(x.sym_size(1) <= kMaxRowWidth, "x must have at most ", std::to_string(kMaxRowWidth),
                    " columns (D; the CUDA kernels index a row in 32 bits), got shape ", jk::shape(x.sizes()));
}

void check_gaussian_args(const at::Tensor& x, const at::Tensor& mean, const at::Tensor& precision) {
  check_rows(x, 1);
  const c10::SymInt D = x.sym_size(1);  // symbolic under fake tensors: int sizes only in the failure messages
  jk::check_same_device(x, "x", mean, "mean");
  jk::check_same_device(x, "x", precision, "precision");
  jk::check_same_dtype(x, "x", mean, "mean");
  jk::check_same_dtype(x, "x", precision, "precision");
  TORCH_CHECK_VALUE(mean.dim() == 1 && mean.sym_size(0) == D, "mean must have shape (D,) = (",
                    std::to_string(x.size(1)), ",) to match x of shape ", jk::shape(x.sizes()), ", got ",
                    jk::shape(mean.sizes()));
  TORCH_CHECK_VALUE(precision.dim() == 2 && precision.sym_size(0) == D && precision.sym_size(1) == D,
                    "precision must have shape (D, D) = (", std::to_string(x.size(1)), ", ",
                    std::to_string(x.size(1)), ") to match x of shape ", jk::shape(x.sizes()), ", got ",
                    jk::shape(precision.sizes()));
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

LangevinUpdate<double> make_update(double a, double tau, std::optional<double> clamp_min,
                                   std::optional<double> clamp_max) {
  const double inf = std::numeric_limits<double>::infinity();
  return {a, tau, clamp_min.value_or(-inf), clamp_max.value_or(inf), clamp_min.has_value() || clamp_max.has_value()};
}

// ---------------------------------------------------------------- the Gaussian for large D (any device)

// Large D (and the CPU in float32/float64) goes through a matrix product whose alpha carries the ½:
// score = (μ − x)·½(P + Pᵀ), energy = Σ (x − μ)·[(x − μ)·½P] (a quadratic form needs no symmetric P).
// Four launches for the energy and three for the score; the reference takes five and four (session 53's
// sweep: the energy's seven, symmetrizing P first, were 19% behind eager at B=1024, D=1000 float32).
at::Tensor gaussian_matmul(const at::Tensor& x, const at::Tensor& mean, const at::Tensor& precision, bool energy) {
  // Where PyTorch's CPU matrix product is slow in x's dtype (float16; bfloat16 without oneDNN's path:
  // jk::cpu_products_fast), rows take the float32 route and are rounded once at the end (dev machine, AMD
  // EPYC, torch 2.14: 4096x256 @ 256x256 took 174 ms in float16 against 4.2 in float32).
  if (x.is_cpu() && !jk::cpu_products_fast(x.scalar_type())) {
    const at::Tensor result =
        gaussian_matmul(x.to(at::kFloat), mean.to(at::kFloat), precision.to(at::kFloat), energy);
    return result.to(x.scalar_type());
  }
  const at::Tensor diff = energy ? x.sub(mean) : mean.sub(x);
  // beta = 0: the product's uninitialised buffer is not read (BLAS and cuBLAS take C as output only)
  at::Tensor half_product = at::empty(diff.sizes(), diff.options());
  half_product.addmm_(diff, energy ? precision : precision.add(precision.t()), /*beta=*/0, /*alpha=*/0.5);
  if (!energy) return half_product;
  return diff.mul_(half_product).sum(1);  // 16-bit rows: the sum accumulates in float32 and rounds once
}

// The output of an energy, (B,), or of a score, (B, D), for rows x (B, D).
at::Tensor empty_rows_output(const at::Tensor& x, bool score) {
  return score ? at::empty_symint(x.sym_sizes(), x.options()) : at::empty_symint({x.sym_size(0)}, x.options());
}

// Energy (out (B,)) or score (out (B, D)) of a local model, for contiguous x on any device.
void local_rows(const at::Tensor& x, const at::Tensor& out, const ModelSpec& spec, bool score) {
  if (x.size(0) == 0) return;
#ifdef JK_WITH_CUDA
  if (x.is_cuda()) {
    jk::TorchCudaLaunch launch(x.device());
    local_rows_cuda(launch, x, out, spec, score);
    return;
  }
#endif
  local_rows_cpu(x, out, spec, score);
}

at::Tensor local_op(const at::Tensor& x, const ModelSpec& spec, bool score) {
  check_rows(x, spec.kind == Model::Rosenbrock ? 2 : 1);
  at::Tensor out = empty_rows_output(x, score);
  if (x.is_meta()) return out;
  local_rows(x.contiguous(), out, spec, score);
  return out;
}

at::Tensor gaussian_op(const at::Tensor& x, const at::Tensor& mean, const at::Tensor& precision, bool score) {
  check_gaussian_args(x, mean, precision);
  // Every route below gives these shapes: Meta returns before the route is chosen, so D stays free (comparing a
  // symbolic D with max_d guarded it: torch.compile compiled again past D = 64, torch.export capped D at 64).
  if (x.is_meta()) return empty_rows_output(x, score);
  const int64_t D = x.size(1);
  const int64_t max_d = x.is_cuda() ? cuda_gaussian_max_d(x.scalar_type() == at::kDouble) : kCpuGaussianMaxD;
  // On the CPU, float64 rows and float32 rows wider than kCpuFloatRowsMaxD go through BLAS. The row loops,
  // 8 rows at a time (GaussRows' lane-wise path), against BLAS on 2 cores (B = 32768, float32): D = 16
  // score 160 against 170-1360 µs (a skinny product that BLAS runs slowly, and unevenly), D = 48 about even,
  // D = 64 2.3 against 1.8 ms; float64 rows (lane vectors of 8 doubles, two AVX registers) 2.6-3.5x slower.
  const bool cpu_blas = x.is_cpu() && (x.scalar_type() == at::kDouble ||
                                       (x.scalar_type() == at::kFloat && D > kCpuFloatRowsMaxD));
  if (D > max_d || cpu_blas) return gaussian_matmul(x, mean, precision, !score);  // ATen ops
  at::Tensor out = empty_rows_output(x, score);
  if (x.size(0) == 0) return out;
  const at::Tensor xc = x.contiguous(), mc = mean.contiguous(), pc = precision.contiguous();
#ifdef JK_WITH_CUDA
  if (x.is_cuda()) {
    jk::TorchCudaLaunch launch(x.device());
    gaussian_rows_cuda(launch, xc, mc, pc, out, score);
    return out;
  }
#endif
  gaussian_rows_cpu(xc, mc, pc, out, score);
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
    jk::TorchCudaLaunch launch(x.device(), generator);
    langevin_update_cuda(launch, x, g, out, traj, u);
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
  at::Tensor out = at::empty_symint(x.sym_sizes(), x.options());
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
        "float? clamp_max=None, Generator? generator=None) -> Tensor", jk::draws_tags());
  jk::def_in_place(m, "langevin_step_(Tensor(a!) x, Tensor grad, float step_size, float noise_scale=1.0, "
        "float? clamp_min=None, float? clamp_max=None, Generator? generator=None) -> ()", jk::draws_tags());
  jk::def_not_differentiable(m, "langevin_chain(Tensor x, str model, Tensor? mean, Tensor? precision, float[] params, int n_steps, "
        "float step_size, float noise_scale=1.0, int thin=0, float? clamp_min=None, float? clamp_max=None, "
        "Generator? generator=None) -> (Tensor, Tensor)", jk::draws_tags());
  jk::def_not_differentiable(m, "hmc_chain(Tensor x, str model, Tensor? mean, Tensor? precision, float[] params, int n_steps, "
        "float step_size, int n_leapfrog, int thin=0, Generator? generator=None) -> (Tensor, Tensor, Tensor)", jk::draws_tags());
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
