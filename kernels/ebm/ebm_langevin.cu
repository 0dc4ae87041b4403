// Family `ebm`, CUDA: langevin_chain's launcher, and its float32 kernels (ebm_langevin.cuh; the float64
// ones are in ebm_langevin_f64.cu; the Gaussian's at D = 16 below).
#include "dependent_launch.cuh"  // jk::ptx_version
#include "ebm_langevin.cuh"
#include "ebm_mma.cuh"

namespace ebm {

// The Gaussian chain for rows of exactly 16 float32 values on the tensor cores: a warp holds U tiles of
// 16 rows in the layout of ebm_mma.cuh (lane (g, t): columns 4t..4t+3 of rows g and g + 8) for the whole
// chain and forms each step's gradient Psym·(x − μ) with TF32-split products; its four columns are one
// Philox call of the row, so the draws are langevin_chain_kernel's (subsequence = row, counter =
// offset/4 + 4·step + t). No shared memory: rows go from memory to registers and back with 16-byte
// accesses. Against the thread-per-row kernel (Psym·x by FMAs, a shared-memory tile in and out), H200,
// session 33: one step at B = 2^21 156.7 -> 81.6 us, 32 steps 2065 -> 1886; 100 steps at B = 65536
// 240.6 -> 204, at B = 4096 140.9 -> 47.7 (benchmarks/results/session33, calls 4-5).
template <int U>
__global__ void __launch_bounds__(tc16::kChainThreads)
    gaussian16_langevin_kernel(const float* __restrict__ x_in, float* __restrict__ x_out, float* __restrict__ traj,
                               int64_t B, const float* __restrict__ mean, const float* __restrict__ prec,
                               int64_t n_steps, LangevinUpdate<float> upd, int64_t thin, at::PhiloxCudaState state) {
  const tc16::WarpTiles<U> w;
  const int g = w.g, t = w.t;
  const float4 mu = reinterpret_cast<const float4*>(mean)[t];
  const jk::PhiloxSeed seed = jk::unpack_philox(state);
  const tc16::PsymFragments psym(prec, g, t);
  for (int64_t base = w.first; base < B; base += w.stride) {
    float4 x[U][2];  // rows base + 16u + g + 8h, columns 4t..4t+3 (zeros past B, never stored)
    tc16::load_rows<U>(x, x_in, base, B, g, t);
    int64_t until_save = thin, saved = 0;
    for (int64_t step = 0; step < n_steps; ++step) {
      const uint64_t counter = seed.offset / 4 + static_cast<uint64_t>(step) * 4 + t;
#pragma unroll
      for (int u = 0; u < U; ++u) {
        float d[2][4];
        float4 grad[2];
        tc16::gaussian_gradient(x[u], mu, psym, d, grad);
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const jk::Float4 z = jk::normal4(seed.seed, counter, base + 16 * u + g + 8 * h);
          x[u][h] = make_float4(upd(x[u][h].x, grad[h].x, z.x), upd(x[u][h].y, grad[h].y, z.y),
                                upd(x[u][h].z, grad[h].z, z.z), upd(x[u][h].w, grad[h].w, z.w));
        }
      }
      if (thin > 0 && --until_save == 0) {
        tc16::store_rows<U>(x, traj + saved++ * B * 16, base, B, g, t);
        until_save = thin;
      }
    }
    tc16::store_rows<U>(x, x_out, base, B, g, t);
  }
}

// True when it launched (tc16::gaussian16_chain, and a build with sm_80 code).
bool launch_gaussian16_langevin(jk::CudaLaunch& launch, const jk::CudaTensor& x, const jk::CudaTensor& out,
                                const jk::CudaTensor& traj, const ModelSpec& spec, const jk::CudaTensor& mean,
                                const jk::CudaTensor& precision, int64_t n_steps, const LangevinUpdate<double>& u,
                                int64_t thin, const at::PhiloxCudaState& philox) {
  if (!tc16::gaussian16_chain(spec, x, out, mean) || jk::ptx_version(launch, gaussian16_langevin_kernel<1>) < 80) {
    return false;
  }
  const LangevinUpdate<float> upd{float(u.a), float(u.tau), float(u.lo), float(u.hi), u.clamp};
  const int64_t B = x.size(0);
  tc16::with_chain_tiles(B, launch.multiprocessors, [&](auto tiles) {
    const auto kernel = gaussian16_langevin_kernel<decltype(tiles)::value>;
    kernel<<<tc16::chain_blocks<decltype(tiles)::value>(launch, kernel, B), tc16::kChainThreads, 0, launch.stream>>>(
        x.const_data_ptr<float>(), out.mutable_data_ptr<float>(), traj.mutable_data_ptr<float>(), B,
        mean.const_data_ptr<float>(), precision.const_data_ptr<float>(), n_steps, upd, thin, philox);
    JK_CUDA_LAUNCH_CHECK(launch);
  });
  return true;
}

void langevin_chain_cuda(jk::CudaLaunch& launch, const jk::CudaTensor& x, const jk::CudaTensor& out,
                         const jk::CudaTensor& traj, const ModelSpec& spec, const jk::CudaTensor& mean,
                         const jk::CudaTensor& precision, int64_t n_steps, const LangevinUpdate<double>& u,
                         int64_t thin) {
  const int64_t D = x.size(1);
  const at::PhiloxCudaState philox = launch.philox(chain_philox_draws(n_steps, D, false));
  if (launch_gaussian16_langevin(launch, x, out, traj, spec, mean, precision, n_steps, u, thin, philox)) return;
  jk::dispatch_float32_64(x.scalar_type(), [&](auto zero) {
    using scalar_t = decltype(zero);
    launch_langevin_chain<scalar_t>(launch, x, out, traj, spec, mean, precision, n_steps, u, thin, philox);
  });
}

}  // namespace ebm
