// Family `ebm`: CUDA kernels.
//
// Design (B rows of width D; floors from ANCHORS.md, B = 2^21, D = 16, float32):
// - Energies/scores of the local models (double_well, harmonic, rosenbrock, rastrigin,
//   ackley) are memory-bound: a group of G = D/4 lanes (power of two, <= 32) owns a row,
//   each lane 16-byte loads; energies and Ackley's row sums reduce inside the group with
//   shuffles. Every byte of x is read once and every output written once, coalesced.
// - The Gaussian ½dᵀPd, d = x − μ, needs D² FMAs per row (2^21·256 ≈ 0.54 GFMA, ~16 µs of
//   fp32 issue on an H100/H200, below the 34–64 µs copy floor). D <= 64: templated on a
//   width tier kD in {4, 8, 16, 32, 64} (rows padded with zeros, no runtime-sized arrays),
//   ½(P + Pᵀ) padded in shared memory, a lane group per row loads its slice coalesced, then
//   gathers the whole row with kD shuffles and computes its own outputs: Psym[j][my cols]
//   is one 16-byte shared load per row-element, the same address across groups (broadcast).
//   D > 64 goes through cuBLAS: score = (x − μ)·(−Psym), energy = ½Σ d·(Psym d).
// - langevin_step: each thread takes 4 consecutive elements = one Philox call (4 normals by
//   Box-Muller) and 16-byte loads of x and grad: 3 streams of memory, ~100 integer ops per 4
//   elements, so it stays memory-bound.
// - langevin_chain / hmc_chain, small D (float32: <= 64 / <= 32, float64: half that): one
//   launch for the whole chain, one thread per row holding the row in registers (x[kD], g[kD]
//   (+ p, x0 for HMC)), the Gaussian's Psym and Psym·μ in shared memory, read warp-uniformly
//   (broadcast) with loads the compiler may not hoist out of the step loop (it would keep
//   all kD² values in registers and spill). Per step
//   and element: D FMAs (Gaussian) + 1/4 Philox call: compute-bound, no memory traffic
//   between steps. Random numbers: subsequence = row, counter = offset/4 + step-local index,
//   so every (row, step, element) has its own draw and the whole chain reserves exactly
//   n_steps·ceil(D/4)·4 draws per row from the generator.
// - Wider rows: per step one score kernel (for the Gaussian one addmm: x·(−Psym) + Psym·μ)
//   plus one fused update kernel (noise + step + clamp + trajectory write), no host sync.
//   HMC for D > 32 composes ATen ops and the score/energy kernels the same way.
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/ops/addmm.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/rand.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <array>
#include <cmath>
#include <limits>
#include <tuple>
#include <type_traits>

#include "ebm.h"
#include "ebm_host.h"
#include "elementwise.cuh"
#include "philox_cuda.cuh"

