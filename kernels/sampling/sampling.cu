// Family `sampling`: CUDA kernels and their launchers. Checks, the device guard, the stream, scratch
// memory, the generator and registration are in sampling.cpp (through cuda_launch.cuh), so this file
// includes no tensor header and its cold nvcc time is its own code's.
//
// - normal: the floor is writing n*d outputs once, and the arithmetic is what limits, so per output
//   it is kept to a share of one Philox4x32-10 call (4 outputs per call, 8 for 16-bit outputs), of a
//   Box-Muller pair (log2, sqrt, sin and cos on the MUFU unit; 16-bit outputs take the fewest
//   instructions: see sampling.h), one FMA, a convert (one per two 16-bit outputs) and a 16-byte
//   store (streaming, evict-first stores measured slower for bfloat16 on the H200: 318 against
//   305 us). The grid is one wave of resident blocks and its stride a multiple of d's period, so a
//   thread's columns never change: its mean/std live in registers.
//   Draws are reserved from PyTorch's generator and read on the device (CUDA-graph safe, no host sync).
// - cem_update: the floor is reading the n_elite elite rows once (plus the n scores). Every step is
//   many blocks, nothing waits on the host, 7 kernels for 32-bit score keys, each after the first a
//   programmatic dependent launch (its launch overlaps the previous kernel; see launch_after_previous):
//   1. zero the counters;
//   2. exact radix select of the n_elite-th smallest order key, 11 bits per pass (3 passes for
//      float/half/bf16 scores, 6 for float64): a multi-block histogram whose last block picks the bin;
//   3. the elite list: row indices in ascending order (ties at the threshold to the lowest indices),
//      each 2048-row chunk ranking its rows after the counts of the chunks before it (a look-back over
//      published counts, chunk numbers taken in block start order);
//   4. statistics: a grid of (column segment) x (elite rank range) blocks, each summing x - x0 and
//      (x - x0)^2 over its rows (x0 its first row; float32, float64 for float64 samples), whole rows
//      read coalesced, 8 rows of loads in flight; out as per-range mean and M2;
//   5. merge: float64, fixed order (deterministic), blend with the old mean/std.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <atomic>
#include <numeric>

#include "cuda_launch.cuh"
#include "dependent_launch.cuh"
#include "elementwise_kernel.cuh"  // jk::aligned16
#include "philox_cuda.cuh"
#include "reduce.cuh"
#include "sampling.h"

namespace sampling {

namespace {

// ---------------------------------------------------------------- normal

constexpr int kNormalThreads = 256;

// Two outputs rounded into the 16-bit halves of one word (one F2FP per pair for bf16/half).
template <typename T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  if constexpr (std::is_same_v<T, c10::BFloat16>) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&v);
  } else {
    static_assert(std::is_same_v<T, c10::Half>, "16-bit outputs are bfloat16 or half");
    const __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&v);
  }
}

