#include <ATen/core/Tensor.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>
#include <algorithm>
#include "elementwise.cuh"

struct Args { int64_t m, n, p, q, cols; };

template <bool kStream, bool kInterleave, bool kChunkFastest>
__global__ void __launch_bounds__(256) kron_var(float* __restrict__ out, const float* __restrict__ A,
                                                const float* __restrict__ B, Args s, int64_t slots, int64_t chunks,
                                                int64_t rows_per_chunk) {
  const int64_t slot_block = kChunkFastest ? blockIdx.y : blockIdx.x;
  const int64_t chunk = kChunkFastest ? blockIdx.x : blockIdx.y;
  const int64_t slot = slot_block * blockDim.x + threadIdx.x;
  if (slot >= slots) return;
  const int64_t vcols = s.cols / 4;
  const int64_t bk = slot / vcols, v = slot - bk * vcols;
  const int64_t b = bk / s.p, k = bk - b * s.p;
  const int64_t j = (v * 4) / s.q, l = v * 4 - j * s.q;
  const float4 bv = *reinterpret_cast<const float4*>(B + bk * s.q + l);
  int64_t i, i_end, istep;
  if (kInterleave) {
    i = chunk; i_end = s.m; istep = chunks;
  } else {
    i = chunk * rows_per_chunk; i_end = i + rows_per_chunk < s.m ? i + rows_per_chunk : s.m; istep = 1;
  }
  const float* a = A + (b * s.m + i) * s.n + j;
  float* o = out + ((b * s.m + i) * s.p + k) * s.cols + v * 4;
  const int64_t a_step = istep * s.n, o_step = istep * s.p * s.cols;
#pragma unroll 4
  for (; i < i_end; i += istep, a += a_step, o += o_step) {
    const float ai = *a;
    const float4 r = make_float4(ai * bv.x, ai * bv.y, ai * bv.z, ai * bv.w);
    if (kStream) __stcs(reinterpret_cast<float4*>(o), r); else *reinterpret_cast<float4*>(o) = r;
  }
}

template <bool kStream, bool kInterleave, bool kChunkFastest>
void launch(const at::Tensor& out, const at::Tensor& A, const at::Tensor& B, int64_t chunks) {
  Args s{A.size(1), A.size(2), B.size(1), B.size(2), A.size(2) * B.size(2)};
  const int64_t slots = out.size(0) * s.p * (s.cols / 4);
  const int64_t sms = jk::multiprocessor_count(out.get_device());
  if (chunks <= 0) chunks = std::clamp<int64_t>((sms * 2048 * 4 + slots - 1) / slots, 1, std::min<int64_t>(s.m, 65535));
  chunks = std::min<int64_t>(chunks, s.m);
  const int64_t rows_per_chunk = (s.m + chunks - 1) / chunks;
  if (!kInterleave) chunks = (s.m + rows_per_chunk - 1) / rows_per_chunk;
  const int64_t slot_blocks = (slots + 255) / 256;
  const dim3 grid = kChunkFastest ? dim3(chunks, slot_blocks) : dim3(slot_blocks, chunks);
  kron_var<kStream, kInterleave, kChunkFastest><<<grid, 256, 0, c10::cuda::getCurrentCUDAStream()>>>(
      out.mutable_data_ptr<float>(), A.const_data_ptr<float>(), B.const_data_ptr<float>(), s, slots, chunks, rows_per_chunk);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

void kron_variant_cuda(const at::Tensor& out, const at::Tensor& A, const at::Tensor& B, int64_t variant, int64_t chunks) {
  switch (variant) {
    case 0: return launch<true, false, false>(out, A, B, chunks);
    case 1: return launch<false, false, false>(out, A, B, chunks);
    case 2: return launch<true, true, false>(out, A, B, chunks);
    case 3: return launch<false, true, false>(out, A, B, chunks);
    case 4: return launch<true, false, true>(out, A, B, chunks);
    case 5: return launch<false, false, true>(out, A, B, chunks);
    case 6: return launch<true, true, true>(out, A, B, chunks);
    case 7: return launch<false, true, true>(out, A, B, chunks);
  }
  TORCH_CHECK(false, "variant 0..7");
}
