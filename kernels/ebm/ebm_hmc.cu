// Family `ebm`, CUDA: hmc_chain, the whole Metropolis-adjusted chain in one launch for the analytic
// models (design notes in ebm.cu). A file of its own so that it compiles beside ebm.cu and
// ebm_langevin.cu (ebm_rows.cuh).
#include "dependent_launch.cuh"  // jk::ptx_version
#include "ebm_mma.cuh"
#include "ebm_rows.cuh"
#include "philox_cuda.cuh"

namespace ebm {

// kFlat = D for D = 1 and 2 (a constant here: ChainDraws's flat stream, and loops over the D elements alone),
// else 0.
template <typename T, int kD, int kFlat, typename M>
__global__ void __launch_bounds__(kTileRows<kD>) hmc_chain_kernel(const T* __restrict__ x_in, T* __restrict__ x_out,
                                                                  T* __restrict__ accept_rate, T* __restrict__ traj,
                                                                  int64_t B, int width, M m, const T* __restrict__ mean,
                                                                  const T* __restrict__ prec, int64_t n_steps, T eps,
                                                                  int64_t n_leapfrog, int64_t thin,
                                                                  at::PhiloxCudaState state) {
  constexpr int R = kTileRows<kD>;
  // The elements the loops below touch (the others stay 0): D = 1, 2 alone for the local models. Not for the
  // Gaussian, whose gradient reads all kD columns of its padded Psym anyway: cut to D, ptxas held those loads
  // in 100 more registers (167 at D = 1 in float32, 63 for all kD).
  constexpr int kW = kFlat > 0 && !ChainShared<T, kD, M>::kGauss ? kFlat : kD;
  const int D = kFlat > 0 ? kFlat : width;
  __shared__ ChainShared<T, kD, M> sh;
  __shared__ Tile<T, kD, R> tile;
  const RowModel<T, kD, M> model = make_row_model<T, kD>(sh, m, mean, prec, D);
  const jk::PhiloxSeed seed = jk::unpack_philox(state);
  for (int64_t r0 = static_cast<int64_t>(blockIdx.x) * R; r0 < B; r0 += static_cast<int64_t>(gridDim.x) * R) {
    const int rows = static_cast<int>(std::min<int64_t>(R, B - r0));
    const int64_t row = r0 + threadIdx.x;
    T x[kD], x0[kD], p[kD], g[kD];
    tile.load(x, x_in, r0, rows, D);
    ChainDraws<kD, kFlat> draws{seed.seed, seed.offset / 4, static_cast<uint64_t>(row), chain_calls_per_step(D, true)};
    int64_t accepted = 0, until_save = thin, saved = 0;
    for (int64_t step = 0; step < n_steps; ++step) {
#pragma unroll
      for (int i = 0; i < kD; ++i) p[i] = T(0);
      draws.normals(step, D, [&](int i, float z) { p[i] = static_cast<T>(z); });
      T kinetic = 0;
#pragma unroll
      for (int i = 0; i < kW; ++i) {
        x0[i] = x[i];
        kinetic += p[i] * p[i];
      }
      model.grad(x, g);
      const T h0 = model.energy(x, g) + T(0.5) * kinetic;
#pragma unroll
      for (int i = 0; i < kW; ++i) p[i] -= T(0.5) * eps * g[i];
      for (int64_t l = 0; l < n_leapfrog; ++l) {
#pragma unroll
        for (int i = 0; i < kW; ++i) x[i] += eps * p[i];
        model.grad(x, g);
        const T kick = l + 1 == n_leapfrog ? T(0.5) * eps : eps;
#pragma unroll
        for (int i = 0; i < kW; ++i) p[i] -= kick * g[i];
      }
      kinetic = 0;
#pragma unroll
      for (int i = 0; i < kW; ++i) kinetic += p[i] * p[i];
      const T h1 = model.energy(x, g) + T(0.5) * kinetic;
      if (log(static_cast<T>(draws.accept_uniform(step))) < h0 - h1) {  // false when h1 is NaN or inf: rejected
        ++accepted;
      } else {
#pragma unroll
        for (int i = 0; i < kW; ++i) x[i] = x0[i];
      }
      if (thin > 0 && --until_save == 0) {
        tile.store(x, traj + saved++ * B * D, r0, rows, D);
        until_save = thin;
      }
    }
    tile.store(x, x_out, r0, rows, D);
    if (static_cast<int>(threadIdx.x) < rows)
      accept_rate[row] = n_steps > 0 ? static_cast<T>(accepted) / static_cast<T>(n_steps) : T(0);
  }
}

// HMC for the Gaussian at D = 16 in float32 on the tensor cores, as gaussian16_langevin_kernel
// (ebm_langevin.cu) does Langevin: a warp holds U tiles of 16 rows (lane (g, t): columns 4t..4t+3 of rows
// g and g + 8) and forms every gradient with split-TF32 mma products. A row's energies are summed over its
// four lanes. The draws are hmc_chain_kernel's: momenta from Philox call counter + t of the row, the
// acceptance uniform from call counter + 4. Against hmc_chain_kernel, H200, session 33 (call 8):
// B = 65536, 100 steps of 10 leapfrog steps 1547.8 -> 956 us; B = 4096 940 -> 196; B = 2^21, 32 steps of
// 4, 7678 -> 5978.
template <int U>
__global__ void __launch_bounds__(tc16::kChainThreads)
    gaussian16_hmc_kernel(const float* __restrict__ x_in, float* __restrict__ x_out, float* __restrict__ accept_rate,
                          float* __restrict__ traj, int64_t B, const float* __restrict__ mean,
                          const float* __restrict__ prec, int64_t n_steps, float eps, int64_t n_leapfrog,
                          int64_t thin, at::PhiloxCudaState state) {
  const tc16::WarpTiles<U> w;
  const int g = w.g, t = w.t;
  const float4 mu = reinterpret_cast<const float4*>(mean)[t];
  const jk::PhiloxSeed seed = jk::unpack_philox(state);
  const tc16::PsymFragments psym(prec, g, t);
  // The Hamiltonian of row g + 8h, summed over its four lanes: ½ Σ dⱼ·gradⱼ + ½ Σ pⱼ².
  const auto hamiltonian = [&](const float (&d)[2][4], const float4 (&grad)[2], const float4 (&p)[2], float (&H)[2]) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float e = d[h][0] * grad[h].x + d[h][1] * grad[h].y + d[h][2] * grad[h].z + d[h][3] * grad[h].w;
      e += p[h].x * p[h].x + p[h].y * p[h].y + p[h].z * p[h].z + p[h].w * p[h].w;
      e += __shfl_xor_sync(kFullMask, e, 1);
      e += __shfl_xor_sync(kFullMask, e, 2);
      H[h] = 0.5f * e;
    }
  };
  const auto step_by = [](float4& a, float c, const float4& b) {  // a += c·b
    a = make_float4(a.x + c * b.x, a.y + c * b.y, a.z + c * b.z, a.w + c * b.w);
  };
  for (int64_t base = w.first; base < B; base += w.stride) {
    float4 x[U][2];  // rows base + 16u + g + 8h, columns 4t..4t+3 (zeros past B, never stored)
    tc16::load_rows<U>(x, x_in, base, B, g, t);
    int64_t accepted[U][2] = {}, until_save = thin, saved = 0;
    for (int64_t step = 0; step < n_steps; ++step) {
      const uint64_t counter = seed.offset / 4 + static_cast<uint64_t>(step) * 5;
#pragma unroll
      for (int u = 0; u < U; ++u) {
        float4 p[2], x0[2] = {x[u][0], x[u][1]}, grad[2];
        float d[2][4], h0[2], h1[2];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const jk::Float4 z = jk::normal4(seed.seed, counter + t, base + 16 * u + g + 8 * h);
          p[h] = make_float4(z.x, z.y, z.z, z.w);
        }
        tc16::gaussian_gradient(x[u], mu, psym, d, grad);
        hamiltonian(d, grad, p, h0);
#pragma unroll
        for (int h = 0; h < 2; ++h) step_by(p[h], -0.5f * eps, grad[h]);
        for (int64_t l = 0; l < n_leapfrog; ++l) {
#pragma unroll
          for (int h = 0; h < 2; ++h) step_by(x[u][h], eps, p[h]);
          tc16::gaussian_gradient(x[u], mu, psym, d, grad);
          const float kick = l + 1 == n_leapfrog ? 0.5f * eps : eps;
#pragma unroll
          for (int h = 0; h < 2; ++h) step_by(p[h], -kick, grad[h]);
        }
        hamiltonian(d, grad, p, h1);
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int64_t row = base + 16 * u + g + 8 * h;
          const float uniform = jk::uniform_open0(jk::philox4x32_10(seed.seed, counter + 4, row).x);
          if (logf(uniform) < h0[h] - h1[h]) {  // false when h1 is NaN or inf: rejected
            ++accepted[u][h];
          } else {
            x[u][h] = x0[h];
          }
        }
      }
      if (thin > 0 && --until_save == 0) {
        tc16::store_rows<U>(x, traj + saved++ * B * 16, base, B, g, t);
        until_save = thin;
      }
    }
    tc16::store_rows<U>(x, x_out, base, B, g, t);
