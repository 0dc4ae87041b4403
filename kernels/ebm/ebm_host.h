// Host-side pieces shared by ebm.cpp and ebm.cu: argument checks (defined in
// ebm.cpp) and the thin per-model op wrappers, so each backend only supplies
// "energy or score of model `kind` with parameters p".
#pragma once
#include <ATen/core/Tensor.h>

#include <array>
#include <optional>
#include <string>

#include "ebm.h"
#include "jk.h"

namespace ebm {

void check_rows(const at::Tensor& x, int64_t min_cols);
void check_gaussian_args(const at::Tensor& x, const at::Tensor& mean, const at::Tensor& precision);
void check_step_args(const at::Tensor& x, const at::Tensor& grad, double step_size, double noise_scale,
                     std::optional<double> clamp_min, std::optional<double> clamp_max);
ModelSpec parse_model(const at::Tensor& x, const std::string& model, const std::optional<at::Tensor>& mean,
                      const std::optional<at::Tensor>& precision, at::ArrayRef<double> params);
void check_chain_args(const at::Tensor& x, int64_t n_steps, double step_size, int64_t thin);
int64_t n_saved(int64_t n_steps, int64_t thin);
at::Tensor gaussian_matmul(const at::Tensor& x, const at::Tensor& mean, const at::Tensor& precision, bool energy);

constexpr int64_t kGaussianSmallD = 64;  // wider Gaussian rows go through a matrix product

// Energy (score = false) or score of a non-Gaussian model for one backend.
using LocalImpl = at::Tensor (*)(const at::Tensor& x, Model kind, std::array<double, 3> p, bool score);

template <LocalImpl F, bool kScore>
at::Tensor double_well_op(const at::Tensor& x, double barrier_height, double b) {
  jk::check_finite(barrier_height, "barrier_height");
  jk::check_finite(b, "b");
  return F(x, Model::DoubleWell, {barrier_height, b, 0.0}, kScore);
}

template <LocalImpl F, bool kScore>
at::Tensor harmonic_op(const at::Tensor& x, double k) {
  jk::check_finite(k, "k");
  return F(x, Model::Harmonic, {k, 0.0, 0.0}, kScore);
}

template <LocalImpl F, bool kScore>
at::Tensor rosenbrock_op(const at::Tensor& x, double a, double b) {
  jk::check_finite(a, "a");
  jk::check_finite(b, "b");
  return F(x, Model::Rosenbrock, {a, b, 0.0}, kScore);
}

template <LocalImpl F, bool kScore>
at::Tensor rastrigin_op(const at::Tensor& x, double a) {
  jk::check_finite(a, "a");
  return F(x, Model::Rastrigin, {a, 0.0, 0.0}, kScore);
}

template <LocalImpl F, bool kScore>
at::Tensor ackley_op(const at::Tensor& x, double a, double b, double c) {
  jk::check_finite(a, "a");
  jk::check_finite(b, "b");
  jk::check_finite(c, "c");
  return F(x, Model::Ackley, {a, b, c}, kScore);
}

// Registers the ten non-Gaussian energy/score ops of one backend.
#define EBM_IMPL_LOCAL_OPS(m, backend)                                        \
  m.impl("double_well_energy", &ebm::double_well_op<backend, false>);         \
  m.impl("double_well_score", &ebm::double_well_op<backend, true>);           \
  m.impl("harmonic_energy", &ebm::harmonic_op<backend, false>);               \
  m.impl("harmonic_score", &ebm::harmonic_op<backend, true>);                 \
  m.impl("rosenbrock_energy", &ebm::rosenbrock_op<backend, false>);           \
  m.impl("rosenbrock_score", &ebm::rosenbrock_op<backend, true>);             \
  m.impl("rastrigin_energy", &ebm::rastrigin_op<backend, false>);             \
  m.impl("rastrigin_score", &ebm::rastrigin_op<backend, true>);               \
  m.impl("ackley_energy", &ebm::ackley_op<backend, false>);                   \
  m.impl("ackley_score", &ebm::ackley_op<backend, true>)

}  // namespace ebm
