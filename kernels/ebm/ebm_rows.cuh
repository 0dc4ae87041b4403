// ebm's CUDA half, the parts its translation units share: grid sizing, 16-byte row vectors and lane
// groups (ebm.cu's Gaussian and ebm_local.cu's local models), width tiers, the block tile that stages
// rows through shared memory, and a model's view of a row held in registers (used by ebm.cu's Gaussian
// for D <= 64 and by the one-launch chains in ebm_langevin.cuh and ebm_hmc.cu). The kernels live in
// five files so that nvcc, one process per file, compiles them at once (ebm.cu says why).
#pragma once
#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "cuda_launch.cuh"
#include "ebm.h"

namespace ebm {

// Blocks for `work` units of `per_block` each, capped at what fills the GPU `per_sm` times.
inline int64_t grid_size(const jk::CudaLaunch& launch, int64_t work, int64_t per_block, int per_sm) {
  const int64_t want = (work + per_block - 1) / per_block;
  return std::max<int64_t>(1, std::min<int64_t>(want, int64_t(launch.multiprocessors) * per_sm));
}

// ---------------------------------------------------------------- row vectors and lane groups

constexpr unsigned kFullMask = 0xffffffffu;

// Blocks of `threads` threads for `want` blocks of work in a grid-stride kernel: at most one
// wave of what fits on the GPU at once (from the kernel's registers and shared memory), so no
// block waits for a second wave while the first idles on its last rows (grid-stride loops
// give every block the same share; a partial second wave doubles the time of its blocks).
template <typename Kernel>
int64_t resident_grid(const jk::CudaLaunch& launch, Kernel kernel, int threads, int64_t want) {
  const int64_t wave = int64_t(jk::blocks_per_sm(launch, kernel, threads)) * launch.multiprocessors;
  return std::max<int64_t>(1, std::min<int64_t>(want, wave));
}

// 16-byte (or 8-byte) loads of x. Energies read x with ld.global.cs (evict-first: x is read once, so
// its lines should be the first to leave L2); scores use plain loads and stores, which measured faster
// for them on the H200 (session-6 A/B, benchmarks/results/session6/ebm_ab.log), while the energies
// lost time without the hint.
template <typename V, bool kEvictFirst>
__device__ __forceinline__ V load_vector(const void* p) {
  static_assert(sizeof(V) == sizeof(uint4) || sizeof(V) == sizeof(uint2), "16- or 8-byte vectors");
  using U = std::conditional_t<sizeof(V) == sizeof(uint4), uint4, uint2>;
  const U u = kEvictFirst ? __ldcs(reinterpret_cast<const U*>(p)) : *reinterpret_cast<const U*>(p);
  return *reinterpret_cast<const V*>(&u);
}

// The sum of v over this lane's group of G lanes (a power of two, <= 32), in every lane of the group.
template <typename A>
__device__ __forceinline__ A group_sum(A v, int G) {
  for (int offset = G / 2; offset > 0; offset >>= 1) v += __shfl_xor_sync(kFullMask, v, offset);
  return v;
}

// Calls f(std::integral_constant<int, G>) when a row of D elements is G ∈ {2, 4, 8} vectors of
// V elements; returns false (and calls nothing) otherwise.
template <typename F>
bool with_row_vectors(int64_t D, int V, F&& f) {
  if (D == 2 * V) return f(std::integral_constant<int, 2>{}), true;
  if (D == 4 * V) return f(std::integral_constant<int, 4>{}), true;
  if (D == 8 * V) return f(std::integral_constant<int, 8>{}), true;
  return false;
}

// ---------------------------------------------------------------- whole rows per thread: tiles

// Calls f(std::integral_constant<int, kD>) for the smallest tier kD in {8, 16, ..., kMax} with
// kD >= D (the caller makes sure D <= kMax).
template <int kD, int kMax, typename F>
void with_tier_from(int64_t D, F& f) {
  if constexpr (kD >= kMax) {
    f(std::integral_constant<int, kD>{});
  } else {
    if (D <= kD) {
      f(std::integral_constant<int, kD>{});
    } else {
      with_tier_from<kD * 2, kMax>(D, f);
    }
  }
}

template <int kMax, typename F>
void with_tier(int64_t D, F&& f) {
  with_tier_from<8, kMax>(D, f);
}

// The chains' grid: at most this many blocks per SM, each taking its tiles in turn (about two at
// B = 2^21, D = 16). Many blocks, which the GPU starts as others finish, took 3-12% less time than
// one resident wave at 32 steps and up to 12% at 1 step, and 2-4% and up to 7% less than the 16 per
// SM of before (H200, session 32: benchmarks/results/session32/call4).
constexpr int kChainBlocksPerSm = 64;

// Rows per block (one per thread) of the whole-row kernels: the widest tier takes half as many
// so that its tile and Psym fit the 48 KB of static shared memory.
template <int kD>
constexpr int kTileRows = kD >= 64 ? 64 : 128;

// R consecutive rows of a (B, D) matrix, staged through shared memory. The R·D elements are
// contiguous in memory, so the block copies them with coalesced accesses; stride kD + 1 makes
// the per-thread row accesses conflict-free. Call from every thread of the block (blockDim.x
// == R); `rows` <= R of them are real (the others' registers are unspecified).
template <typename A, int kD, int R>
struct Tile {
  A v[R * (kD + 1)];