// Thread t makes Philox calls t, t + stride, ... (kPer outputs each); stride * kPer is a multiple of d.
template <typename T, typename P>
__global__ void __launch_bounds__(kNormalThreads)
    normal_kernel(T* __restrict__ out, const P* __restrict__ mean, const P* __restrict__ std, int64_t total, int64_t d,
                  int64_t stride, bool vector, at::PhiloxCudaState philox) {
  constexpr int kPer = normals_per_call<T>();
  const int64_t first_call = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (first_call >= stride) return;
  const PhiloxKeyed draws(jk::unpack_philox(philox));  // round keys once per thread, not once per call
  P m[kPer], s[kPer];  // s holds std * normal_scale: the draws come divided by it
  int64_t col = first_call * kPer % d;
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    m[j] = mean_or_nan(mean[col], std[col]);
    s[j] = std[col] * static_cast<P>(normal_scale<kPer>());
    if (++col == d) col = 0;
  }
  // The kPer outputs of Philox counter `counter`, rounded to T (16-bit: two per F2FP).
  auto outputs = [&](uint64_t counter) {
    struct alignas(16) {
      T v[kPer];
    } o;
    float z[kPer];
    normals_of<kPer>(draws.at_counter(counter), z);
#pragma unroll
    for (int j = 0; j < kPer; j += 2) {
      if constexpr (sizeof(T) == 2) {
        const uint32_t pair = pack2<T>(m[j] + s[j] * z[j], m[j + 1] + s[j + 1] * z[j + 1]);
        memcpy(&o.v[j], &pair, sizeof(pair));
      } else {
        o.v[j] = static_cast<T>(m[j] + s[j] * static_cast<P>(z[j]));
        o.v[j + 1] = static_cast<T>(m[j + 1] + s[j + 1] * static_cast<P>(z[j + 1]));
      }
    }
    return o;
  };
  // Calls whose outputs all lie in out (all but a partial last one) take 16-byte stores when out is
  // aligned, in a loop that carries just the Philox counter and the store address (no per-call
  // bounds checks); the rest (that partial call, or all calls of a misaligned out) go element by
  // element.
  const int64_t calls = (total + kPer - 1) / kPer, whole = vector ? total / kPer : 0;
  int64_t c = first_call;
  if (c < whole) {
    constexpr int kWords = kPer * sizeof(T) / 16;  // 16-byte stores per call
    const uint64_t last = draws.first_counter + static_cast<uint64_t>(whole - 1);
    uint64_t counter = draws.first_counter + static_cast<uint64_t>(c);
    uint4* dst = reinterpret_cast<uint4*>(out) + c * kWords;
    // Two calls per trip: the constants ptxas reloads each trip and the branch serve both (SASS
    // per bf16 call: ~106 instructions, 112 without).
#pragma unroll 2
    do {
      const auto o = outputs(counter);
#pragma unroll
      for (int q = 0; q < kWords; ++q) dst[q] = reinterpret_cast<const uint4*>(o.v)[q];
      counter += static_cast<uint64_t>(stride);
      dst += stride * kWords;
    } while (counter <= last);
    c = static_cast<int64_t>(counter - draws.first_counter);
  }
  for (; c < calls; c += stride) {
    const auto o = outputs(draws.first_counter + static_cast<uint64_t>(c));
#pragma unroll
    for (int j = 0; j < kPer; ++j)
      if (c * kPer + j < total) out[c * kPer + j] = o.v[j];
  }
}

}  // namespace

void normal_cuda(jk::CudaLaunch& launch, const jk::CudaTensor& out, const jk::CudaTensor& mean,
                 const jk::CudaTensor& std) {
  const int64_t total = out.numel(), d = out.size(1);
  const int sms = launch.multiprocessors;
  jk::dispatch_float(out.scalar_type(), [&](auto zero) {
    using scalar_t = decltype(zero);
    using P = std::conditional_t<std::is_same_v<scalar_t, double>, double, float>;
    constexpr int kPer = normals_per_call<scalar_t>();
    const auto kernel = normal_kernel<scalar_t, P>;
    // Blocks that fit on an SM at once (registers decide): the grid is at most one full wave, so
    // no SM gets a second, partial round of blocks (whose threads each run the whole loop).
    static const int resident_blocks = jk::blocks_per_sm(launch, kernel, kNormalThreads);
    const int64_t calls = (total + kPer - 1) / kPer;
    // The smallest number of calls whose outputs span whole rows; the stride is the multiple of it
    // closest to one full wave of resident threads (or every call, if fewer).
    const int64_t period = d / std::gcd<int64_t>(d, kPer);
    const int64_t wave = static_cast<int64_t>(sms) * resident_blocks * kNormalThreads;
    const int64_t stride = std::min(calls, period * std::max<int64_t>(1, wave / period));
    const int64_t blocks = (stride + kNormalThreads - 1) / kNormalThreads;
    const at::PhiloxCudaState philox = launch.philox(static_cast<uint64_t>(calls) * 4);
    scalar_t* out_ptr = out.mutable_data_ptr<scalar_t>();
    const bool vector = jk::aligned16(out_ptr);
    kernel<<<blocks, kNormalThreads, 0, launch.stream>>>(out_ptr, mean.const_data_ptr<P>(), std.const_data_ptr<P>(),
                                                         total, d, stride, vector, philox);
    JK_CUDA_LAUNCH_CHECK(launch);
  });
}

