// Family `ebm`, CUDA: langevin_chain's launcher, and its float32 kernels (ebm_langevin.cuh; the float64
// ones are in ebm_langevin_f64.cu).
#include "ebm_langevin.cuh"

namespace ebm {

extern template void launch_langevin_chain<double>(jk::CudaLaunch& launch, const jk::CudaTensor& x,
                                                   const jk::CudaTensor& out, const jk::CudaTensor& traj,
                                                   const ModelSpec& spec, const jk::CudaTensor& mean,
                                                   const jk::CudaTensor& precision, int64_t n_steps,
                                                   const LangevinUpdate<double>& u, int64_t thin,
                                                   const at::PhiloxCudaState& philox);  // ebm_langevin_f64.cu

void langevin_chain_cuda(jk::CudaLaunch& launch, const jk::CudaTensor& x, const jk::CudaTensor& out,
                         const jk::CudaTensor& traj, const ModelSpec& spec, const jk::CudaTensor& mean,
                         const jk::CudaTensor& precision, int64_t n_steps, const LangevinUpdate<double>& u,
                         int64_t thin) {
  const int64_t D = x.size(1);
  const at::PhiloxCudaState philox = launch.philox(uint64_t(n_steps) * ((D + 3) / 4) * 4);
  jk::dispatch_float32_64(x.scalar_type(), [&](auto zero) {
    using scalar_t = decltype(zero);
    launch_langevin_chain<scalar_t>(launch, x, out, traj, spec, mean, precision, n_steps, u, thin, philox);
  });
}

}  // namespace ebm
