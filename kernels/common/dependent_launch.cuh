// Programmatic dependent launch (sm_90+), shared by the families that chain kernels: a kernel launched
// with launch_after_previous has its launch and block start-up overlap the previous kernel in the
// stream; it must call wait_for_previous_kernel() (griddepcontrol.wait: the previous grid has completed
// and its writes are visible) before it reads what that kernel wrote, and the previous kernel may call
// let_next_kernel_launch() to let it start early. Without the launch attribute (or before sm_90) both
// are no-ops and the stream order is the usual. CUDA graphs capture the dependency.
#pragma once
#include <cuda_runtime.h>

#include <atomic>

#include "cuda_launch.cuh"

namespace jk {

__device__ __forceinline__ void wait_for_previous_kernel() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// The same wait, held back until `loaded` (a value the thread has just loaded) has arrived. ptxas
// otherwise schedules the wait ahead of loads that come before it in the source, and a dependent kernel
// whose first wave could have had its loads in flight during the previous kernel sits idle instead
// (ddpm_step's step kernel, session 17). Both branches wait: the predicate only creates the dependency.
__device__ __forceinline__ void wait_for_previous_kernel_after(uint32_t loaded) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "{\n .reg .pred p;\n setp.ne.b32 p, %0, 0;\n @p griddepcontrol.wait;\n @!p griddepcontrol.wait;\n}" ::"r"(loaded)
      : "memory");
#endif
}

__device__ __forceinline__ void let_next_kernel_launch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// The PTX version (virtual arch, e.g. 90) that `kernel`'s code for the current device came from: what
// decides which instructions it holds (a build for older archs alone compiles newer ones out). One
// family's kernels share it (one arch list per build), so it is kept per kernel signature and device,
// asked once.
template <typename... Params>
int ptx_version(const CudaLaunch& launch, void (*kernel)(Params...)) {
  static std::atomic<int> known[64];  // 0: not asked yet
  const int device = launch.device;
  if (device < 0 || device >= 64) return 0;
  int version = known[device].load(std::memory_order_relaxed);
  if (version == 0) {
    cudaFuncAttributes attributes;
    JK_CUDA_CHECK(launch, cudaFuncGetAttributes(&attributes, kernel));
    version = attributes.ptxVersion;
    known[device].store(version, std::memory_order_relaxed);
  }
  return version;
}

// Whether `kernel` holds the griddepcontrol instructions (PTX for sm_90 or newer) for the current
// device: only then may it be launched as a dependent (a kernel without the wait would run alongside
// the previous one).
template <typename... Params>
bool dependent_launch_ok(const CudaLaunch& launch, void (*kernel)(Params...)) {
  return ptx_version(launch, kernel) >= 90;
}

// kernel<<<grid, block, 0, launch.stream>>>(args...) as a dependent of the stream's previous kernel.
template <typename... Params, typename... Args>
void launch_after_previous(const CudaLaunch& launch, void (*kernel)(Params...), dim3 grid, dim3 block,
                           Args... args) {
  cudaLaunchAttribute attribute[1];
  attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = 0;
  config.stream = launch.stream;
  config.attrs = attribute;
  config.numAttrs = dependent_launch_ok(launch, kernel) ? 1 : 0;
  JK_CUDA_CHECK(launch, cudaLaunchKernelEx(&config, kernel, static_cast<Params>(args)...));
}

}  // namespace jk