namespace {

// ---------------------------------------------------------------- cem_update: selection

constexpr int kSelectThreads = 256;
constexpr int kSelectPer = 8;                                // scores per thread
constexpr int kSelectRows = kSelectThreads * kSelectPer;     // scores per select block (a list tile)
constexpr int kDigitBits = 11;                               // bits resolved per select pass
constexpr int kMaxBins = 1 << kDigitBits;                    // = kSelectThreads * 8
constexpr unsigned long long kPublished = 1ull << 63;        // a chunk's count is there
constexpr int kStatsThreads = 256;
constexpr int kStatsCols = 4;  // columns per thread (strided by the block width: coalesced)
constexpr int kStatsRows = 8;  // elite rows whose loads are issued before they are used
constexpr int kMergeWarps = 32;

// Each cem_update kernel after the first is a programmatic dependent launch (dependent_launch.cuh).
using jk::launch_after_previous;
using jk::let_next_kernel_launch;
using jk::wait_for_previous_kernel;

// The counters of one cem_update (its scratch is fresh from the allocator): launched in plain stream
// order, like a memset, but a kernel, so the first select pass can be a dependent launch.
__global__ void zero_words_kernel(unsigned long long* __restrict__ words, int64_t count) {
  let_next_kernel_launch();
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    words[i] = 0ull;
}

// Exclusive prefix sum over a block of kSelectThreads; *total gets the block's sum.
template <typename T>
__device__ __forceinline__ T block_exclusive_scan(T value, T* scratch, T* total) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  T inclusive = value;
#pragma unroll
  for (int offset = 1; offset < 32; offset <<= 1) {
    const T up = __shfl_up_sync(0xffffffffu, inclusive, offset);
    if (lane >= offset) inclusive += up;
  }
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 31) scratch[warp] = inclusive;
  __syncthreads();
  T before = 0, sum = 0;
#pragma unroll
  for (int w = 0; w < kSelectThreads / 32; ++w) {
    const T s = scratch[w];
    if (w < warp) before += s;
    sum += s;
  }
  *total = sum;
  return before + inclusive - value;
}

// One radix-select pass over all n order keys: the candidates (key & mask) == prefix are counted by
// the `bits`-bit digit at `shift` into a global histogram (shared-memory histogram per block, equal
// digits of a warp aggregated with __match_any_sync, one global atomic per nonzero bin); the last
// block to finish finds the digit that holds the k-th smallest candidate and writes the next state.
// state[3p..3p+2] = {prefix, mask, k} before pass p; after the last pass {threshold key T, ~0, how
// many T-equal keys the elite takes (the lowest indices)}.
template <typename S>
__global__ void __launch_bounds__(kSelectThreads)
    select_pass_kernel(const S* __restrict__ scores, int64_t n, bool maximize, int pass, int shift, int bits,
                       int64_t n_elite, unsigned long long* __restrict__ hist_all,
                       unsigned long long* __restrict__ state, unsigned int* __restrict__ done) {
  wait_for_previous_kernel();
  let_next_kernel_launch();
  using K = typename KeyOf<S>::key;
  using R = typename KeyOf<S>::real;
  __shared__ unsigned int hist[kMaxBins];
  __shared__ unsigned long long scan_scratch[kSelectThreads / 32];
  __shared__ bool is_last;
  const int bins = 1 << bits;
  for (int b = threadIdx.x; b < bins; b += kSelectThreads) hist[b] = 0;
  const unsigned long long prefix = pass > 0 ? state[3 * pass] : 0ull;
  const unsigned long long mask = pass > 0 ? state[3 * pass + 1] : 0ull;
  const int lane = threadIdx.x & 31;
  const unsigned lanes_before = (1u << lane) - 1u;
  const int64_t base = static_cast<int64_t>(blockIdx.x) * kSelectRows + threadIdx.x;
  K keys[kSelectPer];
#pragma unroll
  for (int j = 0; j < kSelectPer; ++j) {  // all loads first
    const int64_t i = base + j * kSelectThreads;
    keys[j] = i < n ? order_key<K>(static_cast<R>(scores[i]), maximize) : K(0);
  }
  __syncthreads();  // hist[] zeroed
#pragma unroll
  for (int j = 0; j < kSelectPer; ++j) {
    const unsigned long long key = keys[j];
    const bool in = base + j * kSelectThreads < n && (key & mask) == prefix;
    const unsigned bin = in ? static_cast<unsigned>((key >> shift) & static_cast<unsigned long long>(bins - 1))
                            : 0xffffffffu;
    const unsigned peers = __match_any_sync(0xffffffffu, bin);
    if (in && (peers & lanes_before) == 0) atomicAdd(&hist[bin], static_cast<unsigned>(__popc(peers)));
  }
  __syncthreads();
  unsigned long long* hist_g = hist_all + static_cast<int64_t>(pass) * kMaxBins;
  for (int b = threadIdx.x; b < bins; b += kSelectThreads) {
    const unsigned count = hist[b];
    if (count) atomicAdd(hist_g + b, static_cast<unsigned long long>(count));
  }
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) is_last = atomicAdd(done + pass, 1u) == gridDim.x - 1;
  __syncthreads();
  if (!is_last) return;
  __threadfence();
  // The last block: thread t owns bins 8t..8t+7; a block scan finds the bin of the k-th candidate.
  const unsigned long long k = pass > 0 ? state[3 * pass + 2] : static_cast<unsigned long long>(n_elite);
  unsigned long long counts[kMaxBins / kSelectThreads], sum = 0;
