#include <ATen/core/Tensor.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>
#include <stdexcept>

// n / d for n < 2^31, d < 2^31 (Granlund-Montgomery, round-up multiplier).
struct FastDiv {
  uint32_t d = 1, mul = 1, shift = 0;
  FastDiv() = default;
  explicit FastDiv(uint32_t divisor) : d(divisor) {
    while ((uint64_t{1} << shift) < d) ++shift;
    mul = static_cast<uint32_t>(((uint64_t{1} << 32) * ((uint64_t{1} << shift) - d)) / d + 1);
  }
  __device__ __forceinline__ uint32_t operator()(uint32_t n) const { return (__umulhi(n, mul) + n) >> shift; }
};

struct Args {
  uint32_t n, p, q, vcols, vectors;
  FastDiv by_vcols, by_q, by_p, by_m;
};

template <int R, bool kStream>
__global__ void __launch_bounds__(256) kron_linear_kernel(float* __restrict__ out, const float* __restrict__ A,
                                                          const float* __restrict__ B, Args s) {
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const uint32_t v = (blockIdx.x * R + r) * 256u + threadIdx.x;
    if (v >= s.vectors) return;
    const uint32_t row = s.by_vcols(v), c = (v - row * s.vcols) * 4;
    const uint32_t j = s.by_q(c), l = c - j * s.q;
    const uint32_t ai = s.by_p(row), k = row - ai * s.p, b = s.by_m(ai);
    const float a = A[ai * s.n + j];
    const float4 bv = *reinterpret_cast<const float4*>(B + (b * s.p + k) * s.q + l);
    const float4 o = make_float4(a * bv.x, a * bv.y, a * bv.z, a * bv.w);
    float4* dst = reinterpret_cast<float4*>(out) + v;
    if (kStream) __stcs(dst, o); else *dst = o;
  }
}

template <int R, bool kStream>
void launch(const at::Tensor& out, const at::Tensor& A, const at::Tensor& B) {
  Args s;
  const int64_t m = A.size(1), n = A.size(2), p = B.size(1), q = B.size(2);
  const int64_t vectors = out.numel() / 4;
  if (vectors >= (int64_t{1} << 31)) throw std::runtime_error("too big");
  s.n = n; s.p = p; s.q = q; s.vcols = n * q / 4; s.vectors = vectors;
  s.by_vcols = FastDiv(s.vcols); s.by_q = FastDiv(q); s.by_p = FastDiv(p); s.by_m = FastDiv(m);
  const int64_t blocks = (vectors + 256 * R - 1) / (256 * R);
  kron_linear_kernel<R, kStream><<<blocks, 256, 0, c10::cuda::getCurrentCUDAStream()>>>(
      out.data_ptr<float>(), A.data_ptr<float>(), B.data_ptr<float>(), s);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

void kron_linear_cuda(const at::Tensor& out, const at::Tensor& A, const at::Tensor& B, int64_t variant) {
  switch (variant) {
    case 0: return launch<1, false>(out, A, B);
    case 1: return launch<1, true>(out, A, B);
    case 2: return launch<2, false>(out, A, B);
    case 3: return launch<2, true>(out, A, B);
    case 4: return launch<4, false>(out, A, B);
    case 5: return launch<4, true>(out, A, B);
    case 6: return launch<8, false>(out, A, B);
    case 7: return launch<8, true>(out, A, B);
  }
  throw std::runtime_error("variant");
}
