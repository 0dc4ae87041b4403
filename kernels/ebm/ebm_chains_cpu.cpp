// Family `ebm`, C++ half: the CPU chains of langevin_chain and hmc_chain (ebm_chains.cpp calls
// langevin_chain_cpu and hmc_chain_cpu, declared in ebm_cpu.h) for rows wider than kLaneChainMaxD, a row at a
// time: each row's whole chain in one task (at::parallel_for), so a row's state stays in cache for all the
// steps. Narrower rows go to ebm_chain_lanes_cpu.cpp. Files of their own, without jk.h (torch/library.h), so
// that g++ compiles these instantiations, most of ebm_chains.o's code, beside ebm_chains.cpp: on the 2-core dev
// machine (user+sys) ebm_chains.cpp took 12.6 s with them, 6.8 s without (jk.h would add 2.7 s to each file).
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
[[gnu::noinline]] void chain_row_grad(const Rows& rows, const T* x, T* g, int64_t D) { rows.grad(x, g, D); }
template <typename Rows, typename T>
[[gnu::noinline]] T chain_row_energy(const Rows& rows, const T* x, int64_t D) { return rows.energy(x, D); }

// Langevin: x ← x − η∇E(x) + τε for n_steps, a row at a time.
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
// a row at a time.
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

void langevin_chain_cpu(const at::Tensor& x, const at::Tensor& out, const at::Tensor& traj, const ModelSpec& spec,
                        const at::Tensor& mean, const at::Tensor& precision, int64_t n_steps,
                        const LangevinUpdate<double>& u, int64_t thin, jk::PhiloxSeed seed) {
  const int64_t B = x.size(0), D = x.size(1);
  if (D <= kLaneChainMaxD) return langevin_chain_lanes_cpu(x, out, traj, spec, mean, precision, n_steps, u, thin, seed);
  with_chain_rows<false>(x, spec, mean, precision, [&](const auto& rows, auto zero) {
    using T = decltype(zero);
    langevin_rows_cpu<T>(rows, x.const_data_ptr<T>(), out.mutable_data_ptr<T>(), traj.mutable_data_ptr<T>(), B, D,
                         n_steps, update_in<T>(u), thin, ChainStream{seed, D, n_steps});
  });
}

void hmc_chain_cpu(const at::Tensor& x, const at::Tensor& out, const at::Tensor& accept_rate, const at::Tensor& traj,
                   const ModelSpec& spec, const at::Tensor& mean, const at::Tensor& precision, int64_t n_steps,
                   double step_size, int64_t n_leapfrog, int64_t thin, jk::PhiloxSeed seed) {
  const int64_t B = x.size(0), D = x.size(1);
  if (D <= kLaneChainMaxD)
    return hmc_chain_lanes_cpu(x, out, accept_rate, traj, spec, mean, precision, n_steps, step_size, n_leapfrog, thin,
                               seed);
  with_chain_rows<false>(x, spec, mean, precision, [&](const auto& rows, auto zero) {
    using T = decltype(zero);
    hmc_rows_cpu<T>(rows, x.const_data_ptr<T>(), out.mutable_data_ptr<T>(), accept_rate.mutable_data_ptr<T>(),
                    traj.mutable_data_ptr<T>(), B, D, n_steps, T(step_size), n_leapfrog, thin,
                    ChainStream{seed, D, n_steps});
  });
}

}  // namespace ebm