  __device__ __forceinline__ static int at(int e, int D) {  // element e of the tile -> its slot
    return D == kD ? (e / kD) * (kD + 1) + e % kD : (e / D) * (kD + 1) + e % D;
  }

  template <typename T>
  __device__ __forceinline__ void load(A (&x)[kD], const T* __restrict__ src, int64_t r0, int rows, int D) {
    const T* base = src + r0 * D;
    const int n = rows * D;
    // Every load is issued before the first shared store. With each load and its store in one guarded
    // step, the kD loads waited out the memory latency one after another, and a chain's loads and
    // stores took 3.4x the time of a copy (B = 2^21, D = 16: 295 us for one step, 63 of them the step).
    T staged[kD];
#pragma unroll
    for (int k = 0; k < kD; ++k) staged[k] = k * R + int(threadIdx.x) < n ? base[k * R + threadIdx.x] : T(0);
    if (D == kD) {  // element k·R + t sits at slot k·(R + R/kD) + t + t/kD (kD divides R)
      const int first = threadIdx.x + threadIdx.x / kD;
#pragma unroll
      for (int k = 0; k < kD; ++k) v[first + k * (R + R / kD)] = static_cast<A>(staged[k]);  // zeros past the rows
    } else {
#pragma unroll
      for (int k = 0; k < kD; ++k)
        if (k * R + int(threadIdx.x) < n) v[at(k * R + threadIdx.x, D)] = static_cast<A>(staged[k]);
    }
    __syncthreads();
#pragma unroll
    for (int j = 0; j < kD; ++j) x[j] = j < D ? v[threadIdx.x * (kD + 1) + j] : A(0);
    __syncthreads();
  }

