// Family `ebm`: CUDA kernels and their launchers. ebm.cpp checks the arguments, allocates
// the outputs, makes inputs contiguous, composes the ATen parts (wide rows) and holds the device
// guard, the stream and the generator (a jk::CudaLaunch, cuda_launch.cuh); this file only launches
// kernels, and includes no tensor header, which keeps its cold nvcc time its own code's.
//
// Design (B rows of width D; floors from ANCHORS.md, B = 2^21, D = 16, float32):
// - Energies/scores of the local models (double_well, harmonic, rosenbrock, rastrigin, ackley):
//   memory-bound, a group of lanes per row, in ebm_local.cu.
// - The Gaussian ½dᵀPd for D <= 64: a lane group per row (16-byte loads), the row gathered by
//   shuffles, ½(P + Pᵀ) padded in shared memory (kernel comment below); float32 rows of 16 on
//   the tensor cores (gaussian16_mma_kernel); wider D: matmul (.cpp).
// - The one-launch chains hold a whole row per thread and go through a block tile: R consecutive rows (one per thread) are R·D
//   consecutive elements, copied with coalesced loads into shared memory (row stride kD + 1:
//   conflict-free row reads) and from there into the thread's registers; outputs go back the
//   same way. The width tier kD in {8, 16, 32, 64} (rows padded with zeros) keeps the row in
//   registers. ½(P + Pᵀ) sits in shared memory, read with warp-uniform addresses (broadcast).
// - langevin_step: each thread takes 4 consecutive elements = one Philox call (4 normals by
//   Box-Muller) and 16-byte loads of x and grad: memory-bound.
// - Chains: one launch for the whole chain; per step and element D FMAs (Gaussian; at D = 16 in
//   float32 on the tensor cores instead, ebm_langevin.cu and ebm_hmc.cu) + 1/4 Philox call, no
//   memory traffic between steps. Random numbers (ChainDraws, ebm_rows.cuh): subsequence = row,
//   counter = offset/4 + step-local index, so every (row, step, element) has its own draw and
//   the chain reserves exactly n_steps·ceil(D/4)·4 draws per row (HMC: + 4 per step); at D = 1
//   and 2 a row's normals are one flat stream instead, a Philox call serving 4/D steps (session 48).
// - Files: the local models' kernels are in ebm_local.cu, the chain kernels in ebm_langevin.cu (float32;
//   float64: ebm_langevin_f64.cu; both from ebm_langevin.cuh) and ebm_hmc.cu, the pieces they share (row
//   vectors, lane groups, the whole-row machinery of the chains and of the Gaussian here) in ebm_rows.cuh.
//   nvcc compiles a file in one process, and cicc, its optimizer, on one core: the 72 chain
//   instantiations (session 20) and the ~160 of the local models (session 27) were most of this file's
//   compile time; as five files, ninja compiles them at once.
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "cuda_launch.cuh"
#include "dependent_launch.cuh"  // jk::ptx_version
#include "ebm.h"
#include "ebm_mma.cuh"
#include "ebm_rows.cuh"
#include "elementwise_kernel.cuh"  // jk::Vec, jk::aligned16
#include "philox_cuda.cuh"

