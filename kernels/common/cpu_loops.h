// The CPU elementwise loop, written once: at::parallel_for over contiguous data.
#pragma once
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>

namespace jk {

constexpr int64_t kCpuGrain = 32768;  // elements per task: small tensors stay on one thread

template <typename T, typename Op, typename... In>
void cpu_loop(T* out, int64_t n, Op op, const In*... in) {
  at::parallel_for(0, n, kCpuGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) out[i] = op(in[i]...);
  });
}

// out[i] = op(inputs[i]...) for contiguous tensors of one dtype T and equal numel.
template <typename T, typename Op, typename... Tensors>
void cpu_elementwise(const at::Tensor& out, Op op, const Tensors&... inputs) {
  cpu_loop<T>(out.mutable_data_ptr<T>(), out.numel(), op, inputs.template const_data_ptr<T>()...);
}

}  // namespace jk
