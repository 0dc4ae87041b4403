// CUDA half of the pybind-style baseline (see relu_add_pybind.cpp).
#include <torch/extension.h>

__global__ void relu_add_kernel(const float* x, const float* y, float* out, float bias, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) out[i] = fmaxf(x[i], 0.f) + y[i] + bias;
}

torch::Tensor relu_add_cuda(torch::Tensor x, torch::Tensor y, double bias) {
  auto out = torch::empty_like(x);
  int64_t n = x.numel();
  relu_add_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), out.data_ptr<float>(),
                                            static_cast<float>(bias), n);
  return out;
}