namespace ebm {

constexpr unsigned kFullMask = 0xffffffffu;

inline bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Blocks for `work` units of `per_block` each, capped at what fills the GPU `per_sm` times.
inline int64_t grid_size(int64_t work, int64_t per_block, int device, int per_sm) {
  const int64_t want = (work + per_block - 1) / per_block;
  return std::max<int64_t>(1, std::min<int64_t>(want, int64_t(jk::multiprocessor_count(device)) * per_sm));
}

// ---------------------------------------------------------------- local models: G lanes per row

template <typename A>
__device__ __forceinline__ A group_sum(A v, int G) {
  for (int offset = G / 2; offset > 0; offset >>= 1) v += __shfl_xor_sync(kFullMask, v, offset);
  return v;
}

// Energy (out: (B,)) or score (out: (B, D)) of a local model. A group of G lanes (a power
// of two) owns a row and walks it V elements (16 bytes when V > 1) at a time. Every lane of
// a warp runs the same number of row iterations, so the group shuffles are warp-uniform.
template <typename T, int V, bool kScore, typename M>
__global__ void __launch_bounds__(256) local_rows_kernel(const T* __restrict__ x, T* __restrict__ out, int64_t B,
                                                         int64_t D, int G, M m) {
  using A = at::opmath_type<T>;
  using Vec = jk::Vec<T, V>;
  const int lane = threadIdx.x & 31, l = lane & (G - 1), rows_per_warp = 32 / G;
  const int64_t warp = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  const int64_t n_warps = (static_cast<int64_t>(gridDim.x) * blockDim.x) >> 5;
  for (int64_t base = warp * rows_per_warp; base < B; base += n_warps * rows_per_warp) {
    const int64_t row = base + lane / G;
    const bool valid = row < B;
    const T* xr = x + (valid ? row : 0) * D;
    A s0 = 0, s1 = 0, e = 0;
    if (M::kStats || !kScore) {
      if (valid) {
        for (int64_t c = int64_t(l) * V; c < D; c += int64_t(G) * V) {
          const Vec v = *reinterpret_cast<const Vec*>(xr + c);
#pragma unroll
          for (int k = 0; k < V; ++k) {
            const int64_t i = c + k;
            const A xi = static_cast<A>(v.val[k]);
            m.stats(xi, s0, s1);
            if (!kScore) {
              const bool has_next = i + 1 < D;
              const A xn = k + 1 < V ? static_cast<A>(v.val[k + 1 < V ? k + 1 : k])
                                     : (has_next ? static_cast<A>(xr[i + 1]) : A(0));
              e += m.term(xi, xn, has_next);
            }
          }
        }
      }
      if (M::kStats) {
        s0 = group_sum(s0, G);
        s1 = group_sum(s1, G);
      }
      if (!kScore) e = group_sum(e, G);
    }
    if (!valid) continue;  // after the shuffles: nothing below is warp-collective
    if (!kScore) {
      if (l == 0) out[row] = static_cast<T>(m.finish(e, s0, s1, D));
      continue;
    }
    const RowConst<A> rc = m.prepare(s0, s1, D);
    T* outr = out + row * D;
    for (int64_t c = int64_t(l) * V; c < D; c += int64_t(G) * V) {
      const Vec v = *reinterpret_cast<const Vec*>(xr + c);
      Vec o;
#pragma unroll
      for (int k = 0; k < V; ++k) {
        const int64_t i = c + k;
        const A xp = k > 0 ? static_cast<A>(v.val[k > 0 ? k - 1 : 0]) : (i > 0 ? static_cast<A>(xr[i - 1]) : A(0));
        const A xn = k + 1 < V ? static_cast<A>(v.val[k + 1 < V ? k + 1 : k])
                               : (i + 1 < D ? static_cast<A>(xr[i + 1]) : A(0));
        o.val[k] = static_cast<T>(-m.grad(xp, static_cast<A>(v.val[k]), xn, i > 0, i + 1 < D, rc));
      }
      *reinterpret_cast<Vec*>(outr + c) = o;
    }
  }
}

template <typename T, int V, bool kScore, typename M>
void launch_local_rows_v(const at::Tensor& x, const at::Tensor& out, const M& m) {
  const int64_t B = x.size(0), D = x.size(1);
  const int64_t units = (D + V - 1) / V;
  int G = 1;
  while (G < units && G < 32) G *= 2;
  constexpr int kThreads = 256;
  const int64_t rows_per_block = (kThreads / 32) * (32 / G);
  const int64_t blocks = grid_size(B, rows_per_block, x.get_device(), 8);
  local_rows_kernel<T, V, kScore><<<blocks, kThreads, 0, c10::cuda::getCurrentCUDAStream()>>>(
      x.const_data_ptr<T>(), out.mutable_data_ptr<T>(), B, D, G, m);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

template <typename T, typename M>
void launch_local_rows(const at::Tensor& x, const at::Tensor& out, const M& m, bool score) {
  constexpr int kV = 16 / sizeof(T);
  const bool vec = x.size(1) % kV == 0 && aligned16(x.const_data_ptr()) && (!score || aligned16(out.data_ptr()));
  if (vec) {
    score ? launch_local_rows_v<T, kV, true>(x, out, m) : launch_local_rows_v<T, kV, false>(x, out, m);
  } else {
    score ? launch_local_rows_v<T, 1, true>(x, out, m) : launch_local_rows_v<T, 1, false>(x, out, m);
  }
}

at::Tensor local_cuda(const at::Tensor& x_in, Model kind, std::array<double, 3> p, bool score) {
  check_rows(x_in, kind == Model::Rosenbrock ? 2 : 1);
  c10::cuda::CUDAGuard guard(x_in.device());
  const at::Tensor x = x_in.contiguous();
  at::Tensor out = score ? at::empty(x.sizes(), x.options()) : at::empty({x.size(0)}, x.options());
  if (x.size(0) == 0) return out;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "ebm_local_cuda", [&] {
    using A = at::opmath_type<scalar_t>;
    with_local_model<A>(kind, p.data(), [&](auto m) { launch_local_rows<scalar_t>(x, out, m, score); });
  });
  return out;
}

// ---------------------------------------------------------------- Gaussian, D <= 64

// Calls f(std::integral_constant<int, kD>) for the smallest tier kD in {4, 8, ..., kMax} with
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
  with_tier_from<4, kMax>(D, f);
}

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

