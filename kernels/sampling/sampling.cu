// Family `sampling`: CUDA kernels and their launchers (checks, allocation and registration are in
// sampling.cpp, which keeps this file's includes, and so its cold nvcc time, small).
//
// - normal: the floor is writing n*d outputs once, and the arithmetic is what limits, so per output
//   it is kept to a share of one Philox4x32-10 call (4 outputs per call, 8 for 16-bit outputs) and of
//   a Box-Muller pair (MUFU log2/sqrt/sin/cos), one FMA, a convert and a 16-byte store. The grid stride
//   is a multiple of d's period, so a thread's columns never change: its mean/std live in registers.
//   Draws are reserved from PyTorch's generator and read on the device (CUDA-graph safe, no host sync).
// - cem_update: the floor is reading the n_elite elite rows once. One block selects the elite (exact
//   radix select on order keys, 11 bits per pass, then a stable compaction: ties at the threshold go to
//   the lowest indices) into an ascending index list. Then a grid of (column tile) x (elite chunk)
//   blocks sums (x - shift) and (x - shift)^2 per column in float64 (shift = the first elite row, so
//   the sums do not cancel), and a small kernel adds the chunks in order (deterministic) and blends.
#include <ATen/Dispatch.h>
#include <ATen/ops/empty.h>

#include <algorithm>
#include <numeric>

#include "elementwise.cuh"  // jk::multiprocessor_count
#include "philox_cuda.cuh"
#include "reduce.cuh"
#include "sampling.h"

namespace sampling {

namespace {

// ---------------------------------------------------------------- normal

constexpr int kNormalThreads = 256;

// Thread t makes Philox calls t, t + stride, ... (kPer outputs each); stride * kPer is a multiple of d.
template <typename T, typename P>
__global__ void __launch_bounds__(kNormalThreads)
    normal_kernel(T* __restrict__ out, const P* __restrict__ mean, const P* __restrict__ std, int64_t total, int64_t d,
                  int64_t stride, bool vector, at::PhiloxCudaState philox) {
  constexpr int kPer = normals_per_call<T>();
  const int64_t first_call = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (first_call >= stride) return;
  const jk::PhiloxSeed seed = jk::unpack_philox(philox);
  P m[kPer], s[kPer];
  int64_t col = first_call * kPer % d;
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    s[j] = std[col];
    m[j] = mean_or_nan(mean[col], s[j]);
    if (++col == d) col = 0;
  }
  const int64_t calls = (total + kPer - 1) / kPer;
  for (int64_t c = first_call; c < calls; c += stride) {
    float z[kPer];
    normals<kPer>(seed, static_cast<uint64_t>(c), z);
    alignas(16) T v[kPer];
#pragma unroll
    for (int j = 0; j < kPer; ++j) v[j] = static_cast<T>(m[j] + s[j] * static_cast<P>(z[j]));
    const int64_t i0 = c * kPer;
    if (vector && i0 + kPer <= total) {
      uint4* dst = reinterpret_cast<uint4*>(out + i0);
#pragma unroll
      for (int q = 0; q < static_cast<int>(sizeof(v) / 16); ++q) dst[q] = reinterpret_cast<const uint4*>(v)[q];
    } else {
#pragma unroll
      for (int j = 0; j < kPer; ++j)
        if (i0 + j < total) out[i0 + j] = v[j];
    }
  }
}

}  // namespace