  template <typename T>
  __device__ __forceinline__ void store(const A (&x)[kD], T* __restrict__ dst, int64_t r0, int rows, int D) {
#pragma unroll
    for (int j = 0; j < kD; ++j)
      if (j < D) v[threadIdx.x * (kD + 1) + j] = x[j];
    __syncthreads();
    T* base = dst + r0 * D;
    const int n = rows * D;
#pragma unroll
    for (int k = 0; k < kD; ++k) {
      const int e = k * R + threadIdx.x;
      if (e < n) base[e] = static_cast<T>(v[at(e, D)]);
    }
    __syncthreads();
  }
};

struct GaussTag {};  // the Gaussian inside the whole-row kernels (its data live in shared memory)

// A whole-row kernel's view of a model: gradient and energy of a row held in registers,
// padded to kD with zeros (padded gradients are zero, so padded state stays zero).
template <typename T, int kD, typename M>
struct RowModel {
  M m;
  int D;
  __device__ __forceinline__ void grad(const T (&x)[kD], T (&g)[kD]) const {
    T s0 = 0, s1 = 0;
    if (M::kStats) {
#pragma unroll
      for (int j = 0; j < kD; ++j)
        if (j < D) m.stats(x[j], s0, s1);
    }
    const RowConst<T> rc = m.prepare(s0, s1, D);
#pragma unroll
    for (int i = 0; i < kD; ++i)
      g[i] = i < D ? m.grad(i > 0 ? x[i > 0 ? i - 1 : 0] : T(0), x[i], i + 1 < kD ? x[i + 1 < kD ? i + 1 : i] : T(0),
                            i > 0, i + 1 < D, rc)
                   : T(0);
  }
  // g (the gradient at x) is unused here; the Gaussian's energy uses it.
  __device__ __forceinline__ T energy(const T (&x)[kD], const T (&)[kD]) const {
    T s0 = 0, s1 = 0, e = 0;
#pragma unroll
    for (int i = 0; i < kD; ++i) {
      if (i < D) {
        m.stats(x[i], s0, s1);
        e += m.term(x[i], i + 1 < kD ? x[i + 1 < kD ? i + 1 : i] : T(0), i + 1 < D);
      }
    }
    return m.finish(e, s0, s1, D);
  }
};

// Shared-memory loads the compiler may not hoist out of a chain's step loop: hoisting all
// of Psym into registers for the whole chain (kD² values) is what it would do otherwise, and
// it spills. Vector loads of 16 bytes, warp-uniform addresses (broadcast).
template <typename T>
struct Lds;

template <>
struct Lds<float> {
  static constexpr int N = 4;
  __device__ __forceinline__ static void vec(const float* p, float (&v)[N]) {
    asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];"
                 : "=f"(v[0]), "=f"(v[1]), "=f"(v[2]), "=f"(v[3])
                 : "r"(static_cast<unsigned>(__cvta_generic_to_shared(p))));
  }
  __device__ __forceinline__ static float one(const float* p) {
    float v;
    asm volatile("ld.shared.f32 %0, [%1];" : "=f"(v) : "r"(static_cast<unsigned>(__cvta_generic_to_shared(p))));
    return v;
  }
};

template <>
struct Lds<double> {
  static constexpr int N = 2;
  __device__ __forceinline__ static void vec(const double* p, double (&v)[N]) {
    asm volatile("ld.shared.v2.f64 {%0, %1}, [%2];"
                 : "=d"(v[0]), "=d"(v[1])
                 : "r"(static_cast<unsigned>(__cvta_generic_to_shared(p))));
  }
  __device__ __forceinline__ static double one(const double* p) {
    double v;
    asm volatile("ld.shared.f64 %0, [%1];" : "=d"(v) : "r"(static_cast<unsigned>(__cvta_generic_to_shared(p))));
    return v;
  }
};

template <typename T, int kD>
struct RowModel<T, kD, GaussTag> {
  const T* p;    // shared: ½(P + Pᵀ), kD × kD, zero-padded
  const T* pmu;  // shared: Psym·μ
  const T* mu;   // shared: μ
  int D;
  __device__ __forceinline__ void grad(const T (&x)[kD], T (&g)[kD]) const {
    constexpr int N = Lds<T>::N;  // kD is a multiple of 4 >= N
#pragma unroll
    for (int i = 0; i < kD; ++i) {
      T acc = -Lds<T>::one(pmu + i);
#pragma unroll
      for (int j = 0; j < kD; j += N) {
        T pv[N];
        Lds<T>::vec(p + i * kD + j, pv);
#pragma unroll
        for (int k = 0; k < N; ++k) acc += pv[k] * x[j + k];
      }
      g[i] = acc;
    }
  }
  // ½(x − μ)ᵀPsym(x − μ) = ½ Σ (x − μ)ᵢ gᵢ with g = Psym(x − μ), the gradient at x.
  __device__ __forceinline__ T energy(const T (&x)[kD], const T (&g)[kD]) const {
    T e = 0;
#pragma unroll
    for (int i = 0; i < kD; ++i) e += (x[i] - Lds<T>::one(mu + i)) * g[i];
    return T(0.5) * e;
  }
};

