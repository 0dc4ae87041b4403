// Family `ebm`, CUDA: langevin_chain's launcher, and its float32 kernels (ebm_langevin.cuh; the float64
// ones are in ebm_langevin_f64.cu).
#include <ATen/Dispatch.h>

#include "ebm_langevin.cuh"

namespace ebm {

extern template void launch_langevin_chain<double>(const at::TensorBase& x, const at::TensorBase& out,
                                                   const at::TensorBase& traj, const ModelSpec& spec,
                                                   const at::TensorBase& mean, const at::TensorBase& precision,
                                                   int64_t n_steps, const LangevinUpdate<double>& u, int64_t thin,
                                                   const at::PhiloxCudaState& philox);  // ebm_langevin_f64.cu

void langevin_chain_cuda(const at::TensorBase& x, const at::TensorBase& out, const at::TensorBase& traj,
                         const ModelSpec& spec, const at::TensorBase& mean, const at::TensorBase& precision,
                         int64_t n_steps, const LangevinUpdate<double>& u, int64_t thin,
                         const std::optional<at::Generator>& generator) {
  c10::cuda::CUDAGuard guard(x.device());
  const int64_t D = x.size(1);
  const at::PhiloxCudaState philox = jk::cuda_philox_state(uint64_t(n_steps) * ((D + 3) / 4) * 4, generator);
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "ebm_langevin_chain_cuda", [&] {
    launch_langevin_chain<scalar_t>(x, out, traj, spec, mean, precision, n_steps, u, thin, philox);
  });
}

}  // namespace ebm