void normal_cuda(const at::Tensor& out, const at::Tensor& mean, const at::Tensor& std,
                 const std::optional<at::Generator>& generator) {
  const int64_t total = out.numel(), d = out.size(1);
  c10::cuda::CUDAGuard guard(out.device());
  auto stream = c10::cuda::getCurrentCUDAStream();
  const int sms = jk::multiprocessor_count(out.get_device());
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, out.scalar_type(), "normal_cuda", [&] {
    using P = std::conditional_t<std::is_same_v<scalar_t, double>, double, float>;
    constexpr int kPer = normals_per_call<scalar_t>();
    const int64_t calls = (total + kPer - 1) / kPer;
    // The smallest number of calls whose outputs span whole rows; the stride is the multiple of it
    // closest to one full wave of resident threads (or every call, if fewer).
    const int64_t period = d / std::gcd<int64_t>(d, kPer);
    const int64_t stride = std::min(calls, period * std::max<int64_t>(1, int64_t(sms) * 2048 / period));
    const int64_t blocks = (stride + kNormalThreads - 1) / kNormalThreads;
    const at::PhiloxCudaState philox = jk::cuda_philox_state(static_cast<uint64_t>(calls) * 4, generator);
    scalar_t* out_ptr = out.mutable_data_ptr<scalar_t>();
    const bool vector = reinterpret_cast<uintptr_t>(out_ptr) % 16 == 0;
    normal_kernel<scalar_t, P><<<blocks, kNormalThreads, 0, stream>>>(
        out_ptr, mean.const_data_ptr<P>(), std.const_data_ptr<P>(), total, d, stride, vector, philox);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
}

// ---------------------------------------------------------------- cem_update

namespace {

constexpr int kSelectThreads = 1024;
constexpr int kDigitBits = 11;
constexpr int kDigits = 1 << kDigitBits;
constexpr int kStatsThreads = 256;
constexpr int kFinishWarps = 8;
constexpr int kBatch = 16;  // score loads a thread of the one select block issues before using them

// Exclusive prefix sum over the block (blockDim.x == kSelectThreads); *total gets the sum.
__device__ unsigned long long block_exclusive_scan(unsigned long long v, unsigned long long* scratch,
                                                   unsigned long long* total) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  unsigned long long inclusive = v;
#pragma unroll
  for (int offset = 1; offset < 32; offset <<= 1) {
    const unsigned long long up = __shfl_up_sync(0xffffffffu, inclusive, offset);
    if (lane >= offset) inclusive += up;
  }
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 31) scratch[warp] = inclusive;
  __syncthreads();
  if (warp == 0) {
    unsigned long long w = scratch[lane], w_inclusive = w;
#pragma unroll
    for (int offset = 1; offset < 32; offset <<= 1) {
      const unsigned long long up = __shfl_up_sync(0xffffffffu, w_inclusive, offset);
      if (lane >= offset) w_inclusive += up;
    }
    scratch[32 + lane] = w_inclusive - w;
  }
  __syncthreads();
  *total = scratch[32 + 31] + scratch[31];
  return scratch[32 + warp] + inclusive - v;
}

// f(i, key) for i = begin, begin + step, ... < end, in that order; one block reads all the scores, so
// each thread issues kBatch loads before it uses any (latency, not bandwidth, is what limits).
template <typename S, typename F>
__device__ __forceinline__ void for_each_key(const S* __restrict__ scores, int begin, int end, int step, bool maximize,
                                             F f) {
  using K = typename KeyOf<S>::key;
  using R = typename KeyOf<S>::real;
  for (int base = begin; base < end; base += kBatch * step) {
    S v[kBatch];
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int i = base + u * step;
      if (i < end) v[u] = scores[i];
    }
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int i = base + u * step;
      if (i < end) f(i, order_key<K>(static_cast<R>(v[u]), maximize));
    }
  }
}

