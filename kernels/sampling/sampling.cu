// Family `sampling`: CUDA kernels and their launchers (checks, allocation and registration are in
// sampling.cpp, which keeps this file's includes, and so its cold nvcc time, small).
//
// - normal: the floor is writing n*d outputs once, and the arithmetic is what limits, so per output
//   it is kept to a share of one Philox4x32-10 call (4 outputs per call, 8 for 16-bit outputs) and of
//   a Box-Muller pair (MUFU log2/sqrt/sin/cos), one FMA, a convert and a 16-byte store. The grid stride
//   is a multiple of d's period, so a thread's columns never change: its mean/std live in registers.
//   Draws are reserved from PyTorch's generator and read on the device (CUDA-graph safe, no host sync).
// - cem_update: the floor is reading the n_elite elite rows once (plus the n scores). Selection is an
//   exact radix select of the n_elite-th smallest order key (8 bits per pass), each pass a multi-block
//   histogram kernel whose last block picks the bin, so nothing waits on the host. Ties at the
//   threshold go to the lowest indices: a small kernel counts threshold-equal keys per row chunk, and
//   the stats kernel ranks them by index. The stats kernel is a grid of (32-column tile) x (row chunk)
//   blocks; each compacts its chunk's elite rows into shared memory in index order, accumulates
//   Welford mean/M2 per column (float32; float64 for float64 samples), merges warps and then chunks
//   with Chan's formula in a fixed order (deterministic), and the last block of each tile writes out.
#include <ATen/Dispatch.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>

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

namespace {

// ---------------------------------------------------------------- cem_update: selection

constexpr int kRadixBins = 256;  // 8 bits per pass
constexpr int kRadixThreads = 512;
constexpr int kStatsWarps = 8;
constexpr int kStatsCols = 32;   // columns per stats block: one per lane, 128-byte rows for float32
constexpr int kStatsSub = 1024;  // rows compacted per round (shared memory)

// state[p] = {prefix, mask, k} before pass p: candidates have (key & mask) == prefix and the k-th
// smallest candidate is the threshold. state[passes] = {threshold key, ~0, how many equal keys to take}.
template <typename S>
__global__ void __launch_bounds__(kRadixThreads)
    radix_pass_kernel(const S* __restrict__ scores, int64_t n, bool maximize, int pass, int shift, int64_t n_elite,
                      unsigned long long* __restrict__ hist_all, unsigned long long* __restrict__ state,
                      unsigned int* __restrict__ done) {
  using K = typename KeyOf<S>::key;
  using R = typename KeyOf<S>::real;
  // One histogram column per lane (padded to 33 so the per-bin sums are bank-conflict free): lanes of a
  // warp never hit one address, however clustered the scores are.
  __shared__ unsigned int hist[kRadixBins * 33];
  __shared__ bool is_last;
  for (int i = threadIdx.x; i < kRadixBins * 33; i += blockDim.x) hist[i] = 0;
  const unsigned long long prefix = pass > 0 ? state[3 * pass] : 0ull;
  const unsigned long long mask = pass > 0 ? state[3 * pass + 1] : 0ull;
  __syncthreads();
  const int lane = threadIdx.x & 31;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const unsigned long long key = order_key<K>(static_cast<R>(scores[i]), maximize);
    if ((key & mask) == prefix) atomicAdd(&hist[((key >> shift) & (kRadixBins - 1)) * 33 + lane], 1u);
  }
  __syncthreads();
  unsigned long long* hist_g = hist_all + static_cast<int64_t>(pass) * kRadixBins;
  for (int b = threadIdx.x; b < kRadixBins; b += blockDim.x) {
    unsigned int sum = 0;
    for (int l = 0; l < 32; ++l) sum += hist[b * 33 + l];
    if (sum) atomicAdd(hist_g + b, static_cast<unsigned long long>(sum));
  }
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) is_last = atomicAdd(done + pass, 1u) == gridDim.x - 1;
  __syncthreads();
  if (!is_last || threadIdx.x >= 32) return;
  __threadfence();
  // The last block's first warp finds the bin holding the k-th candidate: 8 bins per lane.
  const unsigned long long k = pass > 0 ? state[3 * pass + 2] : static_cast<unsigned long long>(n_elite);
  unsigned long long counts[kRadixBins / 32], sum = 0;
#pragma unroll
  for (int j = 0; j < kRadixBins / 32; ++j) {
    counts[j] = __ldcg(hist_g + lane * (kRadixBins / 32) + j);
    sum += counts[j];
  }
  unsigned long long inclusive = sum;
