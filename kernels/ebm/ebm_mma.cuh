// Family `ebm`, CUDA: Y = (x − μ)·Psym for rows of exactly 16 float32 values on the tensor cores (sm_80+),
// 16 rows per warp; shared by the Gaussian energy and score (ebm.cu) and the Gaussian Langevin and HMC
// chains (ebm_langevin.cu, ebm_hmc.cu). mma.m16n8k8 in TF32; for float32 accuracy each operand is split
// into two TF32 parts and three of the four products are summed in float32 (d·P ≈ dₕPₕ + dₕPₗ + dₗPₕ:
// relative error ~2⁻²¹, against the 2⁻²⁴ of float32 FMAs). Infinite inputs give NaN (inf − inf in the
// split), where FMA kernels may give ±inf.
// Layout: lane (g, t) = (lane / 4, lane % 4) holds columns 4t..4t+3 of rows g and g + 8 as they stand
// in memory (16-byte loads, 512 contiguous bytes a warp instruction). The mma's k and n indices are
// permuted so that this is already its A fragment and so that its accumulators hold Y at the same
// columns: k-step s reads columns 4t + 2s and 4t + 2s + 1, n-tile n writes columns 4t + 2n and
// 4t + 2n + 1. Psym's fragments (permuted the same way, split hi/lo) sit in 16 registers.
#pragma once
#include <cstdint>
#include <type_traits>

#include "bits.h"
#include "ebm_rows.cuh"            // ModelSpec, resident_grid
#include "elementwise_kernel.cuh"  // jk::aligned16

namespace ebm {
namespace tc16 {
// Logical column c (0..7) of k-step s / n-tile n -> column of the row in memory.
__host__ __device__ constexpr int k_column(int s, int c) { return 4 * (c & 3) + 2 * s + (c >> 2); }
__host__ __device__ constexpr int n_column(int n, int c) { return 4 * (c >> 1) + 2 * n + (c & 1); }

// v ≈ hi + lo, both TF32 (the top 19 bits of a float32): hi is v rounded to TF32 (half away from
// zero, by integer ops rather than cvt.rna.tf32, a conversion-unit instruction), lo the exact rest,
// truncated to TF32 (|error| < 2⁻²¹|v|).
struct Split {
  uint32_t hi, lo;
  __device__ __forceinline__ explicit Split(float v)
      : hi((jk::same_bits<uint32_t>(v) + 0x1000u) & 0xffffe000u),
        lo(jk::same_bits<uint32_t>(v - jk::same_bits<float>(hi)) & 0xffffe000u) {}
  Split() = default;
};

// c += a·b for one 16x8x8 step.
__device__ __forceinline__ void mma(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                    uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
#endif
}

// Lane (g, t)'s fragments of Psym = ½(P + Pᵀ) (16 x 16, row-major P of any float type), split hi/lo:
// b[s][n][h] = Psym[k_column(s, t + 4h)][n_column(n, g)].
struct PsymFragments {
  Split b[2][2][2];
  template <typename T>
  __device__ __forceinline__ PsymFragments(const T* __restrict__ prec, int g, int t) {
#pragma unroll
    for (int s = 0; s < 2; ++s) {
#pragma unroll
      for (int n = 0; n < 2; ++n) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int i = k_column(s, t + 4 * h), j = n_column(n, g);
          b[s][n][h] = Split(0.5f * (static_cast<float>(prec[i * 16 + j]) + static_cast<float>(prec[j * 16 + i])));
        }
      }
    }
  }
};

// y = d·Psym for 16 rows: d[h][c] = (x − μ) at row g + 8h, column 4t + c (the lane's); y[n] holds n-tile n's
// accumulators: (g, 4t+2n), (g, 4t+2n+1), (g+8, 4t+2n), (g+8, 4t+2n+1).
__device__ __forceinline__ void psym_product(const float (&d)[2][4], const PsymFragments& p, float (&y)[2][4]) {
#pragma unroll
  for (int n = 0; n < 2; ++n) y[n][0] = y[n][1] = y[n][2] = y[n][3] = 0.0f;
#pragma unroll
  for (int s = 0; s < 2; ++s) {
    // A fragment of k-step s: (g, t), (g + 8, t), (g, t + 4), (g + 8, t + 4) = columns 4t + 2s, 4t + 2s + 1
    const Split a0(d[0][2 * s]), a1(d[1][2 * s]), a2(d[0][2 * s + 1]), a3(d[1][2 * s + 1]);
#pragma unroll
    for (int n = 0; n < 2; ++n) {
      mma(y[n], a0.lo, a1.lo, a2.lo, a3.lo, p.b[s][n][0].hi, p.b[s][n][1].hi);
      mma(y[n], a0.hi, a1.hi, a2.hi, a3.hi, p.b[s][n][0].lo, p.b[s][n][1].lo);
      mma(y[n], a0.hi, a1.hi, a2.hi, a3.hi, p.b[s][n][0].hi, p.b[s][n][1].hi);
    }
  }
}