// One block: the n_elite smallest order keys, as ascending row indices (ties to the lower index).
template <typename S>
__global__ void __launch_bounds__(kSelectThreads)
    select_elite_kernel(const S* __restrict__ scores, int n, int n_elite, bool maximize, int* __restrict__ elite) {
  using K = typename KeyOf<S>::key;
  __shared__ unsigned int hist[kDigits];
  __shared__ unsigned long long scratch[64];
  __shared__ K s_prefix;
  __shared__ int s_rank;
  K prefix = 0, mask = 0;
  int rank = n_elite;  // the threshold is the rank-th smallest key among the candidates (1-based)
  for (int shift = 8 * sizeof(K); shift > 0;) {
    const int width = min(kDigitBits, shift);
    shift -= width;
    const K digit_mask = (K(1) << width) - 1;
    for (int b = threadIdx.x; b < kDigits; b += blockDim.x) hist[b] = 0;
    __syncthreads();
    // Scores cluster in few top-digit bins, so lanes with one bin add once (else the atomics serialize).
    const int lane = threadIdx.x & 31;
    for (int base = 0; base < n; base += kBatch * blockDim.x) {  // the same trip count in every thread
      S v[kBatch];
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        const int i = base + u * blockDim.x + threadIdx.x;
        v[u] = i < n ? scores[i] : S(0);
      }
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        const int i = base + u * blockDim.x + threadIdx.x;
        const K key = order_key<K>(static_cast<typename KeyOf<S>::real>(v[u]), maximize);
        const bool hit = i < n && (key & mask) == prefix;
        const unsigned int bin = hit ? static_cast<unsigned int>((key >> shift) & digit_mask) : ~0u;
        const unsigned int peers = __match_any_sync(0xffffffffu, bin);
        if (hit && lane == __ffs(peers) - 1) atomicAdd(&hist[bin], static_cast<unsigned int>(__popc(peers)));
      }
    }
    __syncthreads();
    // Thread t owns bins 2t and 2t + 1; the one whose range holds the rank picks the digit.
    const unsigned int h0 = hist[2 * threadIdx.x], h1 = hist[2 * threadIdx.x + 1];
    unsigned long long sum;
    const unsigned long long before = block_exclusive_scan(h0 + h1, scratch, &sum);
    if (before < static_cast<unsigned long long>(rank) && static_cast<unsigned long long>(rank) <= before + h0 + h1) {
      const bool low = rank <= before + h0;
      s_prefix = prefix | (static_cast<K>(2 * threadIdx.x + (low ? 0 : 1)) << shift);
      s_rank = rank - static_cast<int>(before + (low ? 0 : h0));
    }
    __syncthreads();
    prefix = s_prefix;
    rank = s_rank;
    mask |= digit_mask << shift;
  }
  // prefix is the threshold key; take every smaller key and the first `rank` equal ones, in index
  // order. Thread t walks rows [t * per, (t + 1) * per): count, scan, then write.
  const int per = (n + blockDim.x - 1) / blockDim.x;
  const int i0 = min(n, static_cast<int>(threadIdx.x) * per), i1 = min(n, i0 + per);
  unsigned long long counts = 0;  // less in the high 32 bits, equal in the low 32
  for_each_key<S>(scores, i0, i1, 1, maximize, [&](int, K key) {
    counts += key < prefix ? (1ull << 32) : (key == prefix ? 1ull : 0ull);
  });
  unsigned long long total;
  const unsigned long long start = block_exclusive_scan(counts, scratch, &total);
  int less = static_cast<int>(start >> 32), equal = static_cast<int>(start & 0xffffffffu);
  for_each_key<S>(scores, i0, i1, 1, maximize, [&](int i, K key) {
    if (key < prefix) {
      elite[less + min(equal, rank)] = i;
      ++less;
    } else if (key == prefix) {
      if (equal < rank) elite[less + equal] = i;
      ++equal;
    }
  });
}

// Per column and elite chunk: sums of (x - shift) and (x - shift)^2, shift = the first elite row.
template <typename T>
__global__ void __launch_bounds__(kStatsThreads)
    elite_sums_kernel(const T* __restrict__ x, int64_t d, const int* __restrict__ elite, int n_elite, int rows_per_chunk,
                      double* __restrict__ part_sum, double* __restrict__ part_sq) {
  const int64_t col = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (col >= d) return;
  const double shift = static_cast<double>(x[elite[0] * d + col]);
  const int r0 = blockIdx.y * rows_per_chunk, r1 = min(n_elite, r0 + rows_per_chunk);
  double sum = 0, sq = 0;
  constexpr int kUnroll = 8;  // loads in flight per thread
  int r = r0;
  for (; r + kUnroll <= r1; r += kUnroll) {
    T v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) v[u] = x[elite[r + u] * d + col];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const double dev = static_cast<double>(v[u]) - shift;
      sum += dev;
      sq += dev * dev;
    }
  }
  for (; r < r1; ++r) {
    const double dev = static_cast<double>(x[elite[r] * d + col]) - shift;
    sum += dev;
    sq += dev * dev;
  }
  part_sum[blockIdx.y * d + col] = sum;
  part_sq[blockIdx.y * d + col] = sq;
}