// Shared memory of a whole-row block: the Gaussian's Psym, Psym·μ and μ (a stub for local models).
template <typename T, int kD, typename M>
struct ChainShared {
  static constexpr bool kGauss = std::is_same<M, GaussTag>::value;
  alignas(16) T p[kGauss ? kD * kD : 1];
  T pmu[kGauss ? kD : 1];
  T mu[kGauss ? kD : 1];
};

// Fills p (kD × kD) with ½(P + Pᵀ) padded with zeros, and mu (kD) with μ padded with
// zeros. Call from every thread of the block; ends with __syncthreads().
template <typename T, typename A, int kD>
__device__ void load_gaussian(A* p, A* mu, const T* __restrict__ mean, const T* __restrict__ prec, int D) {
  for (int t = threadIdx.x; t < kD * kD; t += blockDim.x) {
    const int i = t / kD, j = t % kD;
    p[t] = (i < D && j < D) ? A(0.5) * (static_cast<A>(prec[i * D + j]) + static_cast<A>(prec[j * D + i])) : A(0);
  }
  for (int t = threadIdx.x; t < kD; t += blockDim.x) mu[t] = t < D ? static_cast<A>(mean[t]) : A(0);
  __syncthreads();
}

// Fills the shared Psym = ½(P + Pᵀ), μ and Psym·μ (zero-padded to kD) from mean/prec of
// dtype S for the Gaussian; returns the model. Call from every thread of the block.
template <typename T, int kD, typename M, typename S>
__device__ RowModel<T, kD, M> make_row_model(ChainShared<T, kD, M>& sh, const M& m, const S* __restrict__ mean,
                                             const S* __restrict__ prec, int D) {
  if constexpr (std::is_same<M, GaussTag>::value) {
    load_gaussian<S, T, kD>(sh.p, sh.mu, mean, prec, D);
    for (int i = threadIdx.x; i < kD; i += blockDim.x) {
      T acc = 0;
      for (int j = 0; j < kD; ++j) acc += sh.p[i * kD + j] * sh.mu[j];
      sh.pmu[i] = acc;
    }
    __syncthreads();
    return RowModel<T, kD, GaussTag>{sh.p, sh.pmu, sh.mu, D};
  } else {
    return RowModel<T, kD, M>{m, D};
  }
}

// ---------------------------------------------------------------- chains: shared by both launchers

// Calls f(model) with GaussTag or the local model's functor in dtype T.
template <typename T, typename F>
void with_chain_model(const ModelSpec& spec, F&& f) {
  if (spec.kind == Model::Gaussian) {
    f(GaussTag{});
  } else {
    with_local_model<T>(spec.kind, spec.p, std::forward<F>(f));
  }
}

// Calls f(tier, flat) for a chain's rows of width D: tier the width tier (with_tier), flat the
// std::integral_constant<int, D> of D = 1 and 2 (in the tier of 8: their normals are a flat stream, ChainDraws,
// and the kernel knows D at compile time), of 0 otherwise.
template <int kMax, typename F>
void with_chain_tier(int64_t D, F&& f) {
  using Tier8 = std::integral_constant<int, 8>;
  if (D == 1) return f(Tier8{}, std::integral_constant<int, 1>{});
  if (D == 2) return f(Tier8{}, std::integral_constant<int, 2>{});
  with_tier<kMax>(D, [&](auto tier) { f(tier, std::integral_constant<int, 0>{}); });
}

// ---------------------------------------------------------------- chains: a row's random numbers