#pragma unroll
  for (int j = 0; j < kMaxBins / kSelectThreads; ++j) {
    const int b = threadIdx.x * (kMaxBins / kSelectThreads) + j;
    counts[j] = b < bins ? __ldcg(hist_g + b) : 0ull;
    sum += counts[j];
  }
  unsigned long long total;
  unsigned long long before = block_exclusive_scan(sum, scan_scratch, &total);
  if (before < k && k <= before + sum) {  // exactly one thread
    for (int j = 0; j < kMaxBins / kSelectThreads; ++j) {
      if (k <= before + counts[j]) {
        const unsigned long long bin = threadIdx.x * (kMaxBins / kSelectThreads) + j;
        state[3 * (pass + 1)] = prefix | (bin << shift);
        state[3 * (pass + 1) + 1] = mask | (static_cast<unsigned long long>(bins - 1) << shift);
        state[3 * (pass + 1) + 2] = k - before;
        break;
      }
      before += counts[j];
    }
  }
}

// Which of a thread's kSelectPer consecutive rows (from row0) are below / equal to the threshold.
template <typename S>
__device__ __forceinline__ void threshold_bits(const S* __restrict__ scores, int64_t n, bool maximize, int64_t row0,
                                               typename KeyOf<S>::key threshold, unsigned* less_bits,
                                               unsigned* eq_bits) {
  using K = typename KeyOf<S>::key;
  using R = typename KeyOf<S>::real;
  *less_bits = *eq_bits = 0;
#pragma unroll
  for (int j = 0; j < kSelectPer; ++j) {
    if (row0 + j < n) {
      const K key = order_key<K>(static_cast<R>(scores[row0 + j]), maximize);
      *less_bits |= static_cast<unsigned>(key < threshold) << j;
      *eq_bits |= static_cast<unsigned>(key == threshold) << j;
    }
  }
}