// Adds the chunks in order, turns the sums into mean and population std, and blends.
template <typename T, typename A>
__global__ void __launch_bounds__(kFinishWarps * 32)
    elite_finish_kernel(const T* __restrict__ x, int64_t d, const int* __restrict__ elite, int n_elite, int chunks,
                        const double* __restrict__ part_sum, const double* __restrict__ part_sq,
                        const T* __restrict__ old_mean, const T* __restrict__ old_std, A smoothing, A min_std,
                        T* __restrict__ new_mean, T* __restrict__ new_std) {
  // Warp w adds chunks w, w + 8, ...; then warp 0 adds the warps in order (deterministic).
  __shared__ double s_sum[kFinishWarps][32], s_sq[kFinishWarps][32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t col = static_cast<int64_t>(blockIdx.x) * 32 + lane;
  double sum = 0, sq = 0;
  if (col < d) {
#pragma unroll 4
    for (int q = warp; q < chunks; q += kFinishWarps) {
      sum += part_sum[q * d + col];
      sq += part_sq[q * d + col];
    }
  }
  s_sum[warp][lane] = sum;
  s_sq[warp][lane] = sq;
  __syncthreads();
  if (warp != 0 || col >= d) return;
  for (int w = 1; w < kFinishWarps; ++w) {
    sum += s_sum[w][lane];
    sq += s_sq[w][lane];
  }
  const double mean_dev = sum / n_elite;
  const double var = sq / n_elite - mean_dev * mean_dev;
  const A fit_mean = static_cast<A>(static_cast<double>(x[elite[0] * d + col]) + mean_dev);
  const A fit_std = static_cast<A>(sqrt(var > 0 ? var : 0.0));  // NaN stays NaN
  A m, s;
  blend<A>(fit_mean, var != var ? A(NAN) : fit_std, static_cast<A>(old_mean[col]), static_cast<A>(old_std[col]),
           smoothing, min_std, &m, &s);
  new_mean[col] = static_cast<T>(m);
  new_std[col] = static_cast<T>(s);
}

}  // namespace

void cem_update_cuda(const at::Tensor& new_mean, const at::Tensor& new_std, const at::Tensor& samples,
                     const at::Tensor& scores, int64_t n_elite, const at::Tensor& mean, const at::Tensor& std,
                     double smoothing, double min_std, bool maximize) {
  c10::cuda::CUDAGuard guard(samples.device());
  auto stream = c10::cuda::getCurrentCUDAStream();
  const int n = static_cast<int>(samples.size(0)), elite_n = static_cast<int>(n_elite);
  const int64_t d = samples.size(1);
  const int sms = jk::multiprocessor_count(samples.get_device());
  // Sums grid: column tiles x elite chunks, about four blocks per SM, at least 16 rows a chunk.
  const int64_t tiles = (d + kStatsThreads - 1) / kStatsThreads;
  const int max_chunks = static_cast<int>(std::min<int64_t>((elite_n + 15) / 16, 65535));
  int chunks = static_cast<int>(std::clamp<int64_t>((4 * sms + tiles - 1) / tiles, 1, max_chunks));
  const int rows_per_chunk = (elite_n + chunks - 1) / chunks;
  chunks = (elite_n + rows_per_chunk - 1) / rows_per_chunk;
  // One scratch buffer: the partial sums (float64) and the elite index list.
  const at::Tensor scratch = at::empty({2 * chunks * d + (elite_n + 1) / 2}, samples.options().dtype(at::kDouble));
  double* part_sum = scratch.mutable_data_ptr<double>();
  double* part_sq = part_sum + chunks * d;
  int* elite = reinterpret_cast<int*>(part_sq + chunks * d);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, scores.scalar_type(), "cem_select_cuda", [&] {
    select_elite_kernel<scalar_t><<<1, kSelectThreads, 0, stream>>>(scores.const_data_ptr<scalar_t>(), n, elite_n,
                                                                     maximize, elite);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, samples.scalar_type(), "cem_stats_cuda", [&] {
    using A = std::conditional_t<std::is_same_v<scalar_t, double>, double, float>;
    const scalar_t* x = samples.const_data_ptr<scalar_t>();
    elite_sums_kernel<scalar_t><<<dim3(tiles, chunks), kStatsThreads, 0, stream>>>(x, d, elite, elite_n,
                                                                                   rows_per_chunk, part_sum, part_sq);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    elite_finish_kernel<scalar_t, A><<<(d + 31) / 32, kFinishWarps * 32, 0, stream>>>(
        x, d, elite, elite_n, chunks, part_sum, part_sq, mean.const_data_ptr<scalar_t>(),
        std.const_data_ptr<scalar_t>(), static_cast<A>(smoothing), static_cast<A>(min_std),
        new_mean.mutable_data_ptr<scalar_t>(), new_std.mutable_data_ptr<scalar_t>());
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
}

}  // namespace sampling
