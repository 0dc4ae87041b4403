// Family `ebm`, C++ half: the CPU chains of rows of D <= kLaneChainMaxD (ebm_chains_cpu.cpp hands them over), a
// block of kRowLanes rows at a time in vector lanes (see ebm_cpu.h).
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "ebm_cpu.h"

namespace ebm {

// The models' maths out of line: one copy of each for both chains (inlined at each call, the file took twice as
// long to compile; a call per step costs nothing measurable).
template <typename Rows, typename T>
[[gnu::noinline]] void chain_lane_grads(const Rows& rows, const T* x, T* g, int64_t D) { rows.grads(x, g, D); }
template <typename Rows, typename T>
[[gnu::noinline]] void chain_lane_energies(const Rows& rows, const T* x, int64_t D, T* e) { rows.energies(x, D, e); }

// A block of kLanes rows to lanes (element i of row l at i·kLanes + l; lanes past `rows` are zero) and back.
template <int64_t kLanes, typename T>
void chain_rows_to_lanes(const T* x, int64_t rows, int64_t D, T* lanes) {
  std::fill(lanes, lanes + D * kLanes, T(0));
  for (int64_t l = 0; l < rows; ++l)
    for (int64_t i = 0; i < D; ++i) lanes[i * kLanes + l] = x[l * D + i];
}
template <int64_t kLanes, typename T>
void chain_lanes_to_rows(const T* lanes, int64_t rows, int64_t D, T* x) {
  for (int64_t l = 0; l < rows; ++l)
    for (int64_t i = 0; i < D; ++i) x[l * D + i] = lanes[i * kLanes + l];
}

// A block's draws for a batch of steps, in the lanes' shape: normal i of step k of lane l at (k·D + i)·kLanes + l
// and, for HMC, the accept uniform of step k of lane l at k·kLanes + l. The block's rows make each Philox call
// side by side (philox_lanes_cpu), so the draws come out in that shape: drawn row by row and transposed, they
// cost D = 16 chains a third more time.
template <int64_t kLanes, typename T>
struct LaneDraws {
  const ChainStream& stream;
  std::vector<T> z, u;
  LaneDraws(const ChainStream& s, bool accept)
      : stream(s), z(s.batch_steps() * s.D * kLanes), u(accept ? s.batch_steps() * kLanes : 0) {}
  void draw(int64_t r0, int64_t s0, int64_t steps) {
    const uint64_t seed = stream.seed.seed;
    uint32_t words[4 * kLanes];
    float normals[4 * kLanes];
    for (int64_t c = 0; c < stream.normal_calls(steps); ++c) {
      jk::philox_lanes_cpu<kLanes>(seed, stream.first_normal_call(s0) + c, r0, words);
      jk::normal4_of_lane_words_cpu<kLanes>(words, normals);
      std::copy(normals, normals + 4 * kLanes, z.begin() + 4 * c * kLanes);  // (float to T)
    }
    if (u.empty()) return;
    for (int64_t c = 0; c < ChainStream::accept_calls(steps); ++c) {
      jk::philox_lanes_cpu<kLanes>(seed, stream.first_accept_call(s0) + c, kAcceptSubsequences + r0,
                                   words);
      for (int64_t k = 0; k < 4 * kLanes; ++k) u[4 * c * kLanes + k] = T(jk::uniform_open0(words[k]));
    }
  }
};

// Langevin: x ← x − η∇E(x) + τε for n_steps, kRowLanes rows at a time.
template <typename T, typename Rows>
void langevin_lanes_cpu(const Rows& rows, const T* x0, T* xo, T* traj, int64_t B, int64_t D, int64_t n_steps,
                        const LangevinUpdate<T>& upd, int64_t thin, const ChainStream& stream) {
  constexpr int64_t kLanes = Rows::kRowLanes;
  const int64_t batch_steps = stream.batch_steps();
  at::parallel_for(0, (B + kLanes - 1) / kLanes, 1, [&](int64_t block0, int64_t block1) {
    std::vector<T> x(D * kLanes), g(D * kLanes);
    LaneDraws<kLanes, T> draws(stream, false);
    for (int64_t block = block0; block < block1; ++block) {
      const int64_t r0 = block * kLanes, n_rows = std::min(kLanes, B - r0);
      chain_rows_to_lanes<kLanes>(x0 + r0 * D, n_rows, D, x.data());
      for (int64_t step = 0; step < n_steps; ++step) {
        const int64_t k = step % batch_steps;
        if (k == 0) draws.draw(r0, step, std::min(batch_steps, n_steps - step));
        chain_lane_grads(rows, x.data(), g.data(), D);
        const T* zk = draws.z.data() + k * D * kLanes;
        for (int64_t j = 0; j < D * kLanes; ++j) x[j] = upd(x[j], g[j], zk[j]);
        if (thin > 0 && (step + 1) % thin == 0)
          chain_lanes_to_rows<kLanes>(x.data(), n_rows, D, traj + (((step + 1) / thin - 1) * B + r0) * D);
      }
      chain_lanes_to_rows<kLanes>(x.data(), n_rows, D, xo + r0 * D);
    }
  });
}

// HMC: momentum p ~ N(0, I), n_leapfrog leapfrog steps of size ε, Metropolis accept on H = E(x) + ½|p|²,
// kRowLanes rows at a time.
template <typename T, typename Rows>
void hmc_lanes_cpu(const Rows& rows, const T* x_in, T* xo, T* acc, T* traj, int64_t B, int64_t D, int64_t n_steps,
                   T eps, int64_t n_leapfrog, int64_t thin, const ChainStream& stream) {
  constexpr int64_t kLanes = Rows::kRowLanes;
  const int64_t batch_steps = stream.batch_steps();
  at::parallel_for(0, (B + kLanes - 1) / kLanes, 1, [&](int64_t block0, int64_t block1) {
    std::vector<T> x(D * kLanes), x0(D * kLanes), p(D * kLanes), g(D * kLanes);
    LaneDraws<kLanes, T> draws(stream, true);
    for (int64_t block = block0; block < block1; ++block) {
      const int64_t r0 = block * kLanes, n_rows = std::min(kLanes, B - r0);
      chain_rows_to_lanes<kLanes>(x_in + r0 * D, n_rows, D, x.data());
      int64_t accepted[kLanes] = {};
      for (int64_t step = 0; step < n_steps; ++step) {
        const int64_t k = step % batch_steps;
        if (k == 0) draws.draw(r0, step, std::min(batch_steps, n_steps - step));
        std::copy(draws.z.begin() + k * D * kLanes, draws.z.begin() + (k + 1) * D * kLanes, p.begin());
        x0 = x;
        T h0[kLanes], h1[kLanes];
        chain_lane_energies(rows, x.data(), D, h0);
        for (int64_t i = 0; i < D; ++i)
          for (int64_t l = 0; l < kLanes; ++l) h0[l] += T(0.5) * p[i * kLanes + l] * p[i * kLanes + l];
        chain_lane_grads(rows, x.data(), g.data(), D);
        for (int64_t j = 0; j < D * kLanes; ++j) p[j] -= T(0.5) * eps * g[j];
        for (int64_t l = 0; l < n_leapfrog; ++l) {
          for (int64_t j = 0; j < D * kLanes; ++j) x[j] += eps * p[j];
          chain_lane_grads(rows, x.data(), g.data(), D);
          const T kick = l + 1 == n_leapfrog ? T(0.5) * eps : eps;
          for (int64_t j = 0; j < D * kLanes; ++j) p[j] -= kick * g[j];
        }
        chain_lane_energies(rows, x.data(), D, h1);
        for (int64_t i = 0; i < D; ++i)
          for (int64_t l = 0; l < kLanes; ++l) h1[l] += T(0.5) * p[i * kLanes + l] * p[i * kLanes + l];
        const T* u = draws.u.data() + k * kLanes;
        for (int64_t l = 0; l < kLanes; ++l) {
          if (std::log(u[l]) < h0[l] - h1[l]) {  // false when h1 is NaN or inf: rejected
            ++accepted[l];
          } else {
            for (int64_t i = 0; i < D; ++i) x[i * kLanes + l] = x0[i * kLanes + l];
          }
        }
        if (thin > 0 && (step + 1) % thin == 0)
          chain_lanes_to_rows<kLanes>(x.data(), n_rows, D, traj + (((step + 1) / thin - 1) * B + r0) * D);
      }
      chain_lanes_to_rows<kLanes>(x.data(), n_rows, D, xo + r0 * D);
      for (int64_t l = 0; l < n_rows; ++l) acc[r0 + l] = n_steps > 0 ? T(accepted[l]) / T(n_steps) : T(0);
    }
  });
}

void langevin_chain_lanes_cpu(const at::Tensor& x, const at::Tensor& out, const at::Tensor& traj, const ModelSpec& spec,
                              const at::Tensor& mean, const at::Tensor& precision, int64_t n_steps,
                              const LangevinUpdate<double>& u, int64_t thin, jk::PhiloxSeed seed) {
  const int64_t B = x.size(0), D = x.size(1);
  with_chain_rows<true>(x, spec, mean, precision, [&](const auto& rows, auto zero) {
    using T = decltype(zero);
    langevin_lanes_cpu<T>(rows, x.const_data_ptr<T>(), out.mutable_data_ptr<T>(), traj.mutable_data_ptr<T>(), B, D,
                          n_steps, update_in<T>(u), thin, ChainStream{seed, D, n_steps});
  });
}

void hmc_chain_lanes_cpu(const at::Tensor& x, const at::Tensor& out, const at::Tensor& accept_rate,
                         const at::Tensor& traj, const ModelSpec& spec, const at::Tensor& mean,
                         const at::Tensor& precision, int64_t n_steps, double step_size, int64_t n_leapfrog,
                         int64_t thin, jk::PhiloxSeed seed) {
  const int64_t B = x.size(0), D = x.size(1);
  with_chain_rows<true>(x, spec, mean, precision, [&](const auto& rows, auto zero) {
    using T = decltype(zero);
    hmc_lanes_cpu<T>(rows, x.const_data_ptr<T>(), out.mutable_data_ptr<T>(), accept_rate.mutable_data_ptr<T>(),
                     traj.mutable_data_ptr<T>(), B, D, n_steps, T(step_size), n_leapfrog, thin,
                     ChainStream{seed, D, n_steps});
  });
}

}  // namespace ebm