// The elite's row indices, ascending, into list[0, n_elite): rows with key < T, and the first
// `ties` rows with key == T. A block owns a chunk of `tiles` tiles of kSelectRows rows (chunk numbers
// are taken in the order blocks start, so a chunk only waits on chunks that are already running): it
// publishes its (less, equal) counts, sums the counts of the chunks before it (the launcher keeps
// chunks <= 1024), then writes its rows at their ranks, tile by tile.
template <typename S>
__global__ void __launch_bounds__(kSelectThreads)
    elite_list_kernel(const S* __restrict__ scores, int64_t n, bool maximize, int64_t tiles,
                      const unsigned long long* __restrict__ final_state, unsigned long long* chunk_counts,
                      unsigned int* __restrict__ ticket, int64_t* __restrict__ list) {
  wait_for_previous_kernel();
  let_next_kernel_launch();
  using K = typename KeyOf<S>::key;
  __shared__ unsigned int s_chunk;
  __shared__ unsigned int scan_scratch[kSelectThreads / 32];
  __shared__ unsigned long long sum_scratch[kSelectThreads / 32];
  __shared__ unsigned long long s_less_before, s_eq_before;
  if (threadIdx.x == 0) s_chunk = atomicAdd(ticket, 1u);
  const K threshold = static_cast<K>(final_state[0]);
  const unsigned long long ties = final_state[2];
  __syncthreads();
  const int64_t chunk = s_chunk;
  const int64_t first_row = chunk * tiles * kSelectRows + static_cast<int64_t>(threadIdx.x) * kSelectPer;
  unsigned less0, eq0;  // tile 0's bits stay in registers (the only tile when n <= 1024 * kSelectRows)
  threshold_bits(scores, n, maximize, first_row, threshold, &less0, &eq0);
  unsigned long long less = __popc(less0), eq = __popc(eq0);
  for (int64_t t = 1; t < tiles; ++t) {
    unsigned lb, eb;
    threshold_bits(scores, n, maximize, first_row + t * kSelectRows, threshold, &lb, &eb);
    less += __popc(lb);
    eq += __popc(eb);
  }
  less = jk::block_sum(less, sum_scratch);
  eq = jk::block_sum(eq, sum_scratch);
  if (threadIdx.x == 0) {
    atomicExch(chunk_counts + 2 * chunk, less | kPublished);
    atomicExch(chunk_counts + 2 * chunk + 1, eq | kPublished);
  }
  if (threadIdx.x < 32) {
    unsigned long long l = 0, e = 0, a, b;
    for (int64_t q = threadIdx.x; q < chunk; q += 32) {
      do a = *reinterpret_cast<volatile unsigned long long*>(chunk_counts + 2 * q); while (!(a & kPublished));
      do b = *reinterpret_cast<volatile unsigned long long*>(chunk_counts + 2 * q + 1); while (!(b & kPublished));
      l += a & ~kPublished;
      e += b & ~kPublished;
    }
    l = jk::warp_sum(l);
    e = jk::warp_sum(e);
    if (threadIdx.x == 0) {
      s_less_before = l;
      s_eq_before = e;
    }
  }
  __syncthreads();
  unsigned long long less_before = s_less_before, eq_before = s_eq_before;  // rows before this tile
  for (int64_t t = 0; t < tiles; ++t) {
    const int64_t row0 = first_row + t * kSelectRows;
    unsigned less_bits = less0, eq_bits = eq0;
    if (t > 0) threshold_bits(scores, n, maximize, row0, threshold, &less_bits, &eq_bits);
    // (less, equal) counts packed in 16-bit halves: a tile has kSelectRows < 2^16 rows.
    unsigned total;
    const unsigned before = block_exclusive_scan<unsigned>((__popc(less_bits) << 16) | __popc(eq_bits),
                                                           scan_scratch, &total);
    const unsigned long long ties_left = ties > eq_before ? ties - eq_before : 0ull;  // from this tile on
    const unsigned long long pos0 = less_before + (eq_before < ties ? eq_before : ties);
    unsigned long long my_less = before >> 16, my_eq = before & 0xffffu;
#pragma unroll
    for (int j = 0; j < kSelectPer; ++j) {
      if ((less_bits >> j) & 1u) {
        list[pos0 + my_less + (my_eq < ties_left ? my_eq : ties_left)] = row0 + j;
        ++my_less;
      } else if ((eq_bits >> j) & 1u) {
        if (my_eq < ties_left) list[pos0 + my_less + my_eq] = row0 + j;
        ++my_eq;
      }
    }
    less_before += total >> 16;
    eq_before += total & 0xffffu;
  }
}

// ---------------------------------------------------------------- cem_update: statistics

