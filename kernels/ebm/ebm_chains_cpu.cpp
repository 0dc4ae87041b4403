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
#include <vector>

#include "ebm_cpu.h"

namespace ebm {

// Langevin: x ← x − η∇E(x) + τε for n_steps, state of a row in a scratch vector.
template <typename T, typename Rows>
void langevin_rows_cpu(const Rows& rows, const T* x0, T* xo, T* traj, int64_t B, int64_t D, int64_t n_steps,
                       const LangevinUpdate<T>& upd, int64_t thin, jk::PhiloxSeed seed) {
  const int64_t nq = (D + 3) / 4;  // Philox draws per row and step
  // A row's draws for several steps at once (its counters are consecutive): one step at a time, a narrow row
  // paid a whole batch's set-up for one Philox call and its maths ran unvectorized (D = 1: 5x eager's time).
  const int64_t batch_steps = std::max<int64_t>(1, std::min<int64_t>(n_steps, jk::kPhiloxBatchCpu / nq));
  at::parallel_for(0, B, 1, [&](int64_t begin, int64_t end) {
    std::vector<T> x(D), g(D);
    std::vector<float> z(4 * nq * batch_steps);
    for (int64_t r = begin; r < end; ++r) {
      std::copy(x0 + r * D, x0 + (r + 1) * D, x.begin());
      for (int64_t step = 0; step < n_steps; ++step) {
        const int64_t k = step % batch_steps;  // this step's draws: z[4 nq k, 4 nq (k + 1))
        if (k == 0) {
          const int64_t steps = std::min(batch_steps, n_steps - step);
          jk::normal4_batch_cpu(seed.seed, seed.offset / 4 + step * nq, steps * nq, z.data(), r);
        }
        rows.grad(x.data(), g.data(), D);
        const float* zk = z.data() + 4 * nq * k;
        for (int64_t i = 0; i < D; ++i) x[i] = upd(x[i], g[i], T(zk[i]));
        if (thin > 0 && (step + 1) % thin == 0)
          std::copy(x.begin(), x.end(), traj + (((step + 1) / thin - 1) * B + r) * D);
      }
      std::copy(x.begin(), x.end(), xo + r * D);
    }
  });
}

// HMC: momentum p ~ N(0, I), n_leapfrog leapfrog steps of size ε, Metropolis accept on
// H = E(x) + ½|p|². Per step: nq Philox draws for p, one for the accept uniform.
template <typename T, typename Rows>
void hmc_rows_cpu(const Rows& rows, const T* x_in, T* xo, T* acc, T* traj, int64_t B, int64_t D, int64_t n_steps,
                  T eps, int64_t n_leapfrog, int64_t thin, jk::PhiloxSeed seed) {
  const int64_t nq = (D + 3) / 4;
  const int64_t calls = nq + 1;  // a step's Philox calls (consecutive counters)
  // A row's words for several steps at once, as in langevin_rows_cpu; the normals' maths runs over the accept
  // calls' words too (unused there), so that it vectorizes over the whole batch.
  const int64_t batch_steps = std::max<int64_t>(1, std::min<int64_t>(n_steps, jk::kPhiloxBatchCpu / calls));
  at::parallel_for(0, B, 1, [&](int64_t begin, int64_t end) {
    std::vector<T> x(D), x0(D), p(D), g(D);
    std::vector<uint32_t> words(4 * calls * batch_steps);
    std::vector<float> z(4 * calls * batch_steps);
    for (int64_t r = begin; r < end; ++r) {
      std::copy(x_in + r * D, x_in + (r + 1) * D, x.begin());
      int64_t accepted = 0;
      for (int64_t step = 0; step < n_steps; ++step) {
        const int64_t k = step % batch_steps;  // this step's calls: words[4 calls k, 4 calls (k + 1))
        if (k == 0) {
          const int64_t steps = std::min(batch_steps, n_steps - step);
          jk::philox_words_cpu(seed.seed, seed.offset / 4 + step * calls, steps * calls, words.data(), r);
          jk::normal4_of_words_cpu(words.data(), steps * calls, z.data());
        }
        const float* zk = z.data() + 4 * calls * k;
        for (int64_t i = 0; i < D; ++i) p[i] = T(zk[i]);
        x0 = x;
        T h0 = rows.energy(x.data(), D);
        for (int64_t i = 0; i < D; ++i) h0 += T(0.5) * p[i] * p[i];
        rows.grad(x.data(), g.data(), D);
        for (int64_t i = 0; i < D; ++i) p[i] -= T(0.5) * eps * g[i];
        for (int64_t l = 0; l < n_leapfrog; ++l) {
          for (int64_t i = 0; i < D; ++i) x[i] += eps * p[i];
          rows.grad(x.data(), g.data(), D);
          const T kick = l + 1 == n_leapfrog ? T(0.5) * eps : eps;
          for (int64_t i = 0; i < D; ++i) p[i] -= kick * g[i];
        }
        T h1 = rows.energy(x.data(), D);
        for (int64_t i = 0; i < D; ++i) h1 += T(0.5) * p[i] * p[i];
        const float u = jk::uniform_open0(words[4 * (calls * k + nq)]);  // lane x of the step's last call
        if (std::log(T(u)) < h0 - h1) {  // false when h1 is NaN or inf: rejected
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
    with_rows<T>(spec, mean, precision, D, [&](const auto& rows) {
      langevin_rows_cpu<T>(rows, x.const_data_ptr<T>(), out.mutable_data_ptr<T>(), traj.mutable_data_ptr<T>(), B, D,
                           n_steps, upd, thin, seed);
    });
  });
}

void hmc_chain_cpu(const at::Tensor& x, const at::Tensor& out, const at::Tensor& accept_rate, const at::Tensor& traj,
                   const ModelSpec& spec, const at::Tensor& mean, const at::Tensor& precision, int64_t n_steps,
                   double step_size, int64_t n_leapfrog, int64_t thin, jk::PhiloxSeed seed) {
  const int64_t B = x.size(0), D = x.size(1);
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "ebm_hmc_chain_cpu", [&] {
    using T = scalar_t;
    with_rows<T>(spec, mean, precision, D, [&](const auto& rows) {
      hmc_rows_cpu<T>(rows, x.const_data_ptr<T>(), out.mutable_data_ptr<T>(), accept_rate.mutable_data_ptr<T>(),
                      traj.mutable_data_ptr<T>(), B, D, n_steps, T(step_size), n_leapfrog, thin, seed);
    });
  });
}

}  // namespace ebm