namespace ebm {

// ---------------------------------------------------------------- Gaussian energy / score, D <= kMax

// A group of G = kD / V lanes per row (16-byte loads, coalesced); lane l owns columns
// [l·V, l·V + V) and gathers the whole row by shuffles. Each lane computes its own outputs:
// Psym[j][my cols] is one 16-byte shared load, the same address across groups (broadcast).
// (A thread-per-row version through a tile measured 2-3x slower here on an H200.)
template <typename T, int kD, bool kScore>
__global__ void __launch_bounds__(256) gaussian_rows_kernel(const T* __restrict__ x, const T* __restrict__ mean,
                                                            const T* __restrict__ prec, T* __restrict__ out,
                                                            int64_t B, int D, bool vec) {
  using A = jk::opmath_t<T>;
  constexpr int V = int(16 / sizeof(T)) < kD ? int(16 / sizeof(T)) : kD;  // elements per lane
  constexpr int G = kD / V;                                                // lanes per row, <= 32
  constexpr int kRows = 32 / G;                                            // rows per warp
  constexpr int VA = int(16 / sizeof(A)) < V ? int(16 / sizeof(A)) : V;    // A's per shared load
  __shared__ __align__(16) A p[kD * kD];
  __shared__ A mu[kD];
  load_gaussian<T, A, kD>(p, mu, mean, prec, D);

  const int lane = threadIdx.x & 31, l = lane % G, first = lane - l, c0 = l * V;
  const int64_t warp = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  const int64_t n_warps = (static_cast<int64_t>(gridDim.x) * blockDim.x) >> 5;
  for (int64_t base = warp * kRows; base < B; base += n_warps * kRows) {
    const int64_t row = base + lane / G;
    const bool valid = row < B;
    A mine[V];  // this lane's slice of d = x − μ (zero past D)
    if (valid && vec) {
      const jk::Vec<T, V> v = *reinterpret_cast<const jk::Vec<T, V>*>(x + row * D + c0);
#pragma unroll
      for (int k = 0; k < V; ++k) mine[k] = static_cast<A>(v.val[k]) - mu[c0 + k];
    } else {
#pragma unroll
      for (int k = 0; k < V; ++k) mine[k] = (valid && c0 + k < D) ? static_cast<A>(x[row * D + c0 + k]) - mu[c0 + k] : A(0);
    }
    A d[kD];  // the whole row, gathered from the group
#pragma unroll
    for (int j = 0; j < kD; ++j) d[j] = __shfl_sync(kFullMask, mine[j % V], first + j / V);
    A s[V];  // (Psym d) at this lane's columns; Psym is symmetric, so row j gives column j
#pragma unroll
    for (int k = 0; k < V; ++k) s[k] = A(0);
#pragma unroll
    for (int j = 0; j < kD; ++j) {
#pragma unroll
      for (int k0 = 0; k0 < V; k0 += VA) {
        const jk::Vec<A, VA> pv = *reinterpret_cast<const jk::Vec<A, VA>*>(&p[j * kD + c0 + k0]);
#pragma unroll
        for (int k = 0; k < VA; ++k) s[k0 + k] += pv.val[k] * d[j];
      }
    }
    if (!kScore) {
      A e = A(0);
#pragma unroll
      for (int k = 0; k < V; ++k) e += mine[k] * s[k];
      e = group_sum(e, G);
      if (valid && l == 0) out[row] = static_cast<T>(A(0.5) * e);
    } else if (valid) {
      if (vec) {
        jk::Vec<T, V> o;
#pragma unroll
        for (int k = 0; k < V; ++k) o.val[k] = static_cast<T>(-s[k]);
        *reinterpret_cast<jk::Vec<T, V>*>(out + row * D + c0) = o;
      } else {
#pragma unroll
        for (int k = 0; k < V; ++k)
          if (c0 + k < D) out[row * D + c0 + k] = static_cast<T>(-s[k]);
      }
    }
  }
}

// ---------------------------------------------------------------- Gaussian energy / score, rows of G·V elements

// Transposes 16-byte chunks inside a group of G lanes (l = lane in the group): before, c[u] is
// chunk l of row u; after, c[u] is chunk u of row l (and back: it is an involution). One
// butterfly stage per bit o of the lane index; each moves the G/2 chunks whose index differs
// from the lane in bit o to lane l ^ o: log2(G)·G/2·4 shuffles of 32-bit words per lane.
template <int G>
__device__ __forceinline__ void group_transpose(uint4 (&c)[G], int l) {
#pragma unroll
  for (int o = G / 2; o > 0; o >>= 1) {
    const bool hi = l & o;
#pragma unroll
    for (int j = 0; j < G / 2; ++j) {
      const int lo_i = ((j & ~(o - 1)) << 1) | (j & (o - 1));  // j with a 0 inserted at bit o
      const int hi_i = lo_i | o;
      const uint4 s = hi ? c[lo_i] : c[hi_i];
      uint4 r;
      r.x = __shfl_xor_sync(kFullMask, s.x, o);
      r.y = __shfl_xor_sync(kFullMask, s.y, o);
      r.z = __shfl_xor_sync(kFullMask, s.z, o);
      r.w = __shfl_xor_sync(kFullMask, s.w, o);
      c[lo_i] = hi ? r : c[lo_i];
      c[hi_i] = hi ? c[hi_i] : r;
    }
  }
}

// The same transpose through the warp's own shared buffer of 32 rows × G chunks (g = the lane's
// group): a row's chunk j sits at j ^ (row / (32/G)), which spreads the stores of one warp
// instruction and the loads of each lane group over distinct banks. G stores, G loads and their
// addresses where the butterfly takes ~100 instructions per lane at G = 4 (16 shuffles, 48 selects,
// convergence checks). Session 17, H200, B = 2^21, D = 16: the Gaussian score 74.3 -> 70.2 us with
// a clean L2, but the Gaussian energy 40.5 -> 44.9 (45.2 with its next tile's loads placed before
// the shared loads, and as much at 64 registers), so the energies keep the butterfly.
template <int G>
__device__ __forceinline__ void warp_transpose(uint4* __restrict__ buffer, uint4 (&c)[G], int l, int g) {
  constexpr int kRpw = 32 / G;
  __syncwarp();  // the warp's previous reads of the buffer are done
#pragma unroll
  for (int u = 0; u < G; ++u) buffer[(u * kRpw + g) * G + (l ^ u)] = c[u];
  __syncwarp();
#pragma unroll
  for (int u = 0; u < G; ++u) c[u] = buffer[(l * kRpw + g) * G + (u ^ l)];
}

// A lane group's transpose of its G rows: through the warp's shared buffer when kShared, else by shuffles.
template <int G, bool kShared>
__device__ __forceinline__ void transpose_rows(uint4* __restrict__ buffer, uint4 (&c)[G], int l, int g) {
  if constexpr (kShared) {
    warp_transpose<G>(buffer, c, l, g);
  } else {
    group_transpose<G>(c, l);
  }
}

// Upper triangle of a D × D matrix packed by rows for vector loads of N: row i keeps the
// columns from floor(i / N)·N on (the ones left of i are zero), so every row starts aligned.
template <int D, int N>
struct Packed {
  __host__ __device__ static constexpr int first(int i) { return (i / N) * N; }
  __host__ __device__ static constexpr int offset(int i) {  // Σ over rows i' < i of D − first(i')
    return i * D - N * (N * (i / N) * (i / N - 1) / 2 + (i / N) * (i % N));
  }
  static constexpr int kSize = offset(D);
};

// Calls f(i, j, Pᵢⱼ) for every j >= i of the packed upper triangle q of a D × D matrix (shared
// memory, warp-uniform vector loads; the loops unroll, so i and j are constants in f).
template <int D, typename A, typename F>
__device__ __forceinline__ void for_upper(const A* q, F&& f) {
  constexpr int N = Lds<A>::N;
  using P = Packed<D, N>;
#pragma unroll
  for (int i = 0; i < D; ++i) {
#pragma unroll
    for (int j0 = P::first(i); j0 < D; j0 += N) {
      A pv[N];
      Lds<A>::vec(q + P::offset(i) + j0 - P::first(i), pv);
#pragma unroll
      for (int n = 0; n < N; ++n)
        if (j0 + n >= i) f(i, j0 + n, pv[n]);
    }
  }
}

// Rows of exactly D = G·V elements (G = 2, 4, 8; 16-byte vectors): loaded like local_tile_kernel
// (U = G·K coalesced 16-byte loads per lane before any math), then each block of G rows is
// transposed inside the lane group (group_transpose, or warp_transpose for wide score rows), so that
// lane l holds whole rows: K rows per thread. The math is then thread-per-row, with Psym read
// from shared memory at warp-uniform addresses (broadcast) and each shared load feeding K rows:
// of the symmetric Psym only the upper triangle is read (D(D+1)/2 values instead of D²):
//   energy ½dᵀPsym d = Σᵢ dᵢ (½Pᵢᵢdᵢ + Σⱼ>ᵢ Pᵢⱼdⱼ)              D(D+1)/2 + D FMAs per row
//   score −Psym d:  yᵢ += Pᵢⱼdⱼ, yⱼ += Pᵢⱼdᵢ (j > i), yᵢ += Pᵢᵢdᵢ    D² FMAs per row
// (the lane-group version gathered every row into every lane of its group, D shuffles and D
// shared loads per lane and row, which bound it at a third of the memory floor). Scores are
// transposed back and stored as the rows were loaded; an energy is one store per lane.
template <typename T, int V, int G, int K, bool kScore>
__global__ void __launch_bounds__(256) gaussian_tile_kernel(const T* __restrict__ x, const T* __restrict__ mean,
                                                            const T* __restrict__ prec, T* __restrict__ out,
                                                            int64_t B) {
  using A = jk::opmath_t<T>;
  using Vec = jk::Vec<T, V>;
  static_assert(sizeof(Vec) == sizeof(uint4), "16-byte chunks");
  constexpr int D = G * V, kRpw = 32 / G, kRows = 32 * K;
  using P = Packed<D, Lds<A>::N>;
  __shared__ __align__(16) A q[P::kSize];
  __shared__ A mu[D];
  // Scores of 4 or 8 chunks a row transpose through shared memory (warp_transpose says why); at
  // G = 2 the butterfly is one stage, and the buffer raised the bfloat16 score from 80 to 121 registers.
  constexpr bool kSharedTranspose = kScore && G >= 4;
  __shared__ uint4 transposes[256 / 32][kSharedTranspose ? 32 * G : 1];  // each warp's buffer
  uint4* const buffer = transposes[threadIdx.x >> 5];
  const int lane = threadIdx.x & 31, l = lane & (G - 1), g = lane / G;
  const int64_t warp = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  const int64_t stride = ((static_cast<int64_t>(gridDim.x) * blockDim.x) >> 5) * kRows;
  // The chunks of the tile of rows from `base` (zeros past B).
  const auto load_tile = [&](uint4 (&c)[K][G], int64_t base) {
#pragma unroll
    for (int k = 0; k < K; ++k) {
#pragma unroll
      for (int u = 0; u < G; ++u) {
        const int64_t row = base + (k * G + u) * kRpw + g;
        c[k][u] = row < B ? load_vector<uint4, !kScore>(x + row * D + l * V) : make_uint4(0, 0, 0, 0);
      }
    }
  };
  // Energies: software pipeline. The tile a warp works on was loaded one iteration earlier, so
  // its loads fly during the previous tile's math (the first one's during the Psym set-up
  // below) and a warp always has a tile of loads in flight. Scores load at the top of the loop:
  // with their y[D] the extra tile of registers would halve their occupancy (64 -> 87 regs).
  uint4 c[K][G];
  if constexpr (!kScore) load_tile(c, warp * kRows);

  for (int t = threadIdx.x; t < D * D; t += blockDim.x) {
    const int i = t / D, j = t % D;
    if (j >= P::first(i)) {
      const A sym = A(0.5) * (static_cast<A>(prec[i * D + j]) + static_cast<A>(prec[j * D + i]));
      q[P::offset(i) + j - P::first(i)] = j < i ? A(0) : (j == i && !kScore ? A(0.5) * sym : sym);
    }
  }
  for (int t = threadIdx.x; t < D; t += blockDim.x) mu[t] = static_cast<A>(mean[t]);
  __syncthreads();

  for (int64_t base = warp * kRows; base < B; base += stride) {
    if constexpr (kScore) load_tile(c, base);
    A d[K][D];  // d = x − μ of this lane's rows base + (k·G + l)·kRpw + g
#pragma unroll
    for (int k = 0; k < K; ++k) {
      transpose_rows<G, kSharedTranspose>(buffer, c[k], l, g);
#pragma unroll
      for (int u = 0; u < G; ++u) {
        const Vec v = *reinterpret_cast<const Vec*>(&c[k][u]);
#pragma unroll
        for (int j = 0; j < V; ++j) d[k][u * V + j] = static_cast<A>(v.val[j]) - mu[u * V + j];
      }
    }
    if constexpr (!kScore) {
      load_tile(c, base + stride);  // the next tile (no loads past B)
      A t[K][D];  // tᵢ = ½Pᵢᵢdᵢ + Σⱼ>ᵢ Pᵢⱼdⱼ (the diagonal is stored halved here)
#pragma unroll
      for (int k = 0; k < K; ++k) {
#pragma unroll
        for (int i = 0; i < D; ++i) t[k][i] = A(0);
      }
      for_upper<D>(q, [&](int i, int j, A p) {
#pragma unroll
        for (int k = 0; k < K; ++k) t[k][i] += p * d[k][j];
      });
#pragma unroll
      for (int k = 0; k < K; ++k) {
        A e = A(0);
#pragma unroll
        for (int i = 0; i < D; ++i) e += d[k][i] * t[k][i];
        const int64_t row = base + (k * G + l) * kRpw + g;
        if (row < B) out[row] = static_cast<T>(e);
      }
    } else {
      A y[K][D];
#pragma unroll
      for (int k = 0; k < K; ++k) {
#pragma unroll
        for (int i = 0; i < D; ++i) y[k][i] = A(0);
      }
      for_upper<D>(q, [&](int i, int j, A p) {
#pragma unroll
        for (int k = 0; k < K; ++k) {
          y[k][i] += p * d[k][j];
          if (j != i) y[k][j] += p * d[k][i];
        }
      });
#pragma unroll
      for (int k = 0; k < K; ++k) {
        uint4 o[G];
#pragma unroll
        for (int u = 0; u < G; ++u) {
          Vec v;
#pragma unroll
          for (int j = 0; j < V; ++j) v.val[j] = static_cast<T>(-y[k][u * V + j]);
          o[u] = *reinterpret_cast<const uint4*>(&v);
        }
        transpose_rows<G, kSharedTranspose>(buffer, o, l, g);
#pragma unroll
        for (int u = 0; u < G; ++u) {
          const int64_t row = base + (k * G + u) * kRpw + g;
          if (row < B) *reinterpret_cast<uint4*>(out + row * D + l * V) = o[u];
        }
      }
    }
  }
}

// Rows of exactly 16 on the tensor cores (sm_80+; float32, and since session 32 the scores of 16-bit
// rows, widened to float32, on which the FMA kernel ran at 78% of a copy's speed): a warp takes 16
// rows at a time and forms Y = d·Psym (d = x − μ) by ebm_mma.cuh (TF32 pieces, layout). The
// thread-per-row kernel above issues ~14 warp instructions per row (sm_90 SASS: the transpose,
// D(D+1)/2 + D FMAs, shared loads of Psym); this one ~8, half of them the TF32 splits.
// H200, B = 2^21, clean L2: energy 40.9 -> 37.2 us (83% -> 90% of the memory floor), score as fast
// as before (71.0 / 70.4 us); under do_bench both sit where a harmonic energy does (41-42 us).
// Energy: ½ Σ dⱼYⱼ over the lane's 4 columns, summed over the 4 lanes of a row; score: −Y, stored as
// x was loaded.

// Four consecutive elements of a row: 16 bytes of float32, 8 of a 16-bit type, loaded as they
// stand (Raw) and widened to float where the math needs them.
template <typename T>
struct Quad {
  static_assert(sizeof(T) == 4 || sizeof(T) == 2, "float32 or a 16-bit type");
  using Raw = std::conditional_t<sizeof(T) == 4, float4, uint2>;
  template <bool kEvictFirst>
  __device__ __forceinline__ static Raw load(const T* p) {
    return load_vector<Raw, kEvictFirst>(p);
  }
  __device__ __forceinline__ static float4 widen(const Raw& r) {
    if constexpr (sizeof(T) == 4) {
      return r;
    } else {
      const jk::Vec<T, 4> v = *reinterpret_cast<const jk::Vec<T, 4>*>(&r);
      return make_float4(static_cast<float>(v.val[0]), static_cast<float>(v.val[1]), static_cast<float>(v.val[2]),
                         static_cast<float>(v.val[3]));
    }
  }
  __device__ __forceinline__ static void store(T* p, float a, float b, float c, float d) {
    const float f[4] = {a, b, c, d};
    jk::Vec<T, 4> v;
#pragma unroll
    for (int k = 0; k < 4; ++k) v.val[k] = static_cast<T>(f[k]);
    *reinterpret_cast<jk::Vec<T, 4>*>(p) = v;
  }
};

// T: float32, or a 16-bit type (math in float32 all the same). U: 16-row tiles per warp and trip.
template <typename T, bool kScore, int U>
__global__ void __launch_bounds__(256) gaussian16_mma_kernel(const T* __restrict__ x, const T* __restrict__ mean,
                                                             const T* __restrict__ prec, T* __restrict__ out,
                                                             int64_t B) {
  using Raw = typename Quad<T>::Raw;
  const tc16::WarpTiles<U> w;
  const int g = w.g, t = w.t;
  const float4 mu = Quad<T>::widen(Quad<T>::template load<false>(mean + 4 * t));
  // The rows base + 16u + g + 8h, columns 4t..4t+3 (zeros past B).
  const auto load_rows = [&](Raw (&v)[U][2], int64_t base) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int64_t row = base + 16 * u + g + 8 * h;
        v[u][h] = row < B ? Quad<T>::template load<!kScore>(x + row * 16 + 4 * t) : Raw{};
      }
    }
  };
  // Energies: software pipeline, as in gaussian_tile_kernel: the next trip's rows load during this
  // trip's math, so a warp always has loads in flight (the first version, without it and with cvt
  // splits, took 45.1 us where the FMA kernel took 40.9, clean L2, H200). Scores load at the top of
  // the trip: their stores keep memory busy meanwhile.
  Raw next[U][2];
  if constexpr (!kScore) load_rows(next, w.first);
  const tc16::PsymFragments psym(prec, g, t);  // set up while the first rows load
  for (int64_t base = w.first; base < B; base += w.stride) {
    Raw v[U][2];
    if constexpr (kScore) {
      load_rows(v, base);
    } else {
#pragma unroll
      for (int u = 0; u < U; ++u) v[u][0] = next[u][0], v[u][1] = next[u][1];
      load_rows(next, base + w.stride);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      float d[2][4];  // d[h][c] = (x − μ) at row g + 8h, column 4t + c
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const float4 xh = Quad<T>::widen(v[u][h]);
        d[h][0] = xh.x - mu.x;
        d[h][1] = xh.y - mu.y;
        d[h][2] = xh.z - mu.z;
        d[h][3] = xh.w - mu.w;
      }
      float y[2][4];  // y[n]: n-tile n's accumulators (g, 4t+2n), (g, 4t+2n+1), (g+8, ...), (g+8, ...)
      tc16::psym_product(d, psym, y);
      if constexpr (kScore) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int64_t row = base + 16 * u + g + 8 * h;
          if (row < B)
            Quad<T>::store(out + row * 16 + 4 * t, -y[0][2 * h], -y[0][2 * h + 1], -y[1][2 * h], -y[1][2 * h + 1]);
        }
      } else {
        float e[2];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          e[h] = d[h][0] * y[0][2 * h] + d[h][1] * y[0][2 * h + 1] + d[h][2] * y[1][2 * h] + d[h][3] * y[1][2 * h + 1];
          e[h] += __shfl_xor_sync(kFullMask, e[h], 1);
          e[h] += __shfl_xor_sync(kFullMask, e[h], 2);
        }
        // Lane t = 0 stores row g, lane t = 1 row g + 8.
        const int64_t row = base + 16 * u + g + 8 * t;
        if (t < 2 && row < B) out[row] = static_cast<T>(0.5f * (t == 0 ? e[0] : e[1]));
      }
    }
  }
}