#pragma unroll
  for (int offset = 1; offset < 32; offset <<= 1) {
    const unsigned long long up = __shfl_up_sync(0xffffffffu, inclusive, offset);
    if (lane >= offset) inclusive += up;
  }
  unsigned long long before = inclusive - sum;
  if (before < k && k <= inclusive) {  // exactly one lane
    for (int j = 0; j < kRadixBins / 32; ++j) {
      if (k <= before + counts[j]) {
        const unsigned long long bin = lane * (kRadixBins / 32) + j;
        state[3 * (pass + 1)] = prefix | (bin << shift);
        state[3 * (pass + 1) + 1] = mask | (static_cast<unsigned long long>(kRadixBins - 1) << shift);
        state[3 * (pass + 1) + 2] = k - before;
        break;
      }
      before += counts[j];
    }
  }
}

// How many keys equal the threshold in each row chunk (ties are taken by lowest index).
template <typename S>
__global__ void __launch_bounds__(256)
    count_ties_kernel(const S* __restrict__ scores, int64_t n, bool maximize, int64_t chunk,
                      const unsigned long long* __restrict__ final_state, long long* __restrict__ tie_counts) {
  using K = typename KeyOf<S>::key;
  using R = typename KeyOf<S>::real;
  __shared__ long long scratch[32];
  const K threshold = static_cast<K>(final_state[0]);
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * chunk, row1 = std::min(n, row0 + chunk);
  long long count = 0;
  for (int64_t i = row0 + threadIdx.x; i < row1; i += blockDim.x)
    count += order_key<K>(static_cast<R>(scores[i]), maximize) == threshold;
  count = jk::block_sum(count, scratch);
  if (threadIdx.x == 0) tie_counts[blockIdx.x] = count;
}

// ---------------------------------------------------------------- cem_update: statistics

template <typename A>
__device__ __forceinline__ void chan_merge(long long& n_a, A& mean_a, A& m2_a, long long n_b, A mean_b, A m2_b) {
  if (n_b == 0) return;
  const long long n = n_a + n_b;
  const A delta = mean_b - mean_a;
  mean_a += delta * (static_cast<A>(n_b) / static_cast<A>(n));
  m2_a += m2_b + delta * delta * (static_cast<A>(n_a) * static_cast<A>(n_b) / static_cast<A>(n));
  n_a = n;
}

