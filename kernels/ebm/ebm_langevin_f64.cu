// Family `ebm`, CUDA: langevin_chain's float64 kernels (ebm_langevin.cuh), in a file of their own so that
// nvcc compiles them beside ebm_langevin.cu's float32 ones.
#include "ebm_langevin.cuh"

namespace ebm {

template void launch_langevin_chain<double>(jk::CudaLaunch& launch, const jk::CudaTensor& x,
                                            const jk::CudaTensor& out, const jk::CudaTensor& traj,
                                            const ModelSpec& spec, const jk::CudaTensor& mean,
                                            const jk::CudaTensor& precision, int64_t n_steps,
                                            const LangevinUpdate<double>& u, int64_t thin,
                                            const at::PhiloxCudaState& philox);

}  // namespace ebm