// True when it launched (D = 16, 16-byte aligned x, mean and score, a build with sm_80 code). Rows
// per warp and trip, for float32: 2 tiles of 16 for energies (their pipeline holds two sets, and 4
// measured no faster: 37.8 against 37.2 us, clean L2, H200), 4 for scores. 16-bit scores take 8
// tiles, for the same bytes in flight. 16-bit energies stay on the FMA kernel, which is quicker for
// them (bfloat16, B = 2^21, H200: 30.9 us there, 36.5 here).
template <typename T>
bool launch_gaussian16_mma(jk::CudaLaunch& launch, const jk::CudaTensor& x, const jk::CudaTensor& mean,
                           const jk::CudaTensor& prec, const jk::CudaTensor& out, bool score) {
  constexpr bool kFloat = sizeof(T) == 4;
  constexpr int kEnergyTiles = 2, kScoreTiles = kFloat ? 4 : 8, kThreads = 256;
  auto kernel = gaussian16_mma_kernel<T, true, kScoreTiles>;
  if constexpr (kFloat) {
    if (!score) kernel = gaussian16_mma_kernel<T, false, kEnergyTiles>;
  } else if (!score) {
    return false;
  }
  // A build for archs before sm_80 alone compiles the mma out.
  if (jk::ptx_version(launch, kernel) < 80 || !jk::aligned16(x.const_data_ptr()) ||
      !jk::aligned16(mean.const_data_ptr()) || (score && !jk::aligned16(out.mutable_data_ptr()))) {
    return false;
  }
  const int64_t B = x.size(0), rows_per_block = (kThreads / 32) * 16 * (score ? kScoreTiles : kEnergyTiles);
  const int64_t blocks = resident_grid(launch, kernel, kThreads, (B + rows_per_block - 1) / rows_per_block);
  kernel<<<blocks, kThreads, 0, launch.stream>>>(x.const_data_ptr<T>(), mean.const_data_ptr<T>(),
                                                 prec.const_data_ptr<T>(), out.mutable_data_ptr<T>(), B);
  JK_CUDA_LAUNCH_CHECK(launch);
  return true;
}