// Block (s, p): columns of segment s (kStatsCols per thread), elite ranks [p E / P, (p + 1) E / P).
// Sums of x - x0 and (x - x0)^2 in A (float32; float64 for float64 samples), x0 = the range's first
// row, or 0 where that is infinite (exact for constant columns, no cancellation when the data sits far
// from 0); written out as the range's mean and M2.
template <typename T, typename A>
__global__ void __launch_bounds__(kStatsThreads)
    elite_stats_kernel(const T* __restrict__ x, int64_t d, const int64_t* __restrict__ list, int64_t n_elite,
                       int64_t parts, A* __restrict__ part_mean, A* __restrict__ part_m2) {
  wait_for_previous_kernel();
  let_next_kernel_launch();
  const int64_t part = blockIdx.y;
  const int64_t r0 = part * n_elite / parts, r1 = (part + 1) * n_elite / parts;
  const int64_t col0 = static_cast<int64_t>(blockIdx.x) * blockDim.x * kStatsCols + threadIdx.x;
  bool ok[kStatsCols];
  A shift[kStatsCols], s1[kStatsCols], s2[kStatsCols];
  const T* first = x + list[r0] * d;  // (the first batch reads it again, from L1)
#pragma unroll
  for (int j = 0; j < kStatsCols; ++j) {
    const int64_t col = col0 + j * static_cast<int64_t>(blockDim.x);
    ok[j] = col < d;
    // An infinite x0 would make every x - x0 NaN (inf - inf), where the mean is that infinity (the CPU's
    // and the reference's): then the sums run unshifted.
    const A x0 = ok[j] ? static_cast<A>(first[col]) : A(0);
    shift[j] = isfinite(x0) ? x0 : A(0);
    s1[j] = s2[j] = A(0);
  }
  int64_t next[kStatsRows];  // the next batch's row indices, loaded while this batch's rows are
#pragma unroll
  for (int u = 0; u < kStatsRows; ++u) next[u] = r0 + u < r1 ? list[r0 + u] : -1;
  for (int64_t r = r0; r < r1; r += kStatsRows) {
    const T* row[kStatsRows];
#pragma unroll
    for (int u = 0; u < kStatsRows; ++u) row[u] = next[u] >= 0 ? x + next[u] * d : nullptr;
    A v[kStatsRows][kStatsCols];
#pragma unroll
    for (int u = 0; u < kStatsRows; ++u)
#pragma unroll
      for (int j = 0; j < kStatsCols; ++j)
        v[u][j] = row[u] && ok[j] ? static_cast<A>(row[u][col0 + j * static_cast<int64_t>(blockDim.x)]) : shift[j];
#pragma unroll
    for (int u = 0; u < kStatsRows; ++u) {
      const int64_t q = r + kStatsRows + u;
      next[u] = q < r1 ? list[q] : -1;
    }
#pragma unroll
    for (int u = 0; u < kStatsRows; ++u) {
      if (!row[u]) continue;  // uniform over the block
#pragma unroll
      for (int j = 0; j < kStatsCols; ++j) {
        const A dv = v[u][j] - shift[j];
        s1[j] += dv;
        s2[j] += dv * dv;
      }
    }
  }
  const A count = static_cast<A>(r1 - r0);
#pragma unroll
  for (int j = 0; j < kStatsCols; ++j) {
    if (!ok[j]) continue;
    const int64_t at = part * d + col0 + j * static_cast<int64_t>(blockDim.x);
    const A m2 = s2[j] - s1[j] * s1[j] / count;
    part_mean[at] = shift[j] + s1[j] / count;
    part_m2[at] = m2 < A(0) ? A(0) : m2;
  }
}

// floor(p·mul / div) for p = first, first + step, first + 2·step, ... (next()), with the divisions made once:
// a 64-bit integer division is a routine of tens of instructions, and the merge's 32 of them a thread (two
// per range, two passes) made it 12 us of cem_update's 57 (session 48, call 6).
struct FloorSteps {
  int64_t q, rem, dq, drem, div;  // q = floor(p·mul / div), rem = p·mul mod div
  __device__ FloorSteps(int64_t first, int64_t step, int64_t mul, int64_t div)
      : q(first * mul / div), rem(first * mul % div), dq(step * mul / div), drem(step * mul % div), div(div) {}
  __device__ void next() {
    q += dq;
    rem += drem;
    if (rem >= div) {
      rem -= div;
      ++q;
    }
  }
};

