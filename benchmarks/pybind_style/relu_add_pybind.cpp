// relu_add the way the source guides write an extension: torch/extension.h and a
// pybind11 module. Used only by benchmarks/load_time.py as the baseline to beat.
#include <torch/extension.h>

#ifdef WITH_CUDA
torch::Tensor relu_add_cuda(torch::Tensor x, torch::Tensor y, double bias);
#endif

torch::Tensor relu_add(torch::Tensor x, torch::Tensor y, double bias) {
#ifdef WITH_CUDA
  if (x.is_cuda()) return relu_add_cuda(x, y, bias);
#endif
  return torch::relu(x) + y + bias;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("relu_add", &relu_add, "relu(x) + y + bias"); }