template <typename T, int V, int G, bool kScore>
void launch_gaussian_tile(jk::CudaLaunch& launch, const jk::CudaTensor& x, const jk::CudaTensor& mean,
                          const jk::CudaTensor& prec, const jk::CudaTensor& out) {
  constexpr int K = G >= 4 ? 1 : 4 / G, kThreads = 256;
  const int64_t B = x.size(0), rows_per_block = (kThreads / 32) * 32 * K;
  const auto kernel = gaussian_tile_kernel<T, V, G, K, kScore>;
  const int64_t blocks = resident_grid(launch, kernel, kThreads, (B + rows_per_block - 1) / rows_per_block);
  kernel<<<blocks, kThreads, 0, launch.stream>>>(x.const_data_ptr<T>(), mean.const_data_ptr<T>(),
                                                 prec.const_data_ptr<T>(), out.mutable_data_ptr<T>(), B);
  JK_CUDA_LAUNCH_CHECK(launch);
}

void gaussian_rows_cuda(jk::CudaLaunch& launch, const jk::CudaTensor& x, const jk::CudaTensor& mean,
                        const jk::CudaTensor& precision, const jk::CudaTensor& out, bool score) {
  const int64_t B = x.size(0), D = x.size(1);
  const jk::CudaTensor& prec = precision;
  jk::dispatch_float(x.scalar_type(), [&](auto zero) {
    using T = decltype(zero);
    constexpr int kV = 16 / sizeof(T);
    if constexpr (!std::is_same_v<T, double>) {
      if (D == 16 && launch_gaussian16_mma<T>(launch, x, mean, prec, out, score)) return;
    }
    const auto tile = [&](auto groups) {
      constexpr int G = decltype(groups)::value;
      score ? launch_gaussian_tile<T, kV, G, true>(launch, x, mean, prec, out)
            : launch_gaussian_tile<T, kV, G, false>(launch, x, mean, prec, out);
    };
    const bool vectors =
        D % kV == 0 && jk::aligned16(x.const_data_ptr<T>()) && (!score || jk::aligned16(out.mutable_data_ptr()));
    if (vectors && with_row_vectors(D, kV, tile)) return;
    with_tier<64>(D, [&](auto tier) {  // cuda_gaussian_max_d
      constexpr int kD = decltype(tier)::value;
      constexpr int V = int(16 / sizeof(T)) < kD ? int(16 / sizeof(T)) : kD;
      constexpr int kThreads = 256;
      const bool vec = D == kD && jk::aligned16(x.const_data_ptr<T>()) && jk::aligned16(out.mutable_data_ptr());
      const int64_t rows_per_block = (kThreads / 32) * (32 / (kD / V));
      const auto kernel = score ? gaussian_rows_kernel<T, kD, true> : gaussian_rows_kernel<T, kD, false>;
      const int64_t blocks = resident_grid(launch, kernel, kThreads, (B + rows_per_block - 1) / rows_per_block);
      kernel<<<blocks, kThreads, 0, launch.stream>>>(x.const_data_ptr<T>(), mean.const_data_ptr<T>(),
                                                     prec.const_data_ptr<T>(), out.mutable_data_ptr<T>(), B, int(D),
                                                     vec);
      JK_CUDA_LAUNCH_CHECK(launch);
    });
  });
}