// One lane per column, warp w takes ranges w, w + 32, ...; float64 throughout, fixed order
// (deterministic): mean = sum n_p mean_p / E, M2 = sum M2_p + sum n_p (mean_p - mean)^2 (the
// second pass rereads mean_p, from L1); blend. Range p holds elite ranks [p E / P, (p + 1) E / P), as in
// elite_stats_kernel.
template <typename T, typename A>
__global__ void __launch_bounds__(kMergeWarps * 32)
    elite_merge_kernel(const A* __restrict__ part_mean, const A* __restrict__ part_m2, int64_t d, int64_t n_elite,
                       int64_t parts, const T* __restrict__ old_mean, const T* __restrict__ old_std,
                       double smoothing, double min_std, T* __restrict__ new_mean, T* __restrict__ new_std) {
  wait_for_previous_kernel();
  let_next_kernel_launch();
  __shared__ double s_sum[kMergeWarps][32], s_m2[kMergeWarps][32];
  __shared__ double s_mean[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t col = static_cast<int64_t>(blockIdx.x) * 32 + lane;
  const bool ok = col < d;
  const FloorSteps first_starts(warp, kMergeWarps, n_elite, parts), first_ends(warp + 1, kMergeWarps, n_elite, parts);
  double acc = 0.0, m2 = 0.0;
  if (ok) {
    FloorSteps start = first_starts, end = first_ends;
#pragma unroll 8
    for (int64_t p = warp; p < parts; p += kMergeWarps, start.next(), end.next()) {
      const int64_t count = end.q - start.q;
      acc += static_cast<double>(count) * static_cast<double>(part_mean[p * d + col]);
      m2 += static_cast<double>(part_m2[p * d + col]);
    }
  }
  s_sum[warp][lane] = acc;
  s_m2[warp][lane] = m2;
  __syncthreads();
  if (warp == 0) {
    double total = 0.0;
    for (int w = 0; w < kMergeWarps; ++w) total += s_sum[w][lane];
    s_mean[lane] = total / static_cast<double>(n_elite);
  }
  __syncthreads();
  const double mean = s_mean[lane];
  acc = 0.0;
  if (ok) {
    FloorSteps start = first_starts, end = first_ends;
#pragma unroll 8
    for (int64_t p = warp; p < parts; p += kMergeWarps, start.next(), end.next()) {
      const int64_t count = end.q - start.q;
      const double dm = static_cast<double>(part_mean[p * d + col]) - mean;
      acc += static_cast<double>(count) * dm * dm;
    }
  }
  s_sum[warp][lane] = acc;  // warp 0 read the old values before the barrier above
  __syncthreads();
  if (warp == 0 && ok) {
    double total = 0.0;
    for (int w = 0; w < kMergeWarps; ++w) total += s_m2[w][lane] + s_sum[w][lane];
    const double var = total / static_cast<double>(n_elite);
    double m, s;
    blend<double>(mean, sqrt(var < 0.0 ? 0.0 : var), static_cast<double>(old_mean[col]),
                  static_cast<double>(old_std[col]), smoothing, min_std, &m, &s);
    new_mean[col] = static_cast<T>(m);
    new_std[col] = static_cast<T>(s);
  }
}

}  // namespace