// A group of G = kD / V lanes per row; lane l owns columns [l·V, l·V + V).
template <typename T, int kD, bool kScore>
__global__ void __launch_bounds__(256) gaussian_rows_kernel(const T* __restrict__ x, const T* __restrict__ mean,
                                                            const T* __restrict__ prec, T* __restrict__ out,
                                                            int64_t B, int D, bool vec) {
  using A = at::opmath_type<T>;
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

at::Tensor gaussian_cuda(const at::Tensor& x_in, const at::Tensor& mean_in, const at::Tensor& prec_in, bool score) {
  check_gaussian_args(x_in, mean_in, prec_in);
  c10::cuda::CUDAGuard guard(x_in.device());
  const at::Tensor x = x_in.contiguous(), mean = mean_in.contiguous(), prec = prec_in.contiguous();
  const int64_t B = x.size(0), D = x.size(1);
  if (D > kGaussianSmallD) return gaussian_matmul(x, mean, prec, !score);
  at::Tensor out = score ? at::empty(x.sizes(), x.options()) : at::empty({B}, x.options());
  if (B == 0) return out;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "ebm_gaussian_cuda", [&] {
    using T = scalar_t;
    with_tier<64>(D, [&](auto tier) {
      constexpr int kD = decltype(tier)::value;
      constexpr int V = int(16 / sizeof(T)) < kD ? int(16 / sizeof(T)) : kD;
      constexpr int kThreads = 256;
      const bool vec = D == kD && aligned16(x.const_data_ptr()) && aligned16(out.data_ptr());
      const int64_t rows_per_block = (kThreads / 32) * (32 / (kD / V));
      const int64_t blocks = grid_size(B, rows_per_block, x.get_device(), 8);
      auto stream = c10::cuda::getCurrentCUDAStream();
      if (score) {
        gaussian_rows_kernel<T, kD, true><<<blocks, kThreads, 0, stream>>>(
            x.const_data_ptr<T>(), mean.const_data_ptr<T>(), prec.const_data_ptr<T>(), out.mutable_data_ptr<T>(), B,
            int(D), vec);
      } else {
        gaussian_rows_kernel<T, kD, false><<<blocks, kThreads, 0, stream>>>(
            x.const_data_ptr<T>(), mean.const_data_ptr<T>(), prec.const_data_ptr<T>(), out.mutable_data_ptr<T>(), B,
            int(D), vec);
      }
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    });
  });
  return out;
}

at::Tensor gaussian_energy_cuda(const at::Tensor& x, const at::Tensor& mean, const at::Tensor& precision) {
  return gaussian_cuda(x, mean, precision, false);
}

at::Tensor gaussian_score_cuda(const at::Tensor& x, const at::Tensor& mean, const at::Tensor& precision) {
  return gaussian_cuda(x, mean, precision, true);
}

// ---------------------------------------------------------------- Langevin update (elementwise + noise)

// out = x + a·g + τ·ε (clamped); four consecutive elements per thread and Philox call
// (subsequence 0, counter = offset/4 + group). x and out may be the same memory. When
// traj is given the result is also written there.
template <typename T>
__global__ void __launch_bounds__(256) langevin_update_kernel(const T* x, const T* __restrict__ g, T* out, T* traj,
                                                              int64_t n, LangevinUpdate<at::opmath_type<T>> upd,
                                                              at::PhiloxCudaState state, bool vec) {
  using A = at::opmath_type<T>;
  using Vec4 = jk::Vec<T, 4>;
  const jk::PhiloxSeed seed = jk::unpack_philox(state);
  const int64_t groups = (n + 3) / 4;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t q = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; q < groups; q += stride) {
    const jk::Float4 z = jk::normal4(seed.seed, seed.offset / 4 + q);
    const int64_t i0 = 4 * q;
    if (vec && i0 + 4 <= n) {
      const Vec4 xv = *reinterpret_cast<const Vec4*>(x + i0);
      const Vec4 gv = *reinterpret_cast<const Vec4*>(g + i0);
      Vec4 o;
#pragma unroll
      for (int k = 0; k < 4; ++k)
        o.val[k] = static_cast<T>(upd(static_cast<A>(xv.val[k]), static_cast<A>(gv.val[k]), static_cast<A>(lane(z, k))));
      *reinterpret_cast<Vec4*>(out + i0) = o;
      if (traj != nullptr) *reinterpret_cast<Vec4*>(traj + i0) = o;
    } else {
      for (int k = 0; k < 4 && i0 + k < n; ++k) {
        const T o = static_cast<T>(upd(static_cast<A>(x[i0 + k]), static_cast<A>(g[i0 + k]), static_cast<A>(lane(z, k))));
        out[i0 + k] = o;
        if (traj != nullptr) traj[i0 + k] = o;
      }
    }
  }
}