template <typename T, typename S, typename A>
__global__ void __launch_bounds__(kStatsWarps * 32)
    elite_stats_kernel(const T* __restrict__ x, const S* __restrict__ scores, int64_t n, int64_t d, bool maximize,
                       int64_t chunk, const unsigned long long* __restrict__ final_state,
                       const long long* __restrict__ tie_counts, A* __restrict__ part_mean, A* __restrict__ part_m2,
                       long long* __restrict__ part_count, unsigned int* __restrict__ tile_done,
                       const T* __restrict__ old_mean, const T* __restrict__ old_std, A smoothing, A min_std,
                       T* __restrict__ new_mean, T* __restrict__ new_std) {
  using K = typename KeyOf<S>::key;
  using R = typename KeyOf<S>::real;
  __shared__ int64_t rows[kStatsSub];
  __shared__ long long s_ties_before;
  __shared__ int s_eq[kStatsWarps], s_take[kStatsWarps];
  __shared__ A s_mean[kStatsWarps][32], s_m2[kStatsWarps][32];
  __shared__ long long s_count[kStatsWarps];
  __shared__ bool is_last;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const unsigned lanes_before = (1u << lane) - 1u;
  const int64_t tile = blockIdx.x, r = blockIdx.y;
  const int64_t col = tile * kStatsCols + lane;
  const bool col_ok = col < d;
  const K threshold = static_cast<K>(final_state[0]);
  const long long ties_wanted = static_cast<long long>(final_state[2]);
  const int64_t row0 = r * chunk, row1 = std::min(n, row0 + chunk);
  if (warp == 0) {
    long long s = 0;
    for (int64_t q = lane; q < r; q += 32) s += tie_counts[q];
    s = jk::warp_sum(s);
    if (lane == 0) s_ties_before = s;
  }
  __syncthreads();
  long long ties_before = s_ties_before;  // threshold-equal keys at lower indices than this round
  long long count = 0;                    // rows this warp has accumulated (warp-uniform)
  A mean = A(0), m2 = A(0);
  for (int64_t sub0 = row0; sub0 < row1; sub0 += kStatsSub) {
    const int64_t sub1 = std::min(row1, sub0 + kStatsSub);
    int taken = 0;  // block-uniform
    // Compact this round's elite rows into rows[], ascending.
    for (int64_t base = sub0; base < sub1; base += blockDim.x) {
      const int64_t i = base + threadIdx.x;
      bool less = false, eq = false;
      if (i < sub1) {
        const K key = order_key<K>(static_cast<R>(scores[i]), maximize);
        less = key < threshold;
        eq = key == threshold;
      }
      const unsigned eq_bits = __ballot_sync(0xffffffffu, eq);
      if (lane == 0) s_eq[warp] = __popc(eq_bits);
      __syncthreads();
      long long eq_rank = ties_before + __popc(eq_bits & lanes_before);
      int eq_round = 0;
      for (int w = 0; w < kStatsWarps; ++w) {
        if (w < warp) eq_rank += s_eq[w];
        eq_round += s_eq[w];
      }
      const bool take = less || (eq && eq_rank < ties_wanted);
      const unsigned take_bits = __ballot_sync(0xffffffffu, take);
      if (lane == 0) s_take[warp] = __popc(take_bits);
      __syncthreads();
      int pos = taken + __popc(take_bits & lanes_before), take_round = 0;
      for (int w = 0; w < kStatsWarps; ++w) {
        if (w < warp) pos += s_take[w];
        take_round += s_take[w];
      }
      if (take) rows[pos] = i;
      taken += take_round;
      ties_before += eq_round;
      __syncthreads();  // s_eq / s_take are rewritten next time; rows[] is complete after the loop
    }
    // Warp w accumulates rows w, w + 8, ...; four rows' loads are issued before their updates.
    int e = warp;
    for (; e + 3 * kStatsWarps < taken; e += 4 * kStatsWarps) {
      A v[4];
#pragma unroll
      for (int u = 0; u < 4; ++u) v[u] = col_ok ? static_cast<A>(x[rows[e + u * kStatsWarps] * d + col]) : A(0);
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        ++count;
        const A delta = v[u] - mean;
        mean += delta / static_cast<A>(count);
        m2 += delta * (v[u] - mean);
      }
    }
    for (; e < taken; e += kStatsWarps) {
      const A v = col_ok ? static_cast<A>(x[rows[e] * d + col]) : A(0);
      ++count;
      const A delta = v - mean;
      mean += delta / static_cast<A>(count);
      m2 += delta * (v - mean);
    }
    __syncthreads();  // rows[] is rewritten by the next round
  }
  // Merge the warps (in order), publish this chunk's partial.
  s_mean[warp][lane] = mean;
  s_m2[warp][lane] = m2;
  if (lane == 0) s_count[warp] = count;
  __syncthreads();
  if (warp == 0) {
    long long bn = 0;
    A bm = A(0), bm2 = A(0);
    for (int w = 0; w < kStatsWarps; ++w) chan_merge(bn, bm, bm2, s_count[w], s_mean[w][lane], s_m2[w][lane]);
    if (col_ok) {
      part_mean[r * d + col] = bm;
      part_m2[r * d + col] = bm2;
    }
    if (lane == 0) part_count[r * gridDim.x + tile] = bn;
  }
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) is_last = atomicAdd(tile_done + tile, 1u) == gridDim.y - 1;
  __syncthreads();
  if (!is_last) return;
  __threadfence();
  // The tile's last block merges the chunks: warp w takes chunks w, w + 8, ..., then the warps in order.
  long long gn = 0;
  A gm = A(0), gm2 = A(0);
  for (int64_t q = warp; q < gridDim.y; q += kStatsWarps) {
    const long long nb = __ldcg(part_count + q * gridDim.x + tile);
    if (col_ok) {
      chan_merge(gn, gm, gm2, nb, __ldcg(part_mean + q * d + col), __ldcg(part_m2 + q * d + col));
    }
  }
  s_mean[warp][lane] = gm;
  s_m2[warp][lane] = gm2;
  s_count[warp] = 0;
  __syncthreads();
  if (lane == 0) s_count[warp] = gn;  // same on every lane with col_ok; lane 0 always has col_ok
  __syncthreads();
  if (warp == 0 && col_ok) {
    long long tn = 0;
    A tm = A(0), tm2 = A(0);
    for (int w = 0; w < kStatsWarps; ++w) chan_merge(tn, tm, tm2, s_count[w], s_mean[w][lane], s_m2[w][lane]);
    const A var = tn > 0 ? tm2 / static_cast<A>(tn) : A(NAN);
    A m, s;
    blend<A>(tm, sqrt(var > A(0) ? var : A(0)), static_cast<A>(old_mean[col]), static_cast<A>(old_std[col]),
             smoothing, min_std, &m, &s);
    new_mean[col] = static_cast<T>(m);
    new_std[col] = static_cast<T>(s);
  }
}

}  // namespace

