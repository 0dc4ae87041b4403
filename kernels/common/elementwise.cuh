// The elementwise launcher (elementwise_kernel.cuh) for tensors: the device guard, the current
// stream and a checked launch; the SM-count helpers the other launchers size their grids with; and
// scratch memory for a launch.
#pragma once
#include <ATen/core/TensorBase.h>  // not Tensor.h: its operator declarations cost nvcc ~1 s a file
#include <ATen/cuda/EmptyTensor.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "elementwise_kernel.cuh"

namespace jk {

inline int multiprocessor_count(int device) {
  int count = 0;
  C10_CUDA_CHECK(query_multiprocessor_count(device, &count));
  return count;
}

// `bytes` of scratch memory on `device` from PyTorch's caching allocator (stream-ordered on the
// current stream, as at::empty; graph-safe). at::empty's header costs nvcc ~5 s a file (session 26).
inline at::TensorBase cuda_workspace(int64_t bytes, c10::Device device) {
  return at::detail::empty_cuda({bytes}, at::kByte, device, std::nullopt);
}

// Blocks of `kernel` at `threads` threads (no dynamic shared memory) that fit on one SM at once,
// at least 1: times multiprocessor_count, the grid of one full wave.
template <typename Kernel>
int blocks_per_sm(Kernel kernel, int threads) {
  int count = 0;
  C10_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&count, kernel, threads, 0));
  return count > 1 ? count : 1;
}

// out[i] = op(inputs[i]...) for contiguous CUDA tensors of one dtype T and equal numel.
template <typename T, typename Op, typename... Tensors>
void cuda_elementwise(const at::TensorBase& out, Op op, const Tensors&... inputs) {
  c10::cuda::CUDAGuard guard(out.device());  // launch_elementwise returns at once when there is nothing to do
  C10_CUDA_CHECK(launch_elementwise(c10::cuda::getCurrentCUDAStream(), out.mutable_data_ptr<T>(), out.numel(), op,
                                    inputs.template const_data_ptr<T>()...));
}

}  // namespace jk
