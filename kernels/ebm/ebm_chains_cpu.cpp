// Family `ebm`, C++ half: the CPU chains of langevin_chain and hmc_chain (ebm_chains.cpp calls
// langevin_chain_cpu and hmc_chain_cpu, declared in ebm_cpu.h), each row's whole chain in one task
// (at::parallel_for), so a row's state stays in cache for all the steps. A file of its own, without jk.h
// (torch/library.h), so that g++ compiles these instantiations, most of ebm_chains.o's code, beside
// ebm_chains.cpp: on the 2-core dev machine (user+sys) ebm_chains.cpp took 12.6 s with them, 6.8 s without,
// and this file 8.5 s, 2.4 of them its headers (jk.h would add 2.7).
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "ebm_cpu.h"

namespace ebm {

// The CPU chains' random stream. Row r draws from Philox subsequence r: its normals, D a step and step after
// step, are the calls' words read in order (normal j = step·D + i is lane j % 4 of call j / 4). HMC's accept
// uniforms come from subsequence r + 2^63 (no row reaches it): step s's is lane s % 4 of call s / 4. So a chain's
// first n steps draw the same numbers whatever n_steps is (a shorter chain on the same seed is a prefix).
// Until session 47 each step took ceil(D / 4) calls of its own, so rows of D = 1 or 2 drew 4 or 2 times the
// normals they used (the CUDA kernels still do; the CPU and CUDA generators are separate streams anyway).
// Draws are made for a batch of steps at once, a multiple of 4 steps, so that a batch starts at a whole call.
struct ChainStream {
  jk::PhiloxSeed seed;
  int64_t D, n_steps;
  int64_t batch_steps() const {  // about kPhiloxBatchCpu calls' worth
    const int64_t steps = std::max<int64_t>(4, 4 * jk::kPhiloxBatchCpu / D / 4 * 4);
    return std::min(steps, (n_steps + 3) / 4 * 4);
  }
  // The normals of row r's steps [s0, s0 + steps), s0 a multiple of 4: steps·D of them, into z (room for
  // batch_steps()·D floats: whole calls).
  void normals(int64_t r, int64_t s0, int64_t steps, float* z) const {
    jk::normal4_batch_cpu(seed.seed, seed.offset / 4 + s0 * D / 4, (steps * D + 3) / 4, z, r);
  }
  static constexpr uint64_t kAcceptSubsequences = uint64_t(1) << 63;  // row r's accept uniforms: r + this
  // The accept words of row r's steps [s0, s0 + steps) into u (room for batch_steps() words).
  void accept_words(int64_t r, int64_t s0, int64_t steps, uint32_t* u) const {
    jk::philox_words_cpu(seed.seed, seed.offset / 4 + s0 / 4, (steps + 3) / 4, u, kAcceptSubsequences + r);
  }
};

// Rows of D up to this go kRowLanes at a time, transposed (HasLaneRows): a step is then a few vector
// operations for all the block's rows, where row by row it waited on one row's chain of dependent operations
// (D = 1: 3x slower than an eager loop, session 46). Wider rows go one at a time.
constexpr int64_t kLaneChainMaxD = 64;

// The models' maths out of line: one copy of each for both chains (inlined at each call, this file took twice as
// long to compile; a call per step costs nothing measurable).
template <typename Rows, typename T>
[[gnu::noinline]] void chain_lane_grads(const Rows& rows, const T* x, T* g, int64_t D) { rows.grads(x, g, D); }
template <typename Rows, typename T>
[[gnu::noinline]] void chain_lane_energies(const Rows& rows, const T* x, int64_t D, T* e) { rows.energies(x, D, e); }
template <typename Rows, typename T>
[[gnu::noinline]] void chain_row_grad(const Rows& rows, const T* x, T* g, int64_t D) { rows.grad(x, g, D); }
template <typename Rows, typename T>
[[gnu::noinline]] T chain_row_energy(const Rows& rows, const T* x, int64_t D) { return rows.energy(x, D); }

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
    const jk::PhiloxSeed seed = stream.seed;
    uint32_t words[4 * kLanes];
    float normals[4 * kLanes];
    const int64_t first_call = s0 * stream.D / 4;
    for (int64_t c = 0; c < (steps * stream.D + 3) / 4; ++c) {
      jk::philox_lanes_cpu<kLanes>(seed.seed, seed.offset / 4 + first_call + c, r0, words);
      jk::normal4_of_lane_words_cpu<kLanes>(words, normals);
      std::copy(normals, normals + 4 * kLanes, z.begin() + 4 * c * kLanes);  // (float to T)
    }
    if (u.empty()) return;
    for (int64_t c = 0; c < (steps + 3) / 4; ++c) {
      jk::philox_lanes_cpu<kLanes>(seed.seed, seed.offset / 4 + s0 / 4 + c, ChainStream::kAcceptSubsequences + r0,
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

// Langevin for wider rows, a row at a time.
template <typename T, typename Rows>
void langevin_rows_cpu(const Rows& rows, const T* x0, T* xo, T* traj, int64_t B, int64_t D, int64_t n_steps,
                       const LangevinUpdate<T>& upd, int64_t thin, const ChainStream& stream) {
  const int64_t batch_steps = stream.batch_steps();
  at::parallel_for(0, B, 1, [&](int64_t begin, int64_t end) {
    std::vector<T> x(D), g(D);
    std::vector<float> z(batch_steps * D);
    for (int64_t r = begin; r < end; ++r) {
      std::copy(x0 + r * D, x0 + (r + 1) * D, x.begin());
      for (int64_t step = 0; step < n_steps; ++step) {
        const int64_t k = step % batch_steps;  // this step's normals: z[k D, (k + 1) D)
        if (k == 0) stream.normals(r, step, std::min(batch_steps, n_steps - step), z.data());
        chain_row_grad(rows, x.data(), g.data(), D);
        const float* zk = z.data() + k * D;
        for (int64_t i = 0; i < D; ++i) x[i] = upd(x[i], g[i], T(zk[i]));
        if (thin > 0 && (step + 1) % thin == 0)
          std::copy(x.begin(), x.end(), traj + (((step + 1) / thin - 1) * B + r) * D);
      }
      std::copy(x.begin(), x.end(), xo + r * D);
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

// HMC for wider rows, a row at a time.
template <typename T, typename Rows>
void hmc_rows_cpu(const Rows& rows, const T* x_in, T* xo, T* acc, T* traj, int64_t B, int64_t D, int64_t n_steps,
                  T eps, int64_t n_leapfrog, int64_t thin, const ChainStream& stream) {
  const int64_t batch_steps = stream.batch_steps();
  at::parallel_for(0, B, 1, [&](int64_t begin, int64_t end) {
    std::vector<T> x(D), x0(D), p(D), g(D);
    std::vector<float> z(batch_steps * D);
    std::vector<uint32_t> words(batch_steps);
    for (int64_t r = begin; r < end; ++r) {
      std::copy(x_in + r * D, x_in + (r + 1) * D, x.begin());
      int64_t accepted = 0;
      for (int64_t step = 0; step < n_steps; ++step) {
        const int64_t k = step % batch_steps;  // this step's normals: z[k D, (k + 1) D); its accept word: words[k]
        if (k == 0) {
          const int64_t steps = std::min(batch_steps, n_steps - step);
          stream.normals(r, step, steps, z.data());
          stream.accept_words(r, step, steps, words.data());
        }
        const float* zk = z.data() + k * D;
        for (int64_t i = 0; i < D; ++i) p[i] = T(zk[i]);
        x0 = x;
        T h0 = chain_row_energy(rows, x.data(), D);
        for (int64_t i = 0; i < D; ++i) h0 += T(0.5) * p[i] * p[i];
        chain_row_grad(rows, x.data(), g.data(), D);
        for (int64_t i = 0; i < D; ++i) p[i] -= T(0.5) * eps * g[i];
        for (int64_t l = 0; l < n_leapfrog; ++l) {
          for (int64_t i = 0; i < D; ++i) x[i] += eps * p[i];
          chain_row_grad(rows, x.data(), g.data(), D);
          const T kick = l + 1 == n_leapfrog ? T(0.5) * eps : eps;
          for (int64_t i = 0; i < D; ++i) p[i] -= kick * g[i];
        }
        T h1 = chain_row_energy(rows, x.data(), D);
        for (int64_t i = 0; i < D; ++i) h1 += T(0.5) * p[i] * p[i];
        if (std::log(T(jk::uniform_open0(words[k]))) < h0 - h1) {  // false when h1 is NaN or inf: rejected
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

void langevin_chain_cpu(const at::Tensor& x, const at::Tensor& out, const at::Tensor& traj, const ModelSpec& spec,
                        const at::Tensor& mean, const at::Tensor& precision, int64_t n_steps,
                        const LangevinUpdate<double>& u, int64_t thin, jk::PhiloxSeed seed) {
  const int64_t B = x.size(0), D = x.size(1);
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "ebm_langevin_chain_cpu", [&] {
    using T = scalar_t;
    const LangevinUpdate<T> upd{T(u.a), T(u.tau), T(u.lo), T(u.hi), u.clamp};
    const ChainStream stream{seed, D, n_steps};
    with_rows<T>(spec, mean, precision, D, [&](const auto& rows) {
      const auto run = [&](auto chain) {
        chain(rows, x.const_data_ptr<T>(), out.mutable_data_ptr<T>(), traj.mutable_data_ptr<T>(), B, D, n_steps, upd,
              thin, stream);
      };
      using Rows = std::decay_t<decltype(rows)>;
      if (D <= kLaneChainMaxD) {
        run(langevin_lanes_cpu<T, Rows>);
      } else {
        run(langevin_rows_cpu<T, Rows>);
      }
    });
  });
}

void hmc_chain_cpu(const at::Tensor& x, const at::Tensor& out, const at::Tensor& accept_rate, const at::Tensor& traj,
                   const ModelSpec& spec, const at::Tensor& mean, const at::Tensor& precision, int64_t n_steps,
                   double step_size, int64_t n_leapfrog, int64_t thin, jk::PhiloxSeed seed) {
  const int64_t B = x.size(0), D = x.size(1);
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "ebm_hmc_chain_cpu", [&] {
    using T = scalar_t;
    const ChainStream stream{seed, D, n_steps};
    with_rows<T>(spec, mean, precision, D, [&](const auto& rows) {
      const auto run = [&](auto chain) {
        chain(rows, x.const_data_ptr<T>(), out.mutable_data_ptr<T>(), accept_rate.mutable_data_ptr<T>(),
              traj.mutable_data_ptr<T>(), B, D, n_steps, T(step_size), n_leapfrog, thin, stream);
      };
      using Rows = std::decay_t<decltype(rows)>;
      if (D <= kLaneChainMaxD) {
        run(hmc_lanes_cpu<T, Rows>);
      } else {
        run(hmc_rows_cpu<T, Rows>);
      }
    });
  });
}

}  // namespace ebm