void cem_update_cuda(const at::Tensor& new_mean, const at::Tensor& new_std, const at::Tensor& samples,
                     const at::Tensor& scores, int64_t n_elite, const at::Tensor& mean, const at::Tensor& std,
                     double smoothing, double min_std, bool maximize) {
  c10::cuda::CUDAGuard guard(samples.device());
  const int64_t n = samples.size(0), d = samples.size(1);
  const at::Tensor &x = samples, &sc = scores, &m_old = mean, &s_old = std;  // contiguous (sampling.cpp)
  const int sms = jk::multiprocessor_count(samples.get_device());
  const int key_bits = scores.scalar_type() == at::kDouble ? 64 : 32;
  const int passes = key_bits / 8;
  // Stats grid: 32-column tiles x row chunks, about four blocks per SM.
  const int64_t tiles = (d + kStatsCols - 1) / kStatsCols;
  int64_t chunks = std::clamp<int64_t>((4 * sms + tiles - 1) / tiles, 1, std::min<int64_t>((n + 255) / 256, 65535));
  const int64_t chunk = (n + chunks - 1) / chunks;
  chunks = (n + chunk - 1) / chunk;
  // One zeroed scratch buffer (one memset): histograms, select states, counters, partial counts.
  const int64_t off_hist = 0, off_state = off_hist + passes * kRadixBins, off_done = off_state + 3 * (passes + 1);
  const int64_t off_ties = off_done + passes, off_pcount = off_ties + chunks, off_tile_done = off_pcount + chunks * tiles;
  const at::Tensor scratch = at::zeros({off_tile_done + tiles}, samples.options().dtype(at::kLong));
  auto* base = reinterpret_cast<unsigned long long*>(scratch.mutable_data_ptr<int64_t>());
  auto stream = c10::cuda::getCurrentCUDAStream();
  const int64_t radix_blocks =
      std::max<int64_t>(1, std::min<int64_t>((n + kRadixThreads * 4 - 1) / (kRadixThreads * 4), 2 * sms));
  const at::ScalarType acc_type = samples.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  const at::Tensor part_mean = at::empty({chunks, d}, samples.options().dtype(acc_type));
  const at::Tensor part_m2 = at::empty({chunks, d}, samples.options().dtype(acc_type));
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, scores.scalar_type(), "cem_select_cuda", [&] {
    using S = scalar_t;
    const S* sp = sc.const_data_ptr<S>();
    for (int p = 0; p < passes; ++p) {
      radix_pass_kernel<S><<<radix_blocks, kRadixThreads, 0, stream>>>(
          sp, n, maximize, p, key_bits - 8 * (p + 1), n_elite, base + off_hist, base + off_state,
          reinterpret_cast<unsigned int*>(base + off_done));
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
    const unsigned long long* final_state = base + off_state + 3 * passes;
    count_ties_kernel<S><<<chunks, 256, 0, stream>>>(sp, n, maximize, chunk, final_state,
                                                     reinterpret_cast<long long*>(base + off_ties));
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, samples.scalar_type(), "cem_stats_cuda", [&] {
      using A = std::conditional_t<std::is_same_v<scalar_t, double>, double, float>;
      elite_stats_kernel<scalar_t, S, A><<<dim3(tiles, chunks), kStatsWarps * 32, 0, stream>>>(
          x.const_data_ptr<scalar_t>(), sp, n, d, maximize, chunk, final_state,
          reinterpret_cast<const long long*>(base + off_ties), part_mean.mutable_data_ptr<A>(),
          part_m2.mutable_data_ptr<A>(), reinterpret_cast<long long*>(base + off_pcount),
          reinterpret_cast<unsigned int*>(base + off_tile_done), m_old.const_data_ptr<scalar_t>(),
          s_old.const_data_ptr<scalar_t>(), static_cast<A>(smoothing), static_cast<A>(min_std),
          new_mean.mutable_data_ptr<scalar_t>(), new_std.mutable_data_ptr<scalar_t>());
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    });
  });
}

}  // namespace sampling