LangevinUpdate<double> make_update_cuda(double a, double tau, std::optional<double> lo, std::optional<double> hi) {
  const double inf = std::numeric_limits<double>::infinity();
  return {a, tau, lo.value_or(-inf), hi.value_or(inf), lo.has_value() || hi.has_value()};
}

// out (and traj, if not null) = x + a·g + τ·ε for contiguous tensors of x's dtype.
void launch_langevin_update(const at::Tensor& x, const at::Tensor& g, const at::Tensor& out, void* traj,
                            const LangevinUpdate<double>& u, const std::optional<at::Generator>& generator) {
  const int64_t n = x.numel();
  if (n == 0) return;
  const at::PhiloxCudaState state = jk::cuda_philox_state(n, generator);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "ebm_langevin_update_cuda", [&] {
    using T = scalar_t;
    using A = at::opmath_type<T>;
    const LangevinUpdate<A> upd{A(u.a), A(u.tau), A(u.lo), A(u.hi), u.clamp};
    const auto ok = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % (4 * sizeof(T)) == 0; };
    const bool vec = ok(x.const_data_ptr()) && ok(g.const_data_ptr()) && ok(out.data_ptr()) && (traj == nullptr || ok(traj));
    const int64_t blocks = grid_size((n + 3) / 4, 256, x.get_device(), 8);
    langevin_update_kernel<T><<<blocks, 256, 0, c10::cuda::getCurrentCUDAStream()>>>(
        x.const_data_ptr<T>(), g.const_data_ptr<T>(), out.mutable_data_ptr<T>(), static_cast<T*>(traj), n, upd, state,
        vec);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
}

at::Tensor langevin_step_cuda(const at::Tensor& x, const at::Tensor& grad, double step_size, double noise_scale,
                              std::optional<double> clamp_min, std::optional<double> clamp_max,
                              std::optional<at::Generator> generator) {
  check_step_args(x, grad, step_size, noise_scale, clamp_min, clamp_max);
  c10::cuda::CUDAGuard guard(x.device());
  const at::Tensor xc = x.contiguous(), gc = grad.contiguous();
  at::Tensor out = at::empty(x.sizes(), x.options());
  launch_langevin_update(xc, gc, out, nullptr,
                         make_update_cuda(-step_size, noise_scale * std::sqrt(2.0 * step_size), clamp_min, clamp_max),
                         generator);
  return out;
}

at::Tensor& langevin_step_inplace_cuda(at::Tensor& x, const at::Tensor& grad, double step_size, double noise_scale,
                                       std::optional<double> clamp_min, std::optional<double> clamp_max,
                                       std::optional<at::Generator> generator) {
  check_step_args(x, grad, step_size, noise_scale, clamp_min, clamp_max);
  c10::cuda::CUDAGuard guard(x.device());
  const at::Tensor gc = grad.contiguous();
  const auto u = make_update_cuda(-step_size, noise_scale * std::sqrt(2.0 * step_size), clamp_min, clamp_max);
  if (x.is_contiguous()) {  // each thread reads its elements before writing them
    launch_langevin_update(x, gc, x, nullptr, u, generator);
  } else {
    const at::Tensor xc = x.contiguous();
    at::Tensor out = at::empty(x.sizes(), x.options());
    launch_langevin_update(xc, gc, out, nullptr, u, generator);
    x.copy_(out);
  }
  return x;
}

// ---------------------------------------------------------------- chains, one thread per row

struct GaussTag {};  // the Gaussian inside the chain kernels (its data live in shared memory)

// The chain kernels' view of a model: gradient and energy of a row held in registers,
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

