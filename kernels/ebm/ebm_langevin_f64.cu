// Family `ebm`, CUDA: langevin_chain's float64 kernels (ebm_langevin.cuh), in a file of their own so that
// nvcc compiles them beside ebm_langevin.cu's float32 ones.
#include "ebm_langevin.cuh"

namespace ebm {

template void launch_langevin_chain<double>(const at::TensorBase& x, const at::TensorBase& out,
                                            const at::TensorBase& traj, const ModelSpec& spec,
                                            const at::TensorBase& mean, const at::TensorBase& precision,
                                            int64_t n_steps, const LangevinUpdate<double>& u, int64_t thin,
                                            const at::PhiloxCudaState& philox);

}  // namespace ebm
