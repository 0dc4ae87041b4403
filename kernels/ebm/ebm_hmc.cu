// Family `ebm`, CUDA: hmc_chain, the whole Metropolis-adjusted chain in one launch for the analytic
// models (design notes in ebm.cu). A file of its own so that it compiles beside ebm.cu and
// ebm_langevin.cu (ebm_rows.cuh).
#include "ebm_rows.cuh"
#include "philox_cuda.cuh"

namespace ebm {

template <typename T, int kD, typename M>
__global__ void __launch_bounds__(kTileRows<kD>) hmc_chain_kernel(const T* __restrict__ x_in, T* __restrict__ x_out,
                                                                  T* __restrict__ accept_rate, T* __restrict__ traj,
                                                                  int64_t B, int D, M m, const T* __restrict__ mean,
                                                                  const T* __restrict__ prec, int64_t n_steps, T eps,
                                                                  int64_t n_leapfrog, int64_t thin,
                                                                  at::PhiloxCudaState state) {
  constexpr int R = kTileRows<kD>;
  __shared__ ChainShared<T, kD, M> sh;
  __shared__ Tile<T, kD, R> tile;
  const RowModel<T, kD, M> model = make_row_model<T, kD>(sh, m, mean, prec, D);
  const jk::PhiloxSeed seed = jk::unpack_philox(state);
  const int64_t nq = (D + 3) / 4;
  for (int64_t r0 = static_cast<int64_t>(blockIdx.x) * R; r0 < B; r0 += static_cast<int64_t>(gridDim.x) * R) {
    const int rows = static_cast<int>(std::min<int64_t>(R, B - r0));
    const int64_t row = r0 + threadIdx.x;
    T x[kD], x0[kD], p[kD], g[kD];
    tile.load(x, x_in, r0, rows, D);
    int64_t accepted = 0, until_save = thin, saved = 0;
    for (int64_t step = 0; step < n_steps; ++step) {
      const uint64_t counter = seed.offset / 4 + step * (nq + 1);
#pragma unroll
      for (int q = 0; q < kD / 4; ++q) {
        jk::Float4 z{0.f, 0.f, 0.f, 0.f};
        if (4 * q < D) z = jk::normal4(seed.seed, counter + q, row);
#pragma unroll
        for (int k = 0; k < 4; ++k) p[4 * q + k] = 4 * q + k < D ? static_cast<T>(lane(z, k)) : T(0);
      }
      T kinetic = 0;
#pragma unroll
      for (int i = 0; i < kD; ++i) {
        x0[i] = x[i];
        kinetic += p[i] * p[i];
      }
      model.grad(x, g);
      const T h0 = model.energy(x, g) + T(0.5) * kinetic;
#pragma unroll
      for (int i = 0; i < kD; ++i) p[i] -= T(0.5) * eps * g[i];
      for (int64_t l = 0; l < n_leapfrog; ++l) {
#pragma unroll
        for (int i = 0; i < kD; ++i) x[i] += eps * p[i];
        model.grad(x, g);
        const T kick = l + 1 == n_leapfrog ? T(0.5) * eps : eps;
#pragma unroll
        for (int i = 0; i < kD; ++i) p[i] -= kick * g[i];
      }
      kinetic = 0;
#pragma unroll
      for (int i = 0; i < kD; ++i) kinetic += p[i] * p[i];
      const T h1 = model.energy(x, g) + T(0.5) * kinetic;
      const float u = jk::uniform_open0(jk::philox4x32_10(seed.seed, counter + nq, row).x);
      if (log(static_cast<T>(u)) < h0 - h1) {  // false when h1 is NaN or inf: rejected
        ++accepted;
      } else {
#pragma unroll
        for (int i = 0; i < kD; ++i) x[i] = x0[i];
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

void hmc_chain_cuda(jk::CudaLaunch& launch, const jk::CudaTensor& x, const jk::CudaTensor& out,
                    const jk::CudaTensor& accept_rate, const jk::CudaTensor& traj, const ModelSpec& spec,
                    const jk::CudaTensor& mean, const jk::CudaTensor& precision, int64_t n_steps, double step_size,
                    int64_t n_leapfrog, int64_t thin) {
  const int64_t B = x.size(0), D = x.size(1);
  const at::PhiloxCudaState philox = launch.philox(uint64_t(n_steps) * ((D + 3) / 4 + 1) * 4);
  jk::dispatch_float32_64(x.scalar_type(), [&](auto zero) {
    using T = decltype(zero);
    constexpr int kMax = std::is_same<T, double>::value ? 16 : 32;  // cuda_hmc_max_d
    with_chain_model<T>(spec, [&](auto m) {
      with_tier<kMax>(D, [&](auto tier) {
        constexpr int kD = decltype(tier)::value;
        const int64_t blocks = grid_size(launch, B, kTileRows<kD>, kChainBlocksPerSm);
        hmc_chain_kernel<T, kD><<<blocks, kTileRows<kD>, 0, launch.stream>>>(
            x.const_data_ptr<T>(), out.mutable_data_ptr<T>(), accept_rate.mutable_data_ptr<T>(),
            traj.mutable_data_ptr<T>(), B, int(D), m, mean.const_data_ptr<T>(), precision.const_data_ptr<T>(), n_steps,
            T(step_size), n_leapfrog, thin, philox);
        JK_CUDA_LAUNCH_CHECK(launch);
      });
    });
  });
}

}  // namespace ebm