// ---------------------------------------------------------------- Langevin update (elementwise + noise)

// out = x + a·g + τ·ε (clamped); four consecutive elements (a group) per Philox call (subsequence 0,
// counter = offset/4 + group). x and out may be the same memory. When traj is given the result is also
// written there. Tiles in the shared elementwise launcher's shape (elementwise_kernel.cuh): jk::kThreads
// threads, jk::kUnroll groups each, every load of the tile issued before the noise is drawn, one tile per
// block up to 256 blocks per SM. Until session 33 each thread drew its noise, then loaded, then stored,
// one group at a time in a resident grid; the same draws now take 98.5 us instead of 110.0 at
// B = 2^21, D = 16, float32 (H200, do_bench: 86% -> 97% of the memory floor), bfloat16 82.3 -> 76.7.
// The loads of a group are now in flight while its noise is drawn.
template <typename T>
__global__ void __launch_bounds__(jk::kThreads)
    langevin_update_kernel(const T* x, const T* __restrict__ g, T* out, T* traj, int64_t n,
                           LangevinUpdate<jk::opmath_t<T>> upd, at::PhiloxCudaState state, bool vec) {
  using A = jk::opmath_t<T>;
  using Vec4 = jk::Vec<T, 4>;
  constexpr int64_t kTile = int64_t{jk::kThreads} * jk::kUnroll;
  const jk::PhiloxSeed seed = jk::unpack_philox(state);
  const int64_t groups = (n + 3) / 4, vector_groups = vec ? n / 4 : 0;
  for (int64_t base = static_cast<int64_t>(blockIdx.x) * kTile + threadIdx.x; base < groups;
       base += static_cast<int64_t>(gridDim.x) * kTile) {
    Vec4 xv[jk::kUnroll], gv[jk::kUnroll];
#pragma unroll
    for (int u = 0; u < jk::kUnroll; ++u) {
      const int64_t q = base + u * jk::kThreads;
      if (q < vector_groups) {
        xv[u] = reinterpret_cast<const Vec4*>(x)[q];
        gv[u] = reinterpret_cast<const Vec4*>(g)[q];
      }
    }
#pragma unroll
    for (int u = 0; u < jk::kUnroll; ++u) {
      const int64_t q = base + u * jk::kThreads;
      if (q >= groups) break;
      const jk::Float4 z = jk::normal4(seed.seed, seed.offset / 4 + q);
      const int64_t i0 = 4 * q;
      if (q < vector_groups) {
        Vec4 o;
#pragma unroll
        for (int k = 0; k < 4; ++k)
          o.val[k] = static_cast<T>(upd(static_cast<A>(xv[u].val[k]), static_cast<A>(gv[u].val[k]),
                                        static_cast<A>(lane(z, k))));
        reinterpret_cast<Vec4*>(out)[q] = o;
        if (traj != nullptr) reinterpret_cast<Vec4*>(traj)[q] = o;
      } else {
        for (int k = 0; k < 4 && i0 + k < n; ++k) {
          const T o = static_cast<T>(upd(static_cast<A>(x[i0 + k]), static_cast<A>(g[i0 + k]), static_cast<A>(lane(z, k))));
          out[i0 + k] = o;
          if (traj != nullptr) traj[i0 + k] = o;
        }
      }
    }
  }
}

