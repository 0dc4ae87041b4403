// Session 52: is Philox4x32-10 cheaper with one wide multiply (mul.wide.u32: lo and hi in one instruction) than
// with the two 32-bit multiplies kernels/common/philox.h uses (a * b and __umulhi)? Each thread runs `calls`
// Philox calls on consecutive counters and XORs the outputs into one word (so nothing is optimized away);
// timed with events, best of 20 launches. Build: nvcc -O3 -arch=sm_90 philox_probe.cu -o philox_probe
#include <cstdint>
#include <cstdio>
#include <cuda_runtime.h>

struct U4 { uint32_t x, y, z, w; };

__device__ __forceinline__ uint32_t mulhilo_two(uint32_t a, uint32_t b, uint32_t* hi) {
  *hi = __umulhi(a, b);
  return a * b;
}

__device__ __forceinline__ uint32_t mulhilo_wide(uint32_t a, uint32_t b, uint32_t* hi) {
  uint32_t lo, h;
  asm("{\n\t.reg .u64 p;\n\tmul.wide.u32 p, %2, %3;\n\tmov.b64 {%0, %1}, p;\n\t}" : "=r"(lo), "=r"(h) : "r"(a), "r"(b));
  *hi = h;
  return lo;
}

template <bool kWide>
__device__ __forceinline__ U4 philox(U4 c, const uint32_t* k0, const uint32_t* k1) {
#pragma unroll
  for (int r = 0; r < 10; ++r) {
    uint32_t hi0, hi1, lo0, lo1;
    if (kWide) {
      lo0 = mulhilo_wide(0xD2511F53u, c.x, &hi0);
      lo1 = mulhilo_wide(0xCD9E8D57u, c.z, &hi1);
    } else {
      lo0 = mulhilo_two(0xD2511F53u, c.x, &hi0);
      lo1 = mulhilo_two(0xCD9E8D57u, c.z, &hi1);
    }
    c = U4{hi1 ^ c.y ^ k0[r], lo1, hi0 ^ c.w ^ k1[r], lo0};
  }
  return c;
}

template <bool kWide>
__global__ void __launch_bounds__(256) philox_kernel(uint32_t* out, uint64_t seed, int calls) {
  uint32_t k0[10], k1[10];
  k0[0] = static_cast<uint32_t>(seed);
  k1[0] = static_cast<uint32_t>(seed >> 32);
#pragma unroll
  for (int r = 1; r < 10; ++r) {
    k0[r] = k0[r - 1] + 0x9E3779B9u;
    k1[r] = k1[r - 1] + 0xBB67AE85u;
  }
  const uint32_t t = blockIdx.x * blockDim.x + threadIdx.x;
  uint32_t acc = 0;
#pragma unroll 2
  for (int i = 0; i < calls; ++i) {
    const U4 r = philox<kWide>(U4{static_cast<uint32_t>(i), 0u, t, 0u}, k0, k1);
    acc ^= r.x ^ r.y ^ r.z ^ r.w;
  }
  out[t] = acc;
}

template <bool kWide>
float time_ms(uint32_t* out, int blocks, int calls) {
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  float best = 1e9f;
  for (int rep = 0; rep < 20; ++rep) {
    cudaEventRecord(a);
    philox_kernel<kWide><<<blocks, 256>>>(out, 0x1234567890abcdefull + rep, calls);
    cudaEventRecord(b);
    cudaEventSynchronize(b);
    float ms;
    cudaEventElapsedTime(&ms, a, b);
    if (ms < best) best = ms;
  }
  return best;
}

int main() {
  int sms;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  const int blocks = sms * 8, calls = 1024;
  uint32_t* out;
  cudaMalloc(&out, sizeof(uint32_t) * blocks * 256);
  // Same outputs from both forms (a check that the wide form computes Philox).
  philox_kernel<false><<<blocks, 256>>>(out, 42, 3);
  uint32_t want[4], got[4];
  cudaMemcpy(want, out, sizeof(want), cudaMemcpyDeviceToHost);
  philox_kernel<true><<<blocks, 256>>>(out, 42, 3);
  cudaMemcpy(got, out, sizeof(got), cudaMemcpyDeviceToHost);
  printf("same outputs: %s\n", (want[0] == got[0] && want[3] == got[3]) ? "yes" : "NO");
  for (int round = 0; round < 3; ++round) {
    const float two = time_ms<false>(out, blocks, calls), wide = time_ms<true>(out, blocks, calls);
    const double n = double(blocks) * 256 * calls;
    printf("round %d: two 32-bit multiplies %.3f ms (%.1f G calls/s), mul.wide %.3f ms (%.1f G calls/s): %.2fx\n",
           round, two, n / two / 1e6, wide, n / wide / 1e6, two / wide);
  }
  cudaFree(out);
  return 0;
}