// Shared memory of a chain block: the Gaussian's Psym, Psym·μ and μ (a stub for local models).
template <typename T, int kD, typename M>
struct ChainShared {
  static constexpr bool kGauss = std::is_same<M, GaussTag>::value;
  alignas(16) T p[kGauss ? kD * kD : 1];
  T pmu[kGauss ? kD : 1];
  T mu[kGauss ? kD : 1];
};

template <typename T, int kD, typename M>
__device__ RowModel<T, kD, M> make_row_model(ChainShared<T, kD, M>& sh, const M& m, const T* mean, const T* prec,
                                             int D) {
  if constexpr (std::is_same<M, GaussTag>::value) {
    load_gaussian<T, T, kD>(sh.p, sh.mu, mean, prec, D);
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

template <typename T, int kD>
__device__ __forceinline__ void load_row(T (&x)[kD], const T* __restrict__ src, int D) {
#pragma unroll
  for (int j = 0; j < kD; ++j) x[j] = j < D ? src[j] : T(0);
}

template <typename T, int kD>
__device__ __forceinline__ void store_row(const T (&x)[kD], T* __restrict__ dst, int D) {
#pragma unroll
  for (int j = 0; j < kD; ++j)
    if (j < D) dst[j] = x[j];
}

template <typename T, int kD, typename M>
__global__ void __launch_bounds__(128) langevin_chain_kernel(const T* __restrict__ x_in, T* __restrict__ x_out,
                                                             T* __restrict__ traj, int64_t B, int D, M m,
                                                             const T* __restrict__ mean, const T* __restrict__ prec,
                                                             int64_t n_steps, LangevinUpdate<T> upd, int64_t thin,
                                                             at::PhiloxCudaState state) {
  __shared__ ChainShared<T, kD, M> sh;
  const RowModel<T, kD, M> model = make_row_model<T, kD, M>(sh, m, mean, prec, D);
  const jk::PhiloxSeed seed = jk::unpack_philox(state);
  const int64_t nq = (D + 3) / 4;
  for (int64_t row = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; row < B;
       row += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    T x[kD], g[kD];
    load_row(x, x_in + row * D, D);
    int64_t until_save = thin, saved = 0;
    for (int64_t step = 0; step < n_steps; ++step) {
      model.grad(x, g);
      const uint64_t counter = seed.offset / 4 + step * nq;
#pragma unroll
      for (int q = 0; q < kD / 4; ++q) {
        if (4 * q < D) {
          const jk::Float4 z = jk::normal4(seed.seed, counter + q, row);
#pragma unroll
          for (int k = 0; k < 4; ++k)
            if (4 * q + k < D) x[4 * q + k] = upd(x[4 * q + k], g[4 * q + k], static_cast<T>(lane(z, k)));
        }
      }
      if (thin > 0 && --until_save == 0) {
        store_row(x, traj + (saved++ * B + row) * D, D);
        until_save = thin;
      }
    }
    store_row(x, x_out + row * D, D);
  }
}

template <typename T, int kD, typename M>
__global__ void __launch_bounds__(128) hmc_chain_kernel(const T* __restrict__ x_in, T* __restrict__ x_out,
                                                        T* __restrict__ accept_rate, T* __restrict__ traj, int64_t B,
                                                        int D, M m, const T* __restrict__ mean,
                                                        const T* __restrict__ prec, int64_t n_steps, T eps,
                                                        int64_t n_leapfrog, int64_t thin, at::PhiloxCudaState state) {
  __shared__ ChainShared<T, kD, M> sh;
  const RowModel<T, kD, M> model = make_row_model<T, kD, M>(sh, m, mean, prec, D);
  const jk::PhiloxSeed seed = jk::unpack_philox(state);
  const int64_t nq = (D + 3) / 4;
  for (int64_t row = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; row < B;
       row += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    T x[kD], x0[kD], p[kD], g[kD];
    load_row(x, x_in + row * D, D);
    int64_t accepted = 0, until_save = thin, saved = 0;
    for (int64_t step = 0; step < n_steps; ++step) {
      const uint64_t counter = seed.offset / 4 + step * (nq + 1);
#pragma unroll
      for (int q = 0; q < kD / 4; ++q) {
        jk::Float4 z{0.f, 0.f, 0.f, 0.f};
        if (4 * q < D) z = jk::normal4(seed.seed, counter + q, row);
#pragma unroll
        for (int k = 0; k < 4; ++k) p[4 * q + k] = 4 * q + k < D ? static_cast<T>(lane(z, k)) : T(0);
      }
      T kinetic = 0;
#pragma unroll
      for (int i = 0; i < kD; ++i) {
        x0[i] = x[i];
        kinetic += p[i] * p[i];
      }
      model.grad(x, g);
      const T h0 = model.energy(x, g) + T(0.5) * kinetic;
#pragma unroll
      for (int i = 0; i < kD; ++i) p[i] -= T(0.5) * eps * g[i];
      for (int64_t l = 0; l < n_leapfrog; ++l) {
#pragma unroll
        for (int i = 0; i < kD; ++i) x[i] += eps * p[i];
        model.grad(x, g);
        const T kick = l + 1 == n_leapfrog ? T(0.5) * eps : eps;
#pragma unroll
        for (int i = 0; i < kD; ++i) p[i] -= kick * g[i];
      }
      kinetic = 0;
#pragma unroll
      for (int i = 0; i < kD; ++i) kinetic += p[i] * p[i];
      const T h1 = model.energy(x, g) + T(0.5) * kinetic;
      const float u = jk::uniform_open0(jk::philox4x32_10(seed.seed, counter + nq, row).x);
      if (log(static_cast<T>(u)) < h0 - h1) {  // false when h1 is NaN or inf: rejected
        ++accepted;
      } else {
#pragma unroll
        for (int i = 0; i < kD; ++i) x[i] = x0[i];
      }
      if (thin > 0 && --until_save == 0) {
        store_row(x, traj + (saved++ * B + row) * D, D);
        until_save = thin;
      }
    }
    store_row(x, x_out + row * D, D);
    accept_rate[row] = n_steps > 0 ? static_cast<T>(accepted) / static_cast<T>(n_steps) : T(0);
  }
}

// Calls f(model) with GaussTag or the local model's functor in dtype T.
template <typename T, typename F>
void with_chain_model(const ModelSpec& spec, F&& f) {
  if (spec.kind == Model::Gaussian) {
    f(GaussTag{});
  } else {
    with_local_model<T>(spec.kind, spec.p, std::forward<F>(f));
  }
}

// One launch for the whole chain up to these widths; the state (Langevin: x, g; HMC: x, x0,
// p, g) must fit in registers: float64 takes twice the registers, so half the width.
template <typename T>
constexpr int kLangevinSmallD = std::is_same<T, double>::value ? 32 : 64;
template <typename T>
constexpr int kHmcSmallD = std::is_same<T, double>::value ? 16 : 32;
constexpr int kChainThreads = 128;

inline int64_t langevin_small_d(const at::Tensor& x) { return x.scalar_type() == at::kDouble ? 32 : 64; }
inline int64_t hmc_small_d(const at::Tensor& x) { return x.scalar_type() == at::kDouble ? 16 : 32; }

// ---------------------------------------------------------------- chains: host side

// score(x) into s for the stepwise paths; for the Gaussian: addmm(Psym·μ, x, −Psym).
struct StepScore {
  ModelSpec spec;
  at::Tensor neg_p, pmu;  // Gaussian only

  void operator()(const at::Tensor& x, at::Tensor& s) const {
    if (spec.kind == Model::Gaussian) {
      at::addmm_out(s, pmu, x, neg_p);
      return;
    }
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "ebm_step_score_cuda", [&] {
      with_local_model<scalar_t>(spec.kind, spec.p, [&](auto m) { launch_local_rows<scalar_t>(x, s, m, true); });
    });
  }
};

StepScore make_step_score(const ModelSpec& spec, const std::optional<at::Tensor>& mean,
                          const std::optional<at::Tensor>& precision) {
  StepScore score{spec, {}, {}};
  if (spec.kind == Model::Gaussian) {
    const at::Tensor p_sym = precision->add(precision->t()).mul_(0.5);
    score.neg_p = p_sym.neg();
    score.pmu = at::matmul(p_sym, *mean);
  }
  return score;
}

std::tuple<at::Tensor, at::Tensor> langevin_chain_cuda(const at::Tensor& x, const std::string& model,
                                                       const std::optional<at::Tensor>& mean,
                                                       const std::optional<at::Tensor>& precision,
                                                       at::ArrayRef<double> params, int64_t n_steps, double step_size,
                                                       double noise_scale, int64_t thin,
                                                       std::optional<double> clamp_min,
                                                       std::optional<double> clamp_max,
                                                       std::optional<at::Generator> generator) {
  check_chain_args(x, n_steps, step_size, thin);
  const ModelSpec spec = parse_model(x, model, mean, precision, params);
  check_step_args(x, x, step_size, noise_scale, clamp_min, clamp_max);
  c10::cuda::CUDAGuard guard(x.device());
  const at::Tensor xc = x.contiguous();
  const int64_t B = x.size(0), D = x.size(1);
  at::Tensor traj = at::empty({n_saved(n_steps, thin), B, D}, x.options());
  const auto u = make_update_cuda(-step_size, noise_scale * std::sqrt(2.0 * step_size), clamp_min, clamp_max);
  if (B == 0) return {at::empty(x.sizes(), x.options()), traj};

  if (D > langevin_small_d(x)) {  // one score kernel (or addmm) + one fused update per step
    at::Tensor state = xc.clone();
    at::Tensor s = at::empty(x.sizes(), x.options());
    const StepScore score = make_step_score(spec, mean ? std::optional<at::Tensor>(mean->contiguous()) : mean,
                                            precision ? std::optional<at::Tensor>(precision->contiguous()) : precision);
    const LangevinUpdate<double> along_score{-u.a, u.tau, u.lo, u.hi, u.clamp};  // x + η·score
    for (int64_t step = 0; step < n_steps; ++step) {
      score(state, s);
      void* out_traj = nullptr;
      if (thin > 0 && (step + 1) % thin == 0)
        out_traj = static_cast<char*>(traj.data_ptr()) + ((step + 1) / thin - 1) * B * D * x.element_size();
      launch_langevin_update(state, s, state, out_traj, along_score, generator);
    }
    return {state, traj};
  }

  at::Tensor out = at::empty(x.sizes(), x.options());
  const int64_t nq = (D + 3) / 4;
  const at::PhiloxCudaState philox = jk::cuda_philox_state(uint64_t(n_steps) * nq * 4, generator);
  const at::Tensor mean_c = mean ? mean->contiguous() : at::Tensor(), prec_c = precision ? precision->contiguous() : at::Tensor();
  const int64_t blocks = grid_size(B, kChainThreads, x.get_device(), 16);
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "ebm_langevin_chain_cuda", [&] {
    using T = scalar_t;
    const LangevinUpdate<T> upd{T(u.a), T(u.tau), T(u.lo), T(u.hi), u.clamp};
    const T* mp = mean_c.defined() ? mean_c.const_data_ptr<T>() : nullptr;
    const T* pp = prec_c.defined() ? prec_c.const_data_ptr<T>() : nullptr;
    with_chain_model<T>(spec, [&](auto m) {
      with_tier<kLangevinSmallD<T>>(D, [&](auto tier) {
        constexpr int kD = decltype(tier)::value;
        langevin_chain_kernel<T, kD><<<blocks, kChainThreads, 0, c10::cuda::getCurrentCUDAStream()>>>(
            xc.const_data_ptr<T>(), out.mutable_data_ptr<T>(), traj.mutable_data_ptr<T>(), B, int(D), m, mp, pp,
            n_steps, upd, thin, philox);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
      });
    });
  });
  return {out, traj};
}

