// Minimal: does synccheck report "divergent threads in warp" for a plain __syncthreads in a 16-block cluster?
#include <cooperative_groups.h>
#include <cstdio>
#include <cstdlib>
namespace cg = cooperative_groups;
__global__ void k(float* out, int use_cluster_sync) {
  extern __shared__ float s[];
  s[threadIdx.x] = threadIdx.x;
  __syncthreads();
  float v = s[(threadIdx.x + 1) % blockDim.x];
  __syncthreads();
  if (use_cluster_sync) { cg::this_cluster().sync(); }
  out[blockIdx.y * gridDim.x * blockDim.x + blockIdx.x * blockDim.x + threadIdx.x] = v;
}
int main(int argc, char** argv) {
  int cluster = atoi(argv[1]), csync = atoi(argv[2]);
  float* out; cudaMalloc(&out, 256 * 3 * 256 * sizeof(float));
  cudaFuncSetAttribute(k, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
  cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, 40 * 1024);
  cudaLaunchConfig_t c{}; c.gridDim = dim3(256, 3); c.blockDim = dim3(256); c.dynamicSmemBytes = 40 * 1024;
  cudaLaunchAttribute a{}; a.id = cudaLaunchAttributeClusterDimension; a.val.clusterDim.x = cluster;
  a.val.clusterDim.y = 1; a.val.clusterDim.z = 1; c.attrs = &a; c.numAttrs = 1;
  for (int i = 0; i < 20; ++i) { cudaError_t e = cudaLaunchKernelEx(&c, k, out, csync); if (e) { printf("launch: %s\n", cudaGetErrorString(e)); return 1; } }
  printf("cluster %d cluster_sync %d: %s\n", cluster, csync, cudaGetErrorString(cudaDeviceSynchronize()));
  return 0;
}