// Where a row of the one-launch chains draws (langevin_chain_kernel, hmc_chain_kernel): Philox calls from
// `first` (the launch's offset / 4) in subsequence `row`. kFlat = D for D = 1 and 2, else 0.
// - D = 1, 2 (since session 48): the row's normals are one flat stream in step order, normal k = s·D + i
//   (step s, element i) is lane k % 4 of call first + k / 4, so one call serves 4 / D steps. HMC's accept
//   uniform of step s (since session 49): lane s % 4 of call first + s / 4 in subsequence row + 2^63, apart
//   from the normals (session 48: word x of call first + s).
// - D >= 3: step s takes calls first + s·stride + q, one for each group q of 4 elements (the lanes past D
//   are thrown away); stride = ceil(D / 4), and HMC's + 1: its accept uniform, word x of the step's last call.
// Either way a step's draws depend on its index alone, so n steps are the first n of a longer chain on the
// same seed. chain_philox_draws reserves them. kD: the kernel's width tier.
// Philox calls a step of a row of width D >= 3 takes: ChainDraws's stride.
C10_HOST_DEVICE inline int64_t chain_calls_per_step(int64_t D, bool hmc) { return (D + 3) / 4 + (hmc ? 1 : 0); }

template <int kD, int kFlat>
struct ChainDraws {
  static_assert(kFlat >= 0 && kFlat <= 2, "the flat stream is for D = 1 and 2");
  uint64_t seed, first, row;
  int64_t stride;  // D >= 3: calls a step (chain_calls_per_step)
  jk::Float4 z{};  // flat: the normals of the current call no step has read yet, from .x on
  jk::Uint4 u{};   // flat (HMC): the accept words of the current call no step has read yet, from .x on

  // Calls f(i, z) with the normal z of each element i < D of step s. Steps in turn from 0: the flat stream
  // reads on in z, shifted down as it is read so that every lane index is a constant (an array indexed at run
  // time would go to local memory), and makes the next call when step s crosses into it.
  template <typename F>
  __device__ __forceinline__ void normals(int64_t s, int D, F&& f) {
    if constexpr (kFlat > 0) {
      if (s * kFlat % 4 == 0) z = jk::normal4(seed, first + s * kFlat / 4, row);
      f(0, z.x);
      if (kFlat == 2) f(1, z.y);
      z = kFlat == 1 ? jk::Float4{z.y, z.z, z.w, 0.f} : jk::Float4{z.z, z.w, 0.f, 0.f};
    } else {
      const uint64_t call = first + s * stride;
#pragma unroll
      for (int q = 0; q < kD / 4; ++q) {
        if (4 * q < D) {
          const jk::Float4 g = jk::normal4(seed, call + q, row);
#pragma unroll
          for (int k = 0; k < 4; ++k)
            if (4 * q + k < D) f(4 * q + k, lane(g, k));
        }
      }
    }
  }

  // HMC's uniform in (0, 1] for step s's accept test, steps in turn from 0. Flat: lane s % 4 of call
  // first + s / 4 in subsequence row + 2^63 (one call serves 4 steps, as on the CPU), shifted down as in normals.
  __device__ __forceinline__ float accept_uniform(int64_t s) {
    if constexpr (kFlat > 0) {
      if (s % 4 == 0) u = jk::philox4x32_10(seed, first + s / 4, row + kAcceptSubsequences);
      const uint32_t word = u.x;
      u = jk::Uint4{u.y, u.z, u.w, 0u};
      return jk::uniform_open0(word);
    } else {
      return jk::uniform_open0(jk::philox4x32_10(seed, first + s * stride + stride - 1, row).x);
    }
  }
};

// The draws (4 a Philox call) a chain launch reserves from the generator: every call ChainDraws makes for
// n_steps steps of rows of width D (hmc: with the accept uniforms; at D = 1, 2 they are (n + 3) / 4 calls of
// their own subsequence, no more than the normals' (n D + 3) / 4).
inline uint64_t chain_philox_draws(int64_t n_steps, int64_t D, bool hmc) {
  const uint64_t n = static_cast<uint64_t>(n_steps);
  if (D == 1 || D == 2) return 4 * ((n * static_cast<uint64_t>(D) + 3) / 4);
  return 4 * n * static_cast<uint64_t>(chain_calls_per_step(D, hmc));
}

}  // namespace ebm
