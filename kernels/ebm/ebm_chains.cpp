// Family `ebm`, C++ half: langevin_chain and hmc_chain. On the CPU each row's whole chain runs in one task
// (ebm_chains_cpu.cpp); on CUDA the one-launch kernels of ebm_langevin.cu and ebm_hmc.cu; wide rows, on any
// device, step by step through ATen ops and the energy and score ops (ebm.cpp). Schemas and registration: ebm.cpp.
#include <ATen/ops/addmm.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/rand.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/where.h>

#include <cmath>

#include "ebm_cpu.h"
#include "jk.h"
#include "philox_seeds.h"
#ifdef JK_WITH_CUDA
#include "cuda_host.h"
#endif

namespace ebm {

#ifdef JK_WITH_CUDA
// ebm_langevin.cu, ebm_hmc.cu: the one-launch chains, for contiguous tensors ebm_chains.cpp has checked.
void langevin_chain_cuda(jk::CudaLaunch& launch, const jk::CudaTensor& x, const jk::CudaTensor& out,
                         const jk::CudaTensor& traj, const ModelSpec& spec, const jk::CudaTensor& mean,
                         const jk::CudaTensor& precision, int64_t n_steps, const LangevinUpdate<double>& u,
                         int64_t thin);
void hmc_chain_cuda(jk::CudaLaunch& launch, const jk::CudaTensor& x, const jk::CudaTensor& out,
                    const jk::CudaTensor& accept_rate, const jk::CudaTensor& traj, const ModelSpec& spec,
                    const jk::CudaTensor& mean, const jk::CudaTensor& precision, int64_t n_steps, double step_size,
                    int64_t n_leapfrog, int64_t thin);
#endif

// ---------------------------------------------------------------- checks

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

// A row's random stream holds n_steps × D normals (Philox counters and the CPU's batches count them in 64 bits):
// n_steps = 2^63 - 1 overflowed the CPU chains' batch size and read past their normals' buffer (SIGSEGV; session
// 53's sanitizer review). Such a chain would never finish anyway. Checked where D is a number (not under fake tensors).
void check_chain_length(int64_t n_steps, int64_t D) {
  const int64_t most = (int64_t(1) << 60) / std::max<int64_t>(D, 1);
  TORCH_CHECK_VALUE(n_steps <= most, "n_steps must be at most 2^60 / D = ", std::to_string(most),
                    " for rows of D = ", std::to_string(D), " (n_steps x D normals a row), got ", std::to_string(n_steps));
}

// A chain's saved states: every thin-th of n_steps, (n_steps / thin, B, D); none when thin is 0.
at::Tensor empty_trajectory(const at::Tensor& x, int64_t n_steps, int64_t thin) {
  return at::empty_symint({thin > 0 ? n_steps / thin : 0, x.sym_size(0), x.sym_size(1)}, x.options());
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
  at::Tensor out = at::empty_symint(x.sym_sizes(), x.options());
  at::Tensor traj = empty_trajectory(x, n_steps, thin);
  if (x.is_meta()) return {out, traj};
  const int64_t B = x.size(0), D = x.size(1);
  check_chain_length(n_steps, D);
  if (B == 0) return {out, traj};
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
    jk::TorchCudaLaunch launch(x.device(), generator);
    langevin_chain_cuda(launch, xc, out, traj, spec, mc, pc, n_steps, u, thin);
    return {out, traj};
  }
#endif
  langevin_chain_cpu(xc, out, traj, spec, mc, pc, n_steps, u, thin, jk::cpu_philox_seed(generator));
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
    // log of 1 - u, in (0, 1]: at::rand gives an exact 0 (2^-24 a draw in float32), whose log, -inf, accepted any
    // proposal, however divergent (session 52's review: a row jumped to |x| ~ 2.7e3). 1 - u is exact here.
    const at::Tensor accept =
        at::rand({B}, generator, x.options()).neg_().add_(1).log_().lt(h0.sub(h1));  // NaN: rejected
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
  at::Tensor out = at::empty_symint(x.sym_sizes(), x.options());
  at::Tensor acc = at::empty_symint({x.sym_size(0)}, x.options());
  at::Tensor traj = empty_trajectory(x, n_steps, thin);
  if (x.is_meta()) return {out, acc, traj};
  const int64_t B = x.size(0), D = x.size(1);
  check_chain_length(n_steps, D);
  if (B == 0) return {out, acc, traj};
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
    jk::TorchCudaLaunch launch(x.device(), generator);
    hmc_chain_cuda(launch, xc, out, acc, traj, spec, mc, pc, n_steps, step_size, n_leapfrog, thin);
    return {out, acc, traj};
  }
#endif
  hmc_chain_cpu(xc, out, acc, traj, spec, mc, pc, n_steps, step_size, n_leapfrog, thin,
                jk::cpu_philox_seed(generator));
  return {out, acc, traj};
}

}  // namespace ebm