// Launches (no host sync): the counters' zeroing, ceil(key bits / 11) select passes (3 for 32-bit
// keys), the elite list, the statistics, the merge; all but the first as dependent launches.
void cem_update_cuda(jk::CudaLaunch& launch, const jk::CudaTensor& new_mean, const jk::CudaTensor& new_std,
                     const jk::CudaTensor& samples, const jk::CudaTensor& scores, int64_t n_elite,
                     const jk::CudaTensor& mean, const jk::CudaTensor& std, double smoothing, double min_std,
                     bool maximize) {
  const int64_t n = samples.size(0), d = samples.size(1);
  const jk::CudaTensor &x = samples, &sc = scores, &m_old = mean, &s_old = std;  // contiguous (sampling.cpp)
  const int sms = launch.multiprocessors;
  const int key_bits = scores.scalar_type() == jk::DType::f64 ? 64 : 32;
  const int passes = (key_bits + kDigitBits - 1) / kDigitBits;
  const int64_t blocks = (n + kSelectRows - 1) / kSelectRows;  // select blocks = list tiles
  const int64_t tiles = (blocks + 1023) / 1024, chunks = (blocks + tiles - 1) / tiles;  // list blocks
  // Statistics grid: column segments x elite rank ranges, about 2 blocks of 256 threads per SM and
  // at least 16 rows per range (each range costs one (d,) partial written and read back).
  const int threads = static_cast<int>(std::clamp<int64_t>(
      ((d + kStatsCols - 1) / kStatsCols + 31) / 32 * 32, 32, kStatsThreads));
  const int64_t segments = (d + threads * kStatsCols - 1) / (threads * kStatsCols);
  const int64_t target_blocks = 2 * static_cast<int64_t>(sms) * (kStatsThreads / threads);
  // At most 4096 rows per range, so float32 running sums stay accurate.
  const int64_t parts = std::clamp<int64_t>(
      std::max<int64_t>(std::min<int64_t>((target_blocks + segments - 1) / segments, (n_elite + 15) / 16),
                        (n_elite + 4095) / 4096),
      1, std::min<int64_t>(n_elite, 65535));
  const bool wide = samples.scalar_type() == jk::DType::f64;
  const int64_t acc_size = wide ? 8 : 4;
  // One scratch buffer in 8-byte words; the first `zeroed` words are the counters (zeroed first).
  const int64_t off_hist = 0, off_state = off_hist + passes * kMaxBins, off_done = off_state + 3 * (passes + 1);
  const int64_t off_counts = off_done + passes + 1, zeroed = off_counts + 2 * chunks;
  const int64_t off_list = zeroed, off_part = off_list + n_elite;
  const int64_t part_words = (parts * d * acc_size + 7) / 8;
  auto* base = static_cast<unsigned long long*>(launch.scratch((off_part + 2 * part_words) * 8));
  zero_words_kernel<<<static_cast<unsigned>(std::min<int64_t>((zeroed + 255) / 256, sms)), 256, 0, launch.stream>>>(
      base, zeroed);
  JK_CUDA_LAUNCH_CHECK(launch);
  auto* done = reinterpret_cast<unsigned int*>(base + off_done);  // passes counters, then the list ticket
  auto* list = reinterpret_cast<int64_t*>(base + off_list);
  jk::dispatch_float(scores.scalar_type(), [&](auto zero) {
    using scalar_t = decltype(zero);
    const scalar_t* sp = sc.const_data_ptr<scalar_t>();
    int shift = key_bits;
    for (int p = 0; p < passes; ++p) {
      const int bits = std::min(kDigitBits, shift);
      shift -= bits;
      launch_after_previous(launch, select_pass_kernel<scalar_t>, dim3(blocks), dim3(kSelectThreads), sp, n,
                            maximize, p, shift, bits, n_elite, base + off_hist, base + off_state, done);
    }
    launch_after_previous(launch, elite_list_kernel<scalar_t>, dim3(chunks), dim3(kSelectThreads), sp, n, maximize,
                          tiles, base + off_state + 3 * passes, base + off_counts, done + 2 * passes, list);
  });
  jk::dispatch_float(samples.scalar_type(), [&](auto zero) {
    using scalar_t = decltype(zero);
    using A = std::conditional_t<std::is_same_v<scalar_t, double>, double, float>;
    A* part_mean = reinterpret_cast<A*>(base + off_part);
    A* part_m2 = reinterpret_cast<A*>(base + off_part + part_words);
    launch_after_previous(launch, elite_stats_kernel<scalar_t, A>, dim3(segments, parts), dim3(threads),
                          x.const_data_ptr<scalar_t>(), d, list, n_elite, parts, part_mean, part_m2);
    launch_after_previous(launch, elite_merge_kernel<scalar_t, A>, dim3((d + 31) / 32), dim3(kMergeWarps * 32),
                          part_mean, part_m2, d, n_elite, parts, m_old.const_data_ptr<scalar_t>(),
                          s_old.const_data_ptr<scalar_t>(), smoothing, min_std, new_mean.mutable_data_ptr<scalar_t>(),
                          new_std.mutable_data_ptr<scalar_t>());
  });
}

}  // namespace sampling