// The Gaussian's gradient Psym·(x − μ) for 16 rows as the lane holds them (x[h]: columns 4t..4t+3 of row
// g + 8h), into grad[h] alike; d = x − μ is left for the energy, ½ Σ dⱼ·gradⱼ.
__device__ __forceinline__ void gaussian_gradient(const float4 (&x)[2], const float4& mu, const PsymFragments& p,
                                                  float (&d)[2][4], float4 (&grad)[2]) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    d[h][0] = x[h].x - mu.x;
    d[h][1] = x[h].y - mu.y;
    d[h][2] = x[h].z - mu.z;
    d[h][3] = x[h].w - mu.w;
  }
  float y[2][4];
  psym_product(d, p, y);
#pragma unroll
  for (int h = 0; h < 2; ++h) grad[h] = make_float4(y[0][2 * h], y[0][2 * h + 1], y[1][2 * h], y[1][2 * h + 1]);
}

// Lane (g, t) of a warp that takes U tiles of 16 rows at a time in a grid-stride loop: its first row and
// the stride, for `for (int64_t base = w.first; base < B; base += w.stride)`.
template <int U>
struct WarpTiles {
  int g = (threadIdx.x & 31) >> 2, t = threadIdx.x & 3;
  int64_t first = ((static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5) * 16 * U;
  int64_t stride = ((static_cast<int64_t>(gridDim.x) * blockDim.x) >> 5) * 16 * U;
};

// A warp's U tiles of 16 rows from row `base` of a (B, 16) float32 matrix, as lane (g, t) holds them:
// x[u][h] = columns 4t..4t+3 of row base + 16u + g + 8h (zeros past B), and back (rows past B not stored).
template <int U>
__device__ __forceinline__ void load_rows(float4 (&x)[U][2], const float* __restrict__ src, int64_t base, int64_t B,
                                          int g, int t) {
#pragma unroll
  for (int u = 0; u < U; ++u) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t row = base + 16 * u + g + 8 * h;
      x[u][h] = row < B ? reinterpret_cast<const float4*>(src + row * 16)[t] : make_float4(0.f, 0.f, 0.f, 0.f);
    }
  }
}

template <int U>
__device__ __forceinline__ void store_rows(const float4 (&x)[U][2], float* __restrict__ dst, int64_t base, int64_t B,
                                           int g, int t) {
#pragma unroll
  for (int u = 0; u < U; ++u) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t row = base + 16 * u + g + 8 * h;
      if (row < B) reinterpret_cast<float4*>(dst + row * 16)[t] = x[u][h];
    }
  }
}

// ---------------------------------------------------------------- the chains on these tiles (host side)

// Whether a chain takes the tensor-core kernels: the Gaussian, D = 16, float32, 16-byte aligned x, out and
// mean (a trajectory comes from at::empty). The caller also checks the build has sm_80 code.
inline bool gaussian16_chain(const ModelSpec& spec, const jk::CudaTensor& x, const jk::CudaTensor& out,
                             const jk::CudaTensor& mean) {
  return spec.kind == Model::Gaussian && x.size(1) == 16 && x.scalar_type() == jk::DType::f32 &&
         jk::aligned16(x.const_data_ptr()) && jk::aligned16(out.const_data_ptr()) &&
         jk::aligned16(mean.const_data_ptr());
}

constexpr int kChainThreads = 128;  // per block of the chain kernels (32, 64 and 128 timed the same)

// Calls f(std::integral_constant<int, U>{}) with U, the tiles of 16 rows per warp for B rows: as many (4, 2
// or 1) as leave the grid at least 8 warps per SM. Session 33: at B = 2^21 4 tiles took one Langevin step in
// 81.5 us where 1 took 97; at B = 65536, 100 steps, 2 tiles 203 us, 4 tiles 216, 1 tile 224.5; at B = 4096
// 1 tile 47 us, 4 tiles 155.
template <typename F>
void with_chain_tiles(int64_t B, int multiprocessors, F&& f) {
  const int64_t rows_for_8_warps_per_sm = int64_t{16} * 8 * multiprocessors;
  if (B >= 4 * rows_for_8_warps_per_sm) {
    f(std::integral_constant<int, 4>{});
  } else if (B >= 2 * rows_for_8_warps_per_sm) {
    f(std::integral_constant<int, 2>{});
  } else {
    f(std::integral_constant<int, 1>{});
  }
}

// Blocks of kChainThreads for B rows in tiles of U per warp: at most one resident wave of `kernel`, which loops.
template <int U, typename Kernel>
int64_t chain_blocks(const jk::CudaLaunch& launch, Kernel kernel, int64_t B) {
  const int64_t rows_per_block = (kChainThreads / 32) * 16 * U;
  return resident_grid(launch, kernel, kChainThreads, (B + rows_per_block - 1) / rows_per_block);
}
}  // namespace tc16
}  // namespace ebm