#pragma unroll
    for (int u = 0; u < U; ++u) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int64_t row = base + 16 * u + g + 8 * h;
        if (t == 0 && row < B)
          accept_rate[row] = n_steps > 0 ? static_cast<float>(accepted[u][h]) / static_cast<float>(n_steps) : 0.0f;
      }
    }
  }
}

// True when it launched (tc16::gaussian16_chain, and a build with sm_80 code).
bool launch_gaussian16_hmc(jk::CudaLaunch& launch, const jk::CudaTensor& x, const jk::CudaTensor& out,
                           const jk::CudaTensor& accept_rate, const jk::CudaTensor& traj, const ModelSpec& spec,
                           const jk::CudaTensor& mean, const jk::CudaTensor& precision, int64_t n_steps,
                           double step_size, int64_t n_leapfrog, int64_t thin, const at::PhiloxCudaState& philox) {
  if (!tc16::gaussian16_chain(spec, x, out, mean) || jk::ptx_version(launch, gaussian16_hmc_kernel<1>) < 80) {
    return false;
  }
  const int64_t B = x.size(0);
  tc16::with_chain_tiles(B, launch.multiprocessors, [&](auto tiles) {
    const auto kernel = gaussian16_hmc_kernel<decltype(tiles)::value>;
    kernel<<<tc16::chain_blocks<decltype(tiles)::value>(launch, kernel, B), tc16::kChainThreads, 0, launch.stream>>>(
        x.const_data_ptr<float>(), out.mutable_data_ptr<float>(), accept_rate.mutable_data_ptr<float>(),
        traj.mutable_data_ptr<float>(), B, mean.const_data_ptr<float>(), precision.const_data_ptr<float>(), n_steps,
        float(step_size), n_leapfrog, thin, philox);
    JK_CUDA_LAUNCH_CHECK(launch);
  });
  return true;
}

