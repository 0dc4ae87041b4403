// Family `ebm`, CUDA: energies and scores of the local models (double_well, harmonic, rosenbrock,
// rastrigin, ackley), a file of its own so that nvcc compiles it beside ebm.cu (design notes there).
// They are memory-bound: a group of G lanes (power of two, <= 32) owns a row and reads it in 16-byte
// vectors, so a warp reads 32 consecutive vectors (coalesced). Neighbours (Rosenbrock) come from the
// next/previous lane by shuffle, row sums (energies, Ackley's statistics) reduce inside the group by
// shuffles, and an energy is one store per row. Periodic terms take cos(πt), sin(πt) with the 2 folded
// into t (ebm.h: cos_pi).
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "cuda_launch.cuh"
#include "ebm.h"
#include "ebm_rows.cuh"
#include "elementwise_kernel.cuh"  // jk::Vec, jk::aligned16, jk::launch_elementwise

namespace ebm {

// ---------------------------------------------------------------- local models: G lanes per row

// This lane's chunk [c, c + V) of a row (zeros when the row or the chunk is outside). With
// V > 1, D % V == 0, so a chunk is wholly inside or outside.
template <typename T, int V>
__device__ __forceinline__ jk::Vec<T, V> load_chunk(const T* xr, int c, bool inside) {
  jk::Vec<T, V> v;
  if (inside) {
    v = *reinterpret_cast<const jk::Vec<T, V>*>(xr + c);
  } else {
#pragma unroll
    for (int k = 0; k < V; ++k) v.val[k] = T(0);
  }
  return v;
}

// x[c + V] and x[c − 1] of a lane's chunk: from the neighbouring lane of the group by
// shuffle; only the group's end lanes of a multi-chunk row read memory. Call from all lanes.
template <typename A, typename T, int V>
__device__ __forceinline__ A right_of(const jk::Vec<T, V>& v, const T* xr, int c, int l, int G, bool valid, int D) {
  const A n = __shfl_down_sync(kFullMask, static_cast<A>(v.val[0]), 1, G);
  if (l < G - 1) return n;
  return valid && c + V < D ? static_cast<A>(xr[c + V]) : A(0);
}

template <typename A, typename T, int V>
__device__ __forceinline__ A left_of(const jk::Vec<T, V>& v, const T* xr, int c, int l, int G, bool valid, int D) {
  const A p = __shfl_up_sync(kFullMask, static_cast<A>(v.val[V - 1]), 1, G);
  if (l > 0) return p;
  return valid && c > 0 && c <= D ? static_cast<A>(xr[c - 1]) : A(0);
}

// A chunk's sums at c (next: the element after it): statistics into s0, s1 and, when kTerms, the energy's
// terms into e, each over the chunk's elements before D (none unless `valid`), in A.
template <bool kTerms, typename A, typename T, int V, typename M>
__device__ __forceinline__ void chunk_sums(const M& m, const jk::Vec<T, V>& v, A next, int c, int D, bool valid, A& s0,
                                           A& s1, A& e) {
#pragma unroll
  for (int j = 0; j < V; ++j) {
    const int i = c + j;
    if (valid && i < D) {
      const A xi = static_cast<A>(v.val[j]);
      m.stats(xi, s0, s1);
      if (kTerms) e += m.term(xi, j + 1 < V ? static_cast<A>(v.val[j + 1 < V ? j + 1 : j]) : next, i + 1 < D);
    }
  }
}

// The scores of a chunk at c (prev, next: the elements around it) under the row's constants rc.
template <typename T, int V, typename A, typename M>
__device__ __forceinline__ jk::Vec<T, V> chunk_scores(const M& m, const jk::Vec<T, V>& v, A prev, A next, int c, int D,
                                                      const RowConst<A>& rc) {
  jk::Vec<T, V> o;
#pragma unroll
  for (int j = 0; j < V; ++j) {
    const int i = c + j;
    const A xp = j > 0 ? static_cast<A>(v.val[j > 0 ? j - 1 : 0]) : prev;
    const A xn = j + 1 < V ? static_cast<A>(v.val[j + 1 < V ? j + 1 : j]) : next;
    o.val[j] = static_cast<T>(-m.grad(xp, static_cast<A>(v.val[j]), xn, i > 0, i + 1 < D, rc));
  }
  return o;
}

// Energy (out: (B,)) or score (out: (B, D)) of a local model, D <= kMaxRowWidth (int arithmetic: 64-bit
// cost 11-20% here, session 42 call 5). A group of G lanes owns a row
// and walks it in `chunks` steps of G·V elements (warp-uniform, so the shuffles are too).
// The score pass reuses the first chunk from the statistics pass (Ackley) instead of reading
// it again: for rows up to G·V elements x is read exactly once.
template <typename T, int V, bool kScore, typename M>
__global__ void __launch_bounds__(256) local_rows_kernel(const T* __restrict__ x, T* __restrict__ out, int64_t B,
                                                         int D, int G, M m) {
  using A = jk::opmath_t<T>;
  using Vec = jk::Vec<T, V>;
  const int lane = threadIdx.x & 31, l = lane & (G - 1), rows_per_warp = 32 / G;
  const int chunks = (D + G * V - 1) / (G * V);
  const int64_t warp = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  const int64_t n_warps = (static_cast<int64_t>(gridDim.x) * blockDim.x) >> 5;
  for (int64_t base = warp * rows_per_warp; base < B; base += n_warps * rows_per_warp) {
    const int64_t row = base + lane / G;
    const bool valid = row < B;
    const T* xr = x + (valid ? row : 0) * D;
    A s0 = 0, s1 = 0, e = 0;
    Vec first;
    if (M::kStats || !kScore) {
      // A lane's sums over its chunks run in double, each chunk's V terms summed in A first: one float32 pass
      // over a wide row drifted with D/G (a harmonic energy of a constant 3x512x512 row 2.3e-4 off, of a
      // uniform [0, 1) one 1.8e-6; the CPU adds its blocks of 256 in double likewise). One chunk: the same bits.
      double s0_row = 0, s1_row = 0, e_row = 0;
      for (int k = 0; k < chunks; ++k) {
        const int c = (k * G + l) * V;
        const Vec v = load_chunk<T, V>(xr, c, valid && c < D);
        if (k == 0) first = v;
        A next = 0;
        if (!kScore && M::kNeighbours) next = right_of<A>(v, xr, c, l, G, valid, D);
        A s0_chunk = 0, s1_chunk = 0, e_chunk = 0;
        chunk_sums<!kScore>(m, v, next, c, D, valid, s0_chunk, s1_chunk, e_chunk);
        s0_row += s0_chunk;
        s1_row += s1_chunk;
        e_row += e_chunk;
      }
      s0 = static_cast<A>(s0_row);
      s1 = static_cast<A>(s1_row);
      e = static_cast<A>(e_row);
      if (M::kStats) {
        s0 = group_sum(s0, G);
        s1 = group_sum(s1, G);
      }
      if (!kScore) e = group_sum(e, G);
    }
    if (!kScore) {
      if (valid && l == 0) out[row] = static_cast<T>(m.finish(e, s0, s1, D));
      continue;
    }
    const RowConst<A> rc = m.prepare(s0, s1, D);
    T* outr = out + (valid ? row : 0) * D;
    for (int k = 0; k < chunks; ++k) {
      const int c = (k * G + l) * V;
      const bool inside = valid && c < D;
      const Vec v = (M::kStats && k == 0) ? first : load_chunk<T, V>(xr, c, inside);
      A prev = 0, next = 0;
      if (M::kNeighbours) {
        prev = left_of<A>(v, xr, c, l, G, valid, D);
        next = right_of<A>(v, xr, c, l, G, valid, D);
      }
      if (!inside) continue;
      *reinterpret_cast<Vec*>(outr + c) = chunk_scores<T, V>(m, v, prev, next, c, D, rc);
    }
  }
}

template <typename T, int V, bool kScore, typename M>
void launch_local_rows(jk::CudaLaunch& launch, const jk::CudaTensor& x, const jk::CudaTensor& out, const M& m) {
  const int64_t B = x.size(0), D = x.size(1);
  const int64_t units = (D + V - 1) / V;
  int G = 1;
  while (G < units && G < 32) G *= 2;
  constexpr int kThreads = 256;
  const int64_t rows_per_block = (kThreads / 32) * (32 / G);
  const auto kernel = local_rows_kernel<T, V, kScore, M>;
  const int64_t blocks = resident_grid(launch, kernel, kThreads, (B + rows_per_block - 1) / rows_per_block);
  kernel<<<blocks, kThreads, 0, launch.stream>>>(x.const_data_ptr<T>(), out.mutable_data_ptr<T>(), B, int(D), G, m);
  JK_CUDA_LAUNCH_CHECK(launch);
}

// ---------------------------------------------------------------- local models: wide rows, few of them

// Sum k (0: terms, 1 and 2: statistics) of a row's segment partials (below): the warp's lanes take every 32nd
// segment, then add across the warp (one thread adding 1536 segments in turn took 90 us, call 3).
__device__ __forceinline__ double row_total(const double* __restrict__ partials, int64_t row, int segments, int k,
                                            int l) {
  double sum = 0;
  for (int r = l; r < segments; r += 32) sum += partials[(row * segments + r) * 3 + k];
  return group_sum(sum, 32);
}

// A batch of few wide rows (images: 64 rows of 3x512x512) left most of the GPU idle with one group a row:
// 64 warps walked 786432 elements each, 2.5 ms where eager took 0.18 (session 46 call 1). Here a row is cut
// into `segments` runs of `seg_chunks` chunks of 32·V elements, a warp each. kPartials: the warp's sums of
// terms and statistics, in double, go to partials[(row·segments + seg)·3 + {0, 1, 2}] (local_split_finish
// makes the energies). Else the warp writes its run's scores, with the row constants made from the row's
// partials (Ackley's statistics), summed alike by every warp (row_total). Neighbours across a run's
// ends come from memory (right_of / left_of read them at the group's end lanes).
template <typename T, int V, bool kPartials, typename M>
__global__ void __launch_bounds__(256) local_split_kernel(const T* __restrict__ x, T* __restrict__ out,
                                                          double* __restrict__ partials, int64_t B, int D,
                                                          int segments, int seg_chunks, M m) {
  using A = jk::opmath_t<T>;
  using Vec = jk::Vec<T, V>;
  constexpr int G = 32;
  const int l = threadIdx.x & 31;
  const int chunks = (D + G * V - 1) / (G * V);
  const int64_t warp = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  const int64_t n_warps = (static_cast<int64_t>(gridDim.x) * blockDim.x) >> 5;
  for (int64_t w = warp; w < B * segments; w += n_warps) {  // warp-uniform: the shuffles need every lane
    const int64_t row = w / segments;
    const int seg = static_cast<int>(w % segments);
    const int k0 = seg * seg_chunks, k1 = min(k0 + seg_chunks, chunks);
    const T* xr = x + row * D;
    if constexpr (kPartials) {
      double s0 = 0, s1 = 0, e = 0;
      for (int k = k0; k < k1; ++k) {
        const int c = (k * G + l) * V;
        const Vec v = load_chunk<T, V>(xr, c, c < D);
        A next = 0;
        if (M::kNeighbours) next = right_of<A>(v, xr, c, l, G, true, D);
        A s0_chunk = 0, s1_chunk = 0, e_chunk = 0;
        chunk_sums<true>(m, v, next, c, D, true, s0_chunk, s1_chunk, e_chunk);
        s0 += s0_chunk;
        s1 += s1_chunk;
        e += e_chunk;
      }
      e = group_sum(e, G);
      s0 = group_sum(s0, G);
      s1 = group_sum(s1, G);
      if (l == 0) {
        double* p = partials + w * 3;
        p[0] = e;
        p[1] = s0;
        p[2] = s1;
      }
    } else {
      double s0 = 0, s1 = 0;
      if (M::kStats) {
        s0 = row_total(partials, row, segments, 1, l);
        s1 = row_total(partials, row, segments, 2, l);
      }
      const RowConst<A> rc = m.prepare(static_cast<A>(s0), static_cast<A>(s1), D);
      T* outr = out + row * D;
      for (int k = k0; k < k1; ++k) {
        const int c = (k * G + l) * V;
        const bool inside = c < D;
        const Vec v = load_chunk<T, V>(xr, c, inside);
        A prev = 0, next = 0;
        if (M::kNeighbours) {
          prev = left_of<A>(v, xr, c, l, G, true, D);
          next = right_of<A>(v, xr, c, l, G, true, D);
        }
        if (!inside) continue;
        *reinterpret_cast<Vec*>(outr + c) = chunk_scores<T, V>(m, v, prev, next, c, D, rc);
      }
    }
  }
}

// A row's energy from its segments' partials: a warp a row.
template <typename T, typename M>
__global__ void local_split_finish(const double* __restrict__ partials, T* __restrict__ out, int64_t B, int D,
                                   int segments, M m) {
  using A = jk::opmath_t<T>;
  const int l = threadIdx.x & 31;
  const int64_t warp = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  const int64_t n_warps = (static_cast<int64_t>(gridDim.x) * blockDim.x) >> 5;
  for (int64_t row = warp; row < B; row += n_warps) {
    const double e = row_total(partials, row, segments, 0, l);
    const double s0 = row_total(partials, row, segments, 1, l), s1 = row_total(partials, row, segments, 2, l);
    if (l == 0) out[row] = static_cast<T>(m.finish(static_cast<A>(e), static_cast<A>(s0), static_cast<A>(s1), D));
  }
}

// Takes the rows when they are few and wide: fewer than a full GPU's warps (64 an SM) and at least
// kMinSplitChunks chunks of 32·V elements a row. Returns false (launching nothing) otherwise.
constexpr int64_t kMinSplitChunks = 64;
template <typename T, int V, bool kScore, typename M>
bool launch_local_split(jk::CudaLaunch& launch, const jk::CudaTensor& x, const jk::CudaTensor& out, const M& m) {
  const int64_t B = x.size(0), D = x.size(1);
  const int64_t chunks = (D + 32 * V - 1) / (32 * V), target_warps = int64_t(launch.multiprocessors) * 64;
  if (B >= target_warps || chunks < kMinSplitChunks) return false;
  // Runs of at least 4 chunks (512 float32 elements with V = 4), enough of them to fill the GPU (runs of 16
  // or more, half the warps: 4 rows of 3x512x512 took 35 us, a copy of them 11; session 46 call 2).
  const int64_t segments = std::min((target_warps + B - 1) / B, chunks / 4);
  if (segments < 2) return false;
  const int seg_chunks = static_cast<int>((chunks + segments - 1) / segments);
  constexpr int kThreads = 256;
  const int64_t blocks = (B * segments + kThreads / 32 - 1) / (kThreads / 32);
  double* partials = nullptr;
  if constexpr (!kScore || M::kStats) {
    partials = static_cast<double*>(launch.scratch(B * segments * 3 * sizeof(double)));
    const auto kernel = local_split_kernel<T, V, true, M>;
    kernel<<<resident_grid(launch, kernel, kThreads, blocks), kThreads, 0, launch.stream>>>(
        x.const_data_ptr<T>(), nullptr, partials, B, int(D), int(segments), seg_chunks, m);
    JK_CUDA_LAUNCH_CHECK(launch);
  }
  if constexpr (!kScore) {
    local_split_finish<T, M><<<(B * 32 + kThreads - 1) / kThreads, kThreads, 0, launch.stream>>>(
        partials, out.mutable_data_ptr<T>(), B, int(D), int(segments), m);
  } else {
    const auto kernel = local_split_kernel<T, V, false, M>;
    kernel<<<resident_grid(launch, kernel, kThreads, blocks), kThreads, 0, launch.stream>>>(
        x.const_data_ptr<T>(), out.mutable_data_ptr<T>(), partials, B, int(D), int(segments), seg_chunks, m);
  }
  JK_CUDA_LAUNCH_CHECK(launch);
  return true;
}

// ---------------------------------------------------------------- local models, rows of G·V elements: tiles

// Reduce-scatter inside a group of G lanes (l = lane in the group): a[u], u < U = G·K, are this
// lane's partial sums of U rows; afterwards a[k], k < K, is the group's total of row l·K + k.
// U − K shuffles (a butterfly all-reduce of every row would take U·log2(G)).
template <int G, int U, typename A>
__device__ __forceinline__ void group_reduce_scatter(A (&a)[U], int l) {
#pragma unroll
  for (int o = G / 2, S = U; o > 0; o >>= 1, S >>= 1) {  // S: entries still live
    const bool hi = l & o;                                 // keep the upper half of a[0, S)
#pragma unroll
    for (int i = 0; i < S / 2; ++i) {
      const A keep = hi ? a[S / 2 + i] : a[i];
      const A send = hi ? a[i] : a[S / 2 + i];
      a[i] = keep + __shfl_xor_sync(kFullMask, send, o);
    }
  }
}

// The inverse layout: a[k], k < K, is this lane's value of row l·K + k; afterwards every lane of
// the group holds a[u] = the value of row u, u < U = G·K.
template <int G, int U, typename A>
__device__ __forceinline__ void group_all_gather(A (&a)[U], int l) {
#pragma unroll
  for (int o = 1, S = U / G; o < G; o <<= 1, S <<= 1) {  // S: entries live before this step
    const bool hi = l & o;
#pragma unroll
    for (int i = 0; i < S; ++i) {
      const A mine = a[i];
      const A other = __shfl_xor_sync(kFullMask, mine, o);
      a[S + i] = hi ? mine : other;
      a[i] = hi ? other : mine;
    }
  }
}

// Rows of exactly D = G·V elements (G = 2, 4, 8 lanes per row, one 16-byte vector each). A warp
// takes 32·K rows per iteration: U = G·K loads per lane, all issued before any math (U·16 bytes
// in flight per lane), load u = rows base + u·(32/G) + lane/G, i.e. 32 consecutive vectors per
// warp (coalesced). Row sums reduce-scatter over the group, so lane l finishes rows l·K + k:
// one finish() per row instead of one per lane, and all 32 lanes store (rows (l·K + k)·(32/G) + g:
// for K = 1 a permutation of 32 consecutive rows, one coalesced store). Ackley's row
// constants are prepared by that lane and all-gathered back. Neighbours (Rosenbrock) come from
// the next/previous lane; the group's end lanes have none (the row ends there). Rows past B
// run on zeros (the shuffles need every lane) and are never stored.
template <typename T, int V, int G, int K, bool kScore, typename M>
__global__ void __launch_bounds__(256) local_tile_kernel(const T* __restrict__ x, T* __restrict__ out, int64_t B, M m) {
  using A = jk::opmath_t<T>;
  using Vec = jk::Vec<T, V>;
  constexpr int D = G * V, U = G * K, kRpw = 32 / G, kRows = 32 * K;
  const int lane = threadIdx.x & 31, l = lane & (G - 1), g = lane / G;
  const int64_t warp = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  const int64_t n_warps = (static_cast<int64_t>(gridDim.x) * blockDim.x) >> 5;
  for (int64_t base = warp * kRows; base < B; base += n_warps * kRows) {
    Vec v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t row = base + u * kRpw + g;
      if (row < B) {
        v[u] = load_vector<Vec, !kScore>(x + row * D + l * V);
      } else {
#pragma unroll
        for (int j = 0; j < V; ++j) v[u].val[j] = T(0);
      }
    }
    if constexpr (!kScore) {
      A e[U], s0[U], s1[U];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        e[u] = s0[u] = s1[u] = A(0);
        A next = A(0);
        if constexpr (M::kNeighbours) next = __shfl_down_sync(kFullMask, static_cast<A>(v[u].val[0]), 1, G);
#pragma unroll
        for (int j = 0; j < V; ++j) {
          const A xi = static_cast<A>(v[u].val[j]);
          if constexpr (M::kStats) m.stats(xi, s0[u], s1[u]);
          if constexpr (M::kTerms) {
            const A xn = j + 1 < V ? static_cast<A>(v[u].val[j + 1 < V ? j + 1 : j]) : next;
            e[u] += m.term(xi, xn, j + 1 < V || l + 1 < G);
          }
        }
      }
      if constexpr (M::kTerms) group_reduce_scatter<G>(e, l);
      if constexpr (M::kStats) {
        group_reduce_scatter<G>(s0, l);
        group_reduce_scatter<G>(s1, l);
      }
#pragma unroll
      for (int k = 0; k < K; ++k) {
        const int64_t row = base + (l * K + k) * kRpw + g;
        if (row < B) out[row] = static_cast<T>(m.finish(e[k], s0[k], s1[k], D));
      }
    } else {
      A c0[U], c1[U];  // the rows' RowConst
      if constexpr (M::kStats) {
        A s0[U], s1[U];
#pragma unroll
        for (int u = 0; u < U; ++u) {
          s0[u] = s1[u] = A(0);
#pragma unroll
          for (int j = 0; j < V; ++j) m.stats(static_cast<A>(v[u].val[j]), s0[u], s1[u]);
        }
        group_reduce_scatter<G>(s0, l);
        group_reduce_scatter<G>(s1, l);
#pragma unroll
        for (int k = 0; k < K; ++k) {
          const RowConst<A> rc = m.prepare(s0[k], s1[k], D);
          c0[k] = rc.c0;
          c1[k] = rc.c1;
        }
        group_all_gather<G>(c0, l);
        group_all_gather<G>(c1, l);
      } else {
        const RowConst<A> rc = m.prepare(A(0), A(0), D);
#pragma unroll
        for (int u = 0; u < U; ++u) {
          c0[u] = rc.c0;
          c1[u] = rc.c1;
        }
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
        A prev = A(0), next = A(0);
        if constexpr (M::kNeighbours) {
          prev = __shfl_up_sync(kFullMask, static_cast<A>(v[u].val[V - 1]), 1, G);
          next = __shfl_down_sync(kFullMask, static_cast<A>(v[u].val[0]), 1, G);
        }
        const RowConst<A> rc{c0[u], c1[u]};
        Vec o;
#pragma unroll
        for (int j = 0; j < V; ++j) {
          const A xp = j > 0 ? static_cast<A>(v[u].val[j > 0 ? j - 1 : 0]) : prev;
          const A xn = j + 1 < V ? static_cast<A>(v[u].val[j + 1 < V ? j + 1 : j]) : next;
          o.val[j] = static_cast<T>(-m.grad(xp, static_cast<A>(v[u].val[j]), xn, j > 0 || l > 0, j + 1 < V || l + 1 < G, rc));
        }
        const int64_t row = base + u * kRpw + g;
        if (row < B) *reinterpret_cast<Vec*>(out + row * D + l * V) = o;
      }
    }
  }
}