void langevin_update_cuda(jk::CudaLaunch& launch, const jk::CudaTensor& x, const jk::CudaTensor& g,
                          const jk::CudaTensor& out, const jk::CudaTensor& traj, const LangevinUpdate<double>& u) {
  const int64_t n = x.numel();
  const at::PhiloxCudaState state = launch.philox(n);
  jk::dispatch_float(x.scalar_type(), [&](auto zero) {
    using T = decltype(zero);
    using A = jk::opmath_t<T>;
    const LangevinUpdate<A> upd{A(u.a), A(u.tau), A(u.lo), A(u.hi), u.clamp};
    T* traj_ptr = traj.mutable_data_ptr<T>();  // null without a trajectory
    const auto ok = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % (4 * sizeof(T)) == 0; };
    const bool vec =
        ok(x.const_data_ptr<T>()) && ok(g.const_data_ptr<T>()) && ok(out.mutable_data_ptr()) && ok(traj_ptr);
    const int64_t blocks = grid_size(launch, (n + 3) / 4, int64_t{jk::kThreads} * jk::kUnroll, 256);
    langevin_update_kernel<T><<<blocks, jk::kThreads, 0, launch.stream>>>(
        x.const_data_ptr<T>(), g.const_data_ptr<T>(), out.mutable_data_ptr<T>(), traj_ptr, n, upd, state, vec);
    JK_CUDA_LAUNCH_CHECK(launch);
  });
}

}  // namespace ebm