// HMC for wide rows, composed of ATen ops and the energy/score kernels: no host sync.
std::tuple<at::Tensor, at::Tensor, at::Tensor> hmc_stepwise_cuda(const at::Tensor& x, const ModelSpec& spec,
                                                                 const std::optional<at::Tensor>& mean,
                                                                 const std::optional<at::Tensor>& precision,
                                                                 int64_t n_steps, double eps, int64_t n_leapfrog,
                                                                 int64_t thin, at::Tensor traj,
                                                                 const std::optional<at::Generator>& generator) {
  const int64_t B = x.size(0);
  const std::array<double, 3> p{spec.p[0], spec.p[1], spec.p[2]};
  const auto energy = [&](const at::Tensor& y) {
    return spec.kind == Model::Gaussian ? gaussian_cuda(y, *mean, *precision, false) : local_cuda(y, spec.kind, p, false);
  };
  const auto score = [&](const at::Tensor& y) {
    return spec.kind == Model::Gaussian ? gaussian_cuda(y, *mean, *precision, true) : local_cuda(y, spec.kind, p, true);
  };
  at::Tensor state = x.contiguous().clone();
  at::Tensor accepted = at::zeros({B}, x.options());
  for (int64_t step = 0; step < n_steps; ++step) {
    const at::Tensor mom = at::randn(x.sizes(), generator, x.options());
    const at::Tensor h0 = energy(state).add(mom.mul(mom).sum(1), 0.5);
    at::Tensor xn = state.clone();
    at::Tensor pn = mom.add(score(xn), 0.5 * eps);
    for (int64_t l = 0; l < n_leapfrog; ++l) {
      xn.add_(pn, eps);
      pn.add_(score(xn), l + 1 == n_leapfrog ? 0.5 * eps : eps);
    }
    const at::Tensor h1 = energy(xn).add(pn.mul(pn).sum(1), 0.5);
    const at::Tensor accept = at::rand({B}, generator, x.options()).log_().lt(h0.sub(h1));  // NaN: rejected
    state = at::where(accept.unsqueeze(1), xn, state);
    accepted.add_(accept);
    if (thin > 0 && (step + 1) % thin == 0) traj.select(0, (step + 1) / thin - 1).copy_(state);
  }
  if (n_steps > 0) accepted.div_(double(n_steps));
  return {state, accepted, traj};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> hmc_chain_cuda(const at::Tensor& x, const std::string& model,
                                                              const std::optional<at::Tensor>& mean,
                                                              const std::optional<at::Tensor>& precision,
                                                              at::ArrayRef<double> params, int64_t n_steps,
                                                              double step_size, int64_t n_leapfrog, int64_t thin,
                                                              std::optional<at::Generator> generator) {
  check_chain_args(x, n_steps, step_size, thin);
  TORCH_CHECK_VALUE(n_leapfrog >= 1, "n_leapfrog must be >= 1, got ", n_leapfrog);
  const ModelSpec spec = parse_model(x, model, mean, precision, params);
  c10::cuda::CUDAGuard guard(x.device());
  const at::Tensor xc = x.contiguous();
  const int64_t B = x.size(0), D = x.size(1);
  at::Tensor traj = at::empty({n_saved(n_steps, thin), B, D}, x.options());
  if (B == 0) return {at::empty(x.sizes(), x.options()), at::empty({0}, x.options()), traj};
  if (D > hmc_small_d(x)) return hmc_stepwise_cuda(xc, spec, mean, precision, n_steps, step_size, n_leapfrog, thin, traj,
                                               generator);

  at::Tensor out = at::empty(x.sizes(), x.options());
  at::Tensor acc = at::empty({B}, x.options());
  const int64_t nq = (D + 3) / 4;
  const at::PhiloxCudaState philox = jk::cuda_philox_state(uint64_t(n_steps) * (nq + 1) * 4, generator);
  const at::Tensor mean_c = mean ? mean->contiguous() : at::Tensor(), prec_c = precision ? precision->contiguous() : at::Tensor();
  const int64_t blocks = grid_size(B, kChainThreads, x.get_device(), 16);
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "ebm_hmc_chain_cuda", [&] {
    using T = scalar_t;
    const T* mp = mean_c.defined() ? mean_c.const_data_ptr<T>() : nullptr;
    const T* pp = prec_c.defined() ? prec_c.const_data_ptr<T>() : nullptr;
    with_chain_model<T>(spec, [&](auto m) {
      with_tier<kHmcSmallD<T>>(D, [&](auto tier) {
        constexpr int kD = decltype(tier)::value;
        hmc_chain_kernel<T, kD><<<blocks, kChainThreads, 0, c10::cuda::getCurrentCUDAStream()>>>(
            xc.const_data_ptr<T>(), out.mutable_data_ptr<T>(), acc.mutable_data_ptr<T>(), traj.mutable_data_ptr<T>(), B,
            int(D), m, mp, pp, n_steps, T(step_size), n_leapfrog, thin, philox);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
      });
    });
  });
  return {out, acc, traj};
}

JK_LIBRARY_IMPL(CUDA, m) {
  m.impl("gaussian_energy", &gaussian_energy_cuda);
  m.impl("gaussian_score", &gaussian_score_cuda);
  EBM_IMPL_LOCAL_OPS(m, local_cuda);
  m.impl("langevin_step", &langevin_step_cuda);
  m.impl("langevin_step_", &langevin_step_inplace_cuda);
  m.impl("langevin_chain", &langevin_chain_cuda);
  m.impl("hmc_chain", &hmc_chain_cuda);
}

}  // namespace ebm