template <typename T, int V, int G, bool kScore, typename M>
void launch_local_tile(jk::CudaLaunch& launch, const jk::CudaTensor& x, const jk::CudaTensor& out, const M& m) {
  // Scores of the polynomial models keep two tiles of rows in flight per lane group (8 vectors per
  // lane at D = 16 float32): 3-4% faster on the H200, where Rastrigin's and Ackley's scores, with
  // their sines and exponentials, were 4-7% slower that way (session-6 A/B, results/session6/ebm_ab.log).
  constexpr int K = (G >= 4 ? 1 : 4 / G) * (kScore && M::kPolynomial ? 2 : 1), kThreads = 256;
  const int64_t B = x.size(0), rows_per_block = (kThreads / 32) * 32 * K;
  // One tile per block up to SMs × 256 blocks (past that they loop), as jk::launch_elementwise
  // launches (relu_add: ~100% of the copy floor). With a one-wave grid-stride grid
  // (resident_grid) the harmonic score, the same loads and stores, measured 85% on the H200
  // (torch.compile's flat kernel ~93%); short blocks also leave no partial last round.
  const int64_t blocks = grid_size(launch, B, rows_per_block, 256);
  const auto kernel = local_tile_kernel<T, V, G, K, kScore, M>;
  kernel<<<blocks, kThreads, 0, launch.stream>>>(x.const_data_ptr<T>(), out.mutable_data_ptr<T>(), B, m);
  JK_CUDA_LAUNCH_CHECK(launch);
}

