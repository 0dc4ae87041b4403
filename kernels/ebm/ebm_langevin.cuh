// Family `ebm`, CUDA: langevin_chain, the whole chain in one launch for the analytic models (design notes
// in ebm.cu): the kernel, and its launcher for one dtype. ebm_langevin.cu instantiates it for float32 and
// dispatches, ebm_langevin_f64.cu for float64, so that nvcc compiles the two at once (as one file its
// optimizer, on one core, was ebm's slowest step in a first build: session 27).
#pragma once
#include <type_traits>

#include "ebm_rows.cuh"
#include "philox_cuda.cuh"

namespace ebm {

// kFlat = D for D = 1 and 2 (a constant here: ChainDraws's flat stream, and loops cut to D), else 0.
template <typename T, int kD, int kFlat, typename M>
__global__ void __launch_bounds__(kTileRows<kD>) langevin_chain_kernel(const T* __restrict__ x_in, T* __restrict__ x_out,
                                                                       T* __restrict__ traj, int64_t B, int width, M m,
                                                                       const T* __restrict__ mean,
                                                                       const T* __restrict__ prec, int64_t n_steps,
                                                                       LangevinUpdate<T> upd, int64_t thin,
                                                                       at::PhiloxCudaState state) {
  constexpr int R = kTileRows<kD>;
  const int D = kFlat > 0 ? kFlat : width;
  __shared__ ChainShared<T, kD, M> sh;
  __shared__ Tile<T, kD, R> tile;
  const RowModel<T, kD, M> model = make_row_model<T, kD>(sh, m, mean, prec, D);
  const jk::PhiloxSeed seed = jk::unpack_philox(state);
  // Block-uniform loop over tiles (the tile copies synchronize the block); rows past B run
  // on padding and are never stored.
  for (int64_t r0 = static_cast<int64_t>(blockIdx.x) * R; r0 < B; r0 += static_cast<int64_t>(gridDim.x) * R) {
    const int rows = static_cast<int>(std::min<int64_t>(R, B - r0));
    const int64_t row = r0 + threadIdx.x;
    T x[kD], g[kD];
    tile.load(x, x_in, r0, rows, D);
    ChainDraws<kD, kFlat> draws{seed.seed, seed.offset / 4, static_cast<uint64_t>(row), chain_calls_per_step(D, false)};
    int64_t until_save = thin, saved = 0;
    for (int64_t step = 0; step < n_steps; ++step) {
      model.grad(x, g);
      draws.normals(step, D, [&](int i, float z) { x[i] = upd(x[i], g[i], static_cast<T>(z)); });
      if (thin > 0 && --until_save == 0) {
        tile.store(x, traj + saved++ * B * D, r0, rows, D);
        until_save = thin;
      }
    }
    tile.store(x, x_out, r0, rows, D);
  }
}

// The chain for rows of dtype T: the model and the width tier as template arguments.
template <typename T>
void launch_langevin_chain(jk::CudaLaunch& launch, const jk::CudaTensor& x, const jk::CudaTensor& out,
                           const jk::CudaTensor& traj, const ModelSpec& spec, const jk::CudaTensor& mean,
                           const jk::CudaTensor& precision, int64_t n_steps, const LangevinUpdate<double>& u,
                           int64_t thin, const at::PhiloxCudaState& philox) {
  const int64_t B = x.size(0), D = x.size(1);
  constexpr int kMax = std::is_same<T, double>::value ? 32 : 64;  // cuda_langevin_max_d
  const LangevinUpdate<T> upd{T(u.a), T(u.tau), T(u.lo), T(u.hi), u.clamp};
  with_chain_model<T>(spec, [&](auto m) {
    with_chain_tier<kMax>(D, [&](auto tier, auto flat) {
      constexpr int kD = decltype(tier)::value;
      const int64_t blocks = grid_size(launch, B, kTileRows<kD>, kChainBlocksPerSm);
      langevin_chain_kernel<T, kD, decltype(flat)::value><<<blocks, kTileRows<kD>, 0, launch.stream>>>(
          x.const_data_ptr<T>(), out.mutable_data_ptr<T>(), traj.mutable_data_ptr<T>(), B, int(D), m,
          mean.const_data_ptr<T>(), precision.const_data_ptr<T>(), n_steps, upd, thin, philox);
      JK_CUDA_LAUNCH_CHECK(launch);
    });
  });
}

// Instantiated in ebm_langevin_f64.cu only: without this declaration ebm_langevin.cu, whose dispatcher
// names the float64 chain, compiled every float64 kernel a second time (session 41: 30.9 -> 18.1 s on the
// dev machine; session 27's split had taken that file only from 31 to 28 s).
extern template void launch_langevin_chain<double>(jk::CudaLaunch& launch, const jk::CudaTensor& x,
                                                   const jk::CudaTensor& out, const jk::CudaTensor& traj,
                                                   const ModelSpec& spec, const jk::CudaTensor& mean,
                                                   const jk::CudaTensor& precision, int64_t n_steps,
                                                   const LangevinUpdate<double>& u, int64_t thin,
                                                   const at::PhiloxCudaState& philox);

}  // namespace ebm