void hmc_chain_cuda(jk::CudaLaunch& launch, const jk::CudaTensor& x, const jk::CudaTensor& out,
                    const jk::CudaTensor& accept_rate, const jk::CudaTensor& traj, const ModelSpec& spec,
                    const jk::CudaTensor& mean, const jk::CudaTensor& precision, int64_t n_steps, double step_size,
                    int64_t n_leapfrog, int64_t thin) {
  const int64_t B = x.size(0), D = x.size(1);
  const at::PhiloxCudaState philox = launch.philox(chain_philox_draws(n_steps, D, true));
  if (launch_gaussian16_hmc(launch, x, out, accept_rate, traj, spec, mean, precision, n_steps, step_size, n_leapfrog,
                            thin, philox)) {
    return;
  }
  jk::dispatch_float32_64(x.scalar_type(), [&](auto zero) {
    using T = decltype(zero);
    constexpr int kMax = std::is_same<T, double>::value ? 16 : 32;  // cuda_hmc_max_d
    with_chain_model<T>(spec, [&](auto m) {
      with_chain_tier<kMax>(D, [&](auto tier, auto flat) {
        constexpr int kD = decltype(tier)::value;
        const int64_t blocks = grid_size(launch, B, kTileRows<kD>, kChainBlocksPerSm);
        hmc_chain_kernel<T, kD, decltype(flat)::value><<<blocks, kTileRows<kD>, 0, launch.stream>>>(
            x.const_data_ptr<T>(), out.mutable_data_ptr<T>(), accept_rate.mutable_data_ptr<T>(),
            traj.mutable_data_ptr<T>(), B, int(D), m, mean.const_data_ptr<T>(), precision.const_data_ptr<T>(), n_steps,
            T(step_size), n_leapfrog, thin, philox);
        JK_CUDA_LAUNCH_CHECK(launch);
      });
    });
  });
}

}  // namespace ebm