// Calls f(std::true_type{}) or f(std::false_type{}): a run-time flag as a compile-time one.
template <typename F>
void with_flag(bool flag, F&& f) {
  flag ? f(std::true_type{}) : f(std::false_type{});
}

// One local model's energies or scores. The `if constexpr` lives here, in a function template:
// nvcc 13.0 builds a kernel launched from an `if constexpr` written directly in a generic lambda,
// but the launch fails with "invalid device function" (session 11, results/session11/probe).
template <typename T, bool kScore, typename M>
void launch_local_model(jk::CudaLaunch& launch, const jk::CudaTensor& x, const jk::CudaTensor& out, const M& m) {
  if constexpr (kScore && !M::kStats && !M::kNeighbours) {
    // Separable: each element's score alone, on the shared elementwise launcher. Against the row
    // tiles (session 11 A/B, results/session11/ab_flat.log): float32 the same within 0.5%,
    // Rastrigin's bfloat16 score 7% faster.
    JK_CUDA_CHECK(launch, jk::launch_elementwise(launch.stream, out.mutable_data_ptr<T>(), out.numel(),
                                                 SeparableScore<M>{m}, x.const_data_ptr<T>()));
  } else {  // (else: the row kernels of separable scores are never built)
    constexpr int kV = 16 / sizeof(T);
    const int64_t D = x.size(1);
    const bool vec =
        D % kV == 0 && jk::aligned16(x.const_data_ptr<T>()) && (!kScore || jk::aligned16(out.mutable_data_ptr()));
    const auto tile = [&](auto groups) {
      launch_local_tile<T, kV, decltype(groups)::value, kScore, M>(launch, x, out, m);
    };
    if (vec && with_row_vectors(D, kV, tile)) return;
    if (vec ? launch_local_split<T, kV, kScore>(launch, x, out, m) : launch_local_split<T, 1, kScore>(launch, x, out, m)) {
      return;
    }
    vec ? launch_local_rows<T, kV, kScore>(launch, x, out, m) : launch_local_rows<T, 1, kScore>(launch, x, out, m);
  }
}

void local_rows_cuda(jk::CudaLaunch& launch, const jk::CudaTensor& x, const jk::CudaTensor& out, const ModelSpec& spec,
                     bool score) {
  jk::dispatch_float(x.scalar_type(), [&](auto zero) {
    using T = decltype(zero);
    with_local_model<jk::opmath_t<T>>(spec.kind, spec.p, [&](auto m) {
      with_flag(score, [&](auto score_flag) { launch_local_model<T, decltype(score_flag)::value>(launch, x, out, m); });
    });
  });
}

}  // namespace ebm
