// Family `linalg`: CUDA kernels and their launchers. Checks, allocation, the device guard, the stream,
// scratch memory and registration are in linalg.cpp (through cuda_launch.cuh), so this file includes
// no tensor header and its cold nvcc time is its own code's.
//
// Design (what bounds each op, and how the kernels are written to reach it):
// - matrix_inverse_root is compute-bound: a scaled coupled Newton iteration whose cost is its
//   matrix products (cuBLAS through at::bmm). Float32 products with p >= 4 run on the bfloat16
//   tensor cores: each operand is split into 3 bfloat16 pieces (split_bf16x3_kernel) and the 6
//   piece products that reach float32's precision form ONE bfloat16 GEMM over K = 6n with
//   float32 accumulation (~4x the FLOPs at ~16x float32's rate: about 2-3x faster per product);
//   float64 uses float64 cuBLAS. The step count comes from (p, max_cond, dtype) on the host, so
//   there is no sync and no data-dependent control flow; per-step scaling (linalg.cpp) cuts the
//   steps for cond 1e5, p = 4 to 8 (4 products each, minus the first X and the last M product).
//   T = c1 I - c2 M is never formed on that path: the split kernel applies it as it reads M.
//   Matrices of n <= 64 instead take the whole iteration in one kernel (inverse_root_small_kernel),
//   a block per matrix in shared memory: there the general route's ~10 launches a step were its cost
//   (session 38, H200: ~1.2 ms at every n <= 64; the one kernel, with session 39's products, 35 / 74 /
//   100 us at n = 32 / 48 / 64 in float32, 87 / 222 / 296 us in float64). The iteration itself is
//   linalg.h's inverse_root_small.
// - kron and per_sample_grad_linear are write-bound: the output (nb, m*p, n*q) is written
//   exactly once, in memory order, with 16-byte stores, as a copy writes; each thread finds its
//   position by multiply-and-shift divisions and reads one A value and one B vector (both small,
//   from L1); rows of an odd length are cut into 16-byte vectors across rows. Earlier kernels that
//   kept B vectors in registers and walked rows i wrote scattered spans and were slower (session
//   34: kron_kernel says by how much).
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>

#include "cuda_launch.cuh"
#include "elementwise_kernel.cuh"  // jk::aligned16
#include "linalg.h"
#include "reduce.cuh"

namespace linalg {

namespace {

constexpr int kThreads = 256;
constexpr unsigned kFullMask = 0xffffffffu;

// out[b] = a[b] * in[b] + d[b] * I; grid.y walks the batch, grid.x the n*n entries.
template <typename T>
__global__ void eye_axpy_kernel(T* __restrict__ out, const T* __restrict__ in, const T* __restrict__ a_vec,
                                T a_scale, const T* __restrict__ d_vec, T d_scale, int64_t nb, int64_t n) {
  const int64_t nn = n * n;
  for (int64_t b = blockIdx.y; b < nb; b += gridDim.y) {
    const T a = a_scale * (a_vec ? a_vec[b] : T(1));
    const T d = d_scale * (d_vec ? d_vec[b] : T(1));
    const T* src = in ? in + b * nn : nullptr;
    T* dst = out + b * nn;
    for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < nn;
         e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
      const T x = src ? a * src[e] : T(0);
      dst[e] = (e % (n + 1) == 0) ? x + d : x;
    }
  }
}

template <typename T, int VEC>
struct alignas(sizeof(T) * VEC) Pack {
  T v[VEC];
};

// The six bfloat16 products that make one float32 product: piece (left[t], right[t]) for
// t = 0..5 of v = v0 + v1 + v2 and w likewise, i.e. v_i w_j for i + j <= 2 (the dropped
// terms are below float32's rounding), smallest first so the float32 sums lose the least.
__device__ constexpr int kLeftPiece[kSplitTerms] = {0, 1, 2, 0, 1, 0};
__device__ constexpr int kRightPiece[kSplitTerms] = {2, 1, 0, 1, 0, 0};

// v = scale * x + shift * I per (n, n) matrix, split into bfloat16 pieces v0 + v1 + v2 (each the
// rounding of what the earlier ones leave: v - v0 and v - v0 - v1 are exact in float32), written
// as a left operand (nb, n, 6n), row i = [pieces of row i in kLeftPiece order], and/or as a right
// operand (nb, 6n, n) = the (n, n) pieces stacked in kRightPiece order. blockDim = (tx, ty): ty
// rows per block, tx threads across a row, VEC columns each (VEC = 4: n % 4 == 0, 8-byte stores).
template <int VEC>
__global__ void __launch_bounds__(kThreads) split_bf16x3_kernel(const float* __restrict__ x, float scale, float shift,
                                                              __nv_bfloat16* __restrict__ left,
                                                              __nv_bfloat16* __restrict__ right, int64_t rows,
                                                              int64_t n) {
  for (int64_t row = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y; row < rows;
       row += static_cast<int64_t>(gridDim.x) * blockDim.y) {
    const int64_t b = row / n, i = row - b * n;
    const float* x_row = x + row * n;
    __nv_bfloat16* left_row = left ? left + row * kSplitTerms * n : nullptr;
    __nv_bfloat16* right_row = right ? right + (b * kSplitTerms * n + i) * n : nullptr;  // + t * n * n
    for (int64_t j = static_cast<int64_t>(threadIdx.x) * VEC; j < n; j += static_cast<int64_t>(blockDim.x) * VEC) {
      float v[VEC];
      if constexpr (VEC == 4) {
        const float4 x4 = *reinterpret_cast<const float4*>(x_row + j);
        v[0] = x4.x, v[1] = x4.y, v[2] = x4.z, v[3] = x4.w;
      } else {
        v[0] = x_row[j];
      }
      Pack<__nv_bfloat16, VEC> piece[3];
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        float rest = scale * v[e] + (j + e == i ? shift : 0.0f);
#pragma unroll
        for (int k = 0; k < 3; ++k) {
          piece[k].v[e] = __float2bfloat16_rn(rest);
          rest -= __bfloat162float(piece[k].v[e]);
        }
      }
#pragma unroll
      for (int t = 0; t < kSplitTerms; ++t) {
        if (left_row) *reinterpret_cast<Pack<__nv_bfloat16, VEC>*>(left_row + t * n + j) = piece[kLeftPiece[t]];
        if (right_row) *reinterpret_cast<Pack<__nv_bfloat16, VEC>*>(right_row + t * n * n + j) = piece[kRightPiece[t]];
      }
    }
  }
}

// n / d for n, d < 2^31 by a multiply-high, an add and a shift (Granlund & Montgomery, as PyTorch's
// IntDivider): the divisors are runtime shapes, and a 32-bit division is ~15 instructions.
struct Div32 {
  using Index = uint32_t;
  uint32_t multiplier = 1, shift = 0;
  explicit Div32(int64_t d) {
    while ((int64_t{1} << shift) < d) ++shift;
    multiplier = static_cast<uint32_t>(((uint64_t{1} << 32) * ((uint64_t{1} << shift) - d)) / d + 1);
  }
  __device__ __forceinline__ uint32_t operator()(uint32_t n) const { return (__umulhi(n, multiplier) + n) >> shift; }
};

// Outputs of 2^31 elements or more: plain 64-bit division.
struct Div64 {
  using Index = uint64_t;
  uint64_t divisor;
  explicit Div64(int64_t d) : divisor(static_cast<uint64_t>(d)) {}
  __device__ __forceinline__ uint64_t operator()(uint64_t n) const { return n / divisor; }
};

// One kron launch: out (nb, m*p, n*q) in vectors of VEC elements, vcols of them per output row.
// A thread's next vector is kThreads vectors on: kThreads * VEC = step_j * q + step_l columns.
template <typename Div>
struct KronShape {
  using Index = typename Div::Index;
  Index m, n, p, q, cols, vcols, vectors, step_j, step_l;
  Div by_vcols, by_cols, by_q, by_p, by_m;
  KronShape(int64_t m_, int64_t n_, int64_t p_, int64_t q_, int64_t numel, int vec, int64_t step)
      : m(m_), n(n_), p(p_), q(q_), cols(n_ * q_), vcols(n_ * q_ / vec), vectors(numel / vec), step_j(step / q_),
        step_l(step % q_), by_vcols(n_ * q_ / vec), by_cols(n_ * q_), by_q(q_), by_p(p_), by_m(m_) {}
};

// Output bytes per thread: two 16-byte vectors (one was 11% slower for per-sample gradients: block
// overhead), or more narrower ones (each after the first found by a carry, not four divisions:
// bfloat16 50x50 (x) 101x101 36.8 -> 28.8 us on the H100).
constexpr int kKronBytesPerThread = 32;

// out[b, i*p + k, j*q + l] = A[b, i, j] * B[b, k, l], written in memory order: thread t of block x writes
// vectors (R*x + r) * kThreads + t, r < R, so each block writes one contiguous span and the blocks follow
// each other through the output, as a copy does. The first vector's position (b, i, k, j, l) comes from
// four divisions; each next one's column is kThreads vectors on (a carry), unless that leaves the row.
// A vector's VEC columns are read as VEC / BVEC pieces of BVEC columns, each inside one B row (BVEC
// divides q, B is aligned to it), times one A value each: BVEC = VEC is one A value and one B vector;
// smaller pieces step into the next A column where a B row ends. Requires (n*q) % VEC == 0, so a vector
// never crosses an output row.
// Measured against the slot and row kernels it replaced (session 34; kron_ab.log of calls 3 and 6 in
// benchmarks/results/session34): H200, kron 50x50 (x) 100x100 float32 27.7 -> 26.8 us (torch.compile
// 26.1 with a clean L2), 100x100 (x) 100x100 99.2 -> 90.8 (compile 89.7), 32x32 (x) 64x64 12.8 -> 8.2-8.9,
// bfloat16 50x50 (x) 100x100 31.7 -> 16.4 (compile 19.3; read element by element it took 24.3), per-sample
// gradients 245.1 -> 240.9 (compile 241.1). H100, rows of an odd number of elements (kron_flat_kernel):
// per-sample gradients 1023 -> 1024 487 -> 337 us (compile 336), bfloat16 51x51 (x) 101x101 33.5 -> 29.4.
template <typename T, int VEC, int BVEC, typename Div>
__global__ void __launch_bounds__(kThreads) kron_kernel(T* __restrict__ out, const T* __restrict__ A,
                                                        const T* __restrict__ B, const KronShape<Div> s) {
  using Index = typename Div::Index;
  constexpr int R = kKronBytesPerThread / (VEC * sizeof(T));
  Index v = static_cast<Index>(blockIdx.x) * R * kThreads + threadIdx.x;
  if (v >= s.vectors) return;
  Index col, j, l;
  const T *a_row, *b_row;
  auto seek = [&] {  // the position of vector v
    const Index row = s.by_vcols(v);
    col = (v - row * s.vcols) * VEC;
    const Index ai = s.by_p(row), k = row - ai * s.p;  // ai = b*m + i: A's row
    a_row = A + ai * s.n;
    b_row = B + (s.by_m(ai) * s.p + k) * s.q;
    j = s.by_q(col);
    l = col - j * s.q;
  };
  seek();
#pragma unroll
  for (int r = 0; r < R; ++r) {
    Pack<T, VEC> pack;
    Index pj = j, pl = l;
#pragma unroll
    for (int piece = 0; piece < VEC / BVEC; ++piece) {
      const T a = a_row[pj];
      const Pack<T, BVEC> b_piece = *reinterpret_cast<const Pack<T, BVEC>*>(b_row + pl);
#pragma unroll
      for (int e = 0; e < BVEC; ++e) pack.v[piece * BVEC + e] = kron_mul(a, b_piece.v[e]);
      pl += BVEC;  // a multiple of BVEC, as q is: the row ends exactly at q
      if (pl == s.q) {
        pl = 0;
        ++pj;
      }
    }
    *reinterpret_cast<Pack<T, VEC>*>(out + static_cast<uint64_t>(v) * VEC) = pack;
    if (r + 1 == R || (v += kThreads) >= s.vectors) return;
    col += kThreads * VEC;
    if (col < s.cols) {
      j += s.step_j;
      l += s.step_l;
      if (l >= s.q) {
        l -= s.q;
        ++j;
      }
    } else {
      seek();
    }
  }
}

// The same product where output rows do not split into 16-byte vectors ((n*q) % VEC != 0): the output
// is cut into 16-byte vectors regardless, and each vector's elements are walked one by one, carrying
// (l, j) within a row and (k, i, b) into the next row. Each vector's start takes five divisions.
template <typename T, typename Div>
__global__ void __launch_bounds__(kThreads) kron_flat_kernel(T* __restrict__ out, const T* __restrict__ A,
                                                             const T* __restrict__ B, const KronShape<Div> s,
                                                             const typename Div::Index numel) {
  using Index = typename Div::Index;
  constexpr int VEC = 16 / sizeof(T), R = kKronBytesPerThread / 16;
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const Index e = ((static_cast<Index>(blockIdx.x) * R + r) * kThreads + threadIdx.x) * VEC;
    if (e >= numel) return;
    const Index row = s.by_cols(e), ai = s.by_p(row), b = s.by_m(ai);
    Index col = e - row * s.cols, k = row - ai * s.p, i = ai - b * s.m, j = s.by_q(col), l = col - j * s.q;
    const T* a_row = A + ai * s.n;
    const T* b_row = B + (b * s.p + k) * s.q;
    Index bp = b * s.p;  // b*p, moved with b
    const Index count = numel - e < VEC ? numel - e : VEC;  // the last vector may be partial
    Pack<T, VEC> pack;
#pragma unroll
    for (int x = 0; x < VEC; ++x) {
      if (x < count) pack.v[x] = kron_mul(a_row[j], b_row[l]);
      if (++l == s.q) {
        l = 0;
        if (++j == s.n) {  // the next output row
          j = 0;
          if (++k == s.p) {
            k = 0;
            if (++i == s.m) {
              i = 0;
              bp += s.p;
            }
            a_row += s.n;  // A's next row (b*m + i)
          }
          b_row = B + (bp + k) * s.q;
        }
      }
    }
    if (count == VEC) {
      *reinterpret_cast<Pack<T, VEC>*>(out + static_cast<uint64_t>(e)) = pack;
    } else {
      for (Index x = 0; x < count; ++x) out[static_cast<uint64_t>(e) + x] = pack.v[x];
    }
  }
}

// Launches one of the kron kernels over out, kKronBytesPerThread a thread: launch_with(shape, blocks), with
// 32-bit indices (Div32) where every index a kernel forms stays below 2^31 (each is below numel +
// elements_per_block; output, A and B indices are no larger), else 64-bit ones. The shape counts the
// output in vectors of vec elements, a thread's next vector kThreads vectors on.
template <typename T, typename LaunchWith>
void launch_kron_grid(jk::CudaLaunch& launch, const jk::CudaTensor& out, const jk::CudaTensor& A,
                      const jk::CudaTensor& B, int vec, LaunchWith launch_with) {
  const int64_t m = A.size(1), n = A.size(2), p = B.size(1), q = B.size(2), numel = out.numel();
  const int64_t elements_per_block = int64_t{kThreads} * kKronBytesPerThread / sizeof(T);
  const int64_t blocks = (numel + elements_per_block - 1) / elements_per_block;
  if (blocks == 0) return;
  // (std::runtime_error: PyTorch raises it as RuntimeError, as TORCH_CHECK's, without c10's headers)
  if (blocks > INT32_MAX) throw std::runtime_error("kron: output too large for one launch");
  const int64_t step = int64_t{kThreads} * vec;
  if (numel + elements_per_block <= (int64_t{1} << 31)) {
    launch_with(KronShape<Div32>(m, n, p, q, numel, vec, step), static_cast<unsigned>(blocks));
  } else {
    launch_with(KronShape<Div64>(m, n, p, q, numel, vec, step), static_cast<unsigned>(blocks));
  }
  JK_CUDA_LAUNCH_CHECK(launch);
}

template <typename T, int VEC, int BVEC>
void launch_kron(jk::CudaLaunch& launch, const jk::CudaTensor& out, const jk::CudaTensor& A, const jk::CudaTensor& B) {
  launch_kron_grid<T>(launch, out, A, B, VEC, [&](const auto& shape, unsigned blocks) {
    kron_kernel<T, VEC, BVEC><<<blocks, kThreads, 0, launch.stream>>>(out.mutable_data_ptr<T>(), A.const_data_ptr<T>(),
                                                                      B.const_data_ptr<T>(), shape);
  });
}

// Diagonal input gets the exact elementwise answer (linalg.cpp, finish_diagonal). A warp per row
// (rows of every matrix in turn). not_diagonal[b] is set when matrix b has an off-diagonal entry
// that is not 0 or a diagonal entry that is not finite (NaN and Inf keep the iteration's NaN
// answer, which fallback="auto" reports). A warp skips the rows of a matrix already marked: for
// the usual, full input only the first rows of each matrix are read. The mark is read volatile and
// may be seen late, which only costs that read; every writer writes the same 1.
template <typename T>
__global__ void __launch_bounds__(kThreads) mark_not_diagonal_kernel(const T* __restrict__ A, int* not_diagonal,
                                                                   int64_t rows, int64_t n) {
  const int lane = threadIdx.x & 31;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * blockDim.x / 32;
  for (int64_t row = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32; row < rows; row += warps) {
    const int64_t b = row / n, i = row - b * n;
    int marked = lane == 0 ? *static_cast<volatile int*>(not_diagonal + b) : 0;
    if (__shfl_sync(kFullMask, marked, 0)) continue;
    bool found = false;
    const T* a_row = A + row * n;
    for (int64_t j = lane; j < n; j += 32) {
      found |= breaks_diagonal(a_row[j], j == i);
    }
    if (__any_sync(kFullMask, found) && lane == 0) not_diagonal[b] = 1;
  }
}

// X[b] = diag(diagonal_root(a_scale * A_ii)) and residual[b] = 0 for each unmarked matrix b.
template <typename T>
__global__ void __launch_bounds__(kThreads) write_diagonal_answer_kernel(const T* __restrict__ A, T* __restrict__ X,
                                                                       T* __restrict__ residual,
                                                                       const int* __restrict__ not_diagonal,
                                                                       int64_t rows, int64_t n, T a_scale, double eps,
                                                                       int p) {
  const int lane = threadIdx.x & 31;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * blockDim.x / 32;
  for (int64_t row = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32; row < rows; row += warps) {
    const int64_t b = row / n, i = row - b * n;
    if (not_diagonal[b]) continue;
    const T root = diagonal_root(a_scale * A[row * n + i], eps, p);
    for (int64_t j = lane; j < n; j += 32) X[row * n + j] = j == i ? root : T(0);
    if (i == 0 && lane == 0) residual[b] = T(0);
  }
}

// ---------------------------------------------------------------- matrix_inverse_root, n <= kSmallRootMaxN

constexpr int kSmallRootThreads = 256;

// C = A @ B for n x n matrices stored densely in shared memory; C is neither A nor B. Warp w computes rows
// w, w + W, w + 2W, ... (W warps) and lane l columns l, l + 32, ...: kRows x kCols sums a thread, so n <=
// W kRows and n <= 32 kCols. A warp's A loads are then broadcasts (one row) and its B loads consecutive
// words: no bank conflicts. Row and column indices past n are clamped to n - 1, so every load is in bounds
// and the k loop has no predicates; those sums are never stored. Where the rows allow it (n a multiple of
// 16 / sizeof(T), so every row starts 16-byte aligned) A is read 16 bytes at a time: one load instruction
// where there were four (float32), and the loads, not the FMAs, were most of the loop.
// (Session 38's loop, columns by thread and rows g, g + G, ... per group of n threads, spent ~4
// instructions of row arithmetic and predicates per FMA, and a load per FMA.)
template <int kRows, int kCols, typename T>
__device__ void small_product(T* __restrict__ C, const T* __restrict__ A, const T* __restrict__ B, int n) {
  constexpr int kWarps = kSmallRootThreads / 32, kVec = 16 / sizeof(T);
  struct alignas(16) Vec {
    T v[kVec];
  };
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const T* a_row[kRows];
  int col[kCols];
#pragma unroll
  for (int r = 0; r < kRows; ++r) a_row[r] = A + min(warp + kWarps * r, n - 1) * n;
#pragma unroll
  for (int c = 0; c < kCols; ++c) col[c] = min(lane + 32 * c, n - 1);
  T sum[kRows][kCols];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
#pragma unroll
    for (int c = 0; c < kCols; ++c) sum[r][c] = T(0);
  }
  const T* b_row = B;
  // sum[r][c] += a[r] * B[k][col[c]] for the k of b_row, which it then steps to the next row.
  const auto accumulate = [&](const T (&a)[kRows]) {
    T b[kCols];
#pragma unroll
    for (int c = 0; c < kCols; ++c) b[c] = b_row[col[c]];
    b_row += n;
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
#pragma unroll
      for (int c = 0; c < kCols; ++c) sum[r][c] = fma(a[r], b[c], sum[r][c]);
    }
  };
  if (n % kVec == 0) {
#pragma unroll 2  // float32 n = 48 / 64: 77 / 105 -> 74 / 100 us, float64 n = 32: 96 -> 87 (session 39)
    for (int k = 0; k < n; k += kVec) {
      Vec a_vec[kRows];
#pragma unroll
      for (int r = 0; r < kRows; ++r) a_vec[r] = *reinterpret_cast<const Vec*>(a_row[r] + k);
#pragma unroll
      for (int q = 0; q < kVec; ++q) {
        T a[kRows];
#pragma unroll
        for (int r = 0; r < kRows; ++r) a[r] = a_vec[r].v[q];
        accumulate(a);
      }
    }
  } else {
    // The row pointers step along k (the compiler otherwise rebuilt each address from the row index).
#pragma unroll 4
    for (int k = 0; k < n; ++k) {
      T a[kRows];
#pragma unroll
      for (int r = 0; r < kRows; ++r) a[r] = *a_row[r]++;
      accumulate(a);
    }
  }
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int i = warp + kWarps * r;
#pragma unroll
    for (int c = 0; c < kCols; ++c) {
      const int j = lane + 32 * c;
      if (i < n && j < n) C[i * n + j] = sum[r][c];
    }
  }
  __syncthreads();
}

// inverse_root_small's team on the GPU: the block's threads, with the matrices in shared memory.
template <int kRows, int kCols>
struct BlockTeam {
  double* scratch;  // kSmallRootThreads / 32 values, for the reductions

  template <typename F>
  __device__ void for_each(int count, F&& f) const {
    for (int e = threadIdx.x; e < count; e += blockDim.x) f(e);
    __syncthreads();
  }
  template <typename T>
  __device__ void product(T* C, const T* A, const T* B, int n) const {
    small_product<kRows, kCols>(C, A, B, n);
  }
  __device__ double max(double v) const { return jk::block_reduce(v, scratch, jk::MaxOp{}, 0.0); }
  __device__ double sum(double v) const { return jk::block_sum(v, scratch); }
  __device__ bool any(int flag) const { return __syncthreads_or(flag) != 0; }
  __device__ bool leader() const { return threadIdx.x == 0; }
};

// matrix_inverse_root for a batch of small matrices, a block per matrix (grid-stride over the batch), the
// work buffers in dynamic shared memory (kSmallRootBuffers * n * n * sizeof(T) bytes). The products are FMA
// loops in T (float32 ones a little more exact than the general route's bfloat16 pieces). One launch for
// the whole op, where the general route launches ~10 kernels a step, which at n <= 64 were its cost.
template <typename T, int kRows, int kCols>
__global__ void __launch_bounds__(kSmallRootThreads)
    inverse_root_small_kernel(const T* __restrict__ A, T* __restrict__ X_out, T* __restrict__ residual_out,
                              int64_t nb, int n, int p, double eps, NewtonSteps steps) {
  extern __shared__ __align__(16) unsigned char small_root_buffers[];
  __shared__ double scratch[kSmallRootThreads / 32];
  const BlockTeam<kRows, kCols> team{scratch};
  const int64_t nn = static_cast<int64_t>(n) * n;
  for (int64_t b = blockIdx.x; b < nb; b += gridDim.x) {
    inverse_root_small(team, A + b * nn, X_out + b * nn, residual_out + b, reinterpret_cast<T*>(small_root_buffers),
                       n, p, eps, steps);
    __syncthreads();  // the next matrix reuses the buffers
  }
}

}  // namespace

void eye_axpy_cuda(jk::CudaLaunch& launch, const jk::CudaTensor& out, const jk::CudaTensor& in,
                   const jk::CudaTensor& a_vec, double a_scale, const jk::CudaTensor& d_vec, double d_scale) {
  const int64_t nb = out.size(0), n = out.size(1);
  const int64_t blocks_x = std::min<int64_t>((n * n + kThreads - 1) / kThreads, 4096);
  const dim3 grid(static_cast<unsigned>(blocks_x), static_cast<unsigned>(std::min<int64_t>(nb, 65535)));
  jk::dispatch_float32_64(out.scalar_type(), [&](auto zero) {
    using scalar_t = decltype(zero);
    eye_axpy_kernel<scalar_t><<<grid, kThreads, 0, launch.stream>>>(
        out.mutable_data_ptr<scalar_t>(), in.const_data_ptr<scalar_t>(),
        a_vec.const_data_ptr<scalar_t>(), static_cast<scalar_t>(a_scale),
        d_vec.const_data_ptr<scalar_t>(), static_cast<scalar_t>(d_scale), nb, n);
    JK_CUDA_LAUNCH_CHECK(launch);
  });
}

void finish_diagonal_cuda(jk::CudaLaunch& launch, const jk::CudaTensor& A, double a_scale, const jk::CudaTensor& X,
                          const jk::CudaTensor& residual, int64_t p, double eps) {
  const int64_t n = A.size(1), rows = A.size(0) * n;
  const int64_t not_diagonal_bytes = A.size(0) * static_cast<int64_t>(sizeof(int));
  int* not_diagonal = static_cast<int*>(launch.scratch(not_diagonal_bytes));
  JK_CUDA_CHECK(launch, cudaMemsetAsync(not_diagonal, 0, not_diagonal_bytes, launch.stream));
  // A warp per row, at most one full wave (8 blocks of 256 threads per SM).
  const int64_t blocks = std::min<int64_t>((rows + kThreads / 32 - 1) / (kThreads / 32),
                                           static_cast<int64_t>(launch.multiprocessors) * 8);
  jk::dispatch_float32_64(A.scalar_type(), [&](auto zero) {
    using scalar_t = decltype(zero);
    mark_not_diagonal_kernel<scalar_t><<<static_cast<unsigned>(blocks), kThreads, 0, launch.stream>>>(
        A.const_data_ptr<scalar_t>(), not_diagonal, rows, n);
    JK_CUDA_LAUNCH_CHECK(launch);
    write_diagonal_answer_kernel<scalar_t><<<static_cast<unsigned>(blocks), kThreads, 0, launch.stream>>>(
        A.const_data_ptr<scalar_t>(), X.mutable_data_ptr<scalar_t>(), residual.mutable_data_ptr<scalar_t>(),
        not_diagonal, rows, n, static_cast<scalar_t>(a_scale), eps, static_cast<int>(p));
    JK_CUDA_LAUNCH_CHECK(launch);
  });
}

bool inverse_root_small_cuda(jk::CudaLaunch& launch, const jk::CudaTensor& A, const jk::CudaTensor& X,
                             const jk::CudaTensor& residual, int64_t p, double eps, const NewtonSteps& steps) {
  const int64_t nb = A.size(0), n = A.size(1);
  if (n > kSmallRootMaxN) return false;
  if (launch.device < 0 || launch.device >= 64) return false;
  int optin = 0;  // the largest dynamic shared memory a block of this device may opt into
  JK_CUDA_CHECK(launch, jk::query_device_attribute<cudaDevAttrMaxSharedMemoryPerBlockOptin>(launch.device, &optin));
  bool launched = false;
  jk::dispatch_float32_64(A.scalar_type(), [&](auto zero) {
    using scalar_t = decltype(zero);
    const int64_t bytes = kSmallRootBuffers * n * n * static_cast<int64_t>(sizeof(scalar_t));
    // Room for the kernel's static shared memory too (its 64-byte scratch, and the 1024 bytes nvcc 13 gives
    // every sm_90 kernel of a module that declares dynamic shared memory); else the general route.
    constexpr int64_t kStaticRoom = 2048;
    if (bytes + kStaticRoom > optin) return;
    // n <= 32: 4 rows x 1 column a thread; n <= 64: 8 x 2 (small_product's bounds: n <= 8 kRows, 32 kCols).
    static_assert(kSmallRootThreads / 32 * 4 >= 32 && kSmallRootThreads / 32 * 8 >= kSmallRootMaxN &&
                  32 * 2 >= kSmallRootMaxN, "small_product's tiles cover the matrix");
    const auto kernel = n <= 32 ? inverse_root_small_kernel<scalar_t, 4, 1> : inverse_root_small_kernel<scalar_t, 8, 2>;
    // Past the default a block must opt in, and the default bounds static + dynamic shared memory at 48 KB
    // (the dynamic limit is 48 KB less the static bytes), hence the margin for the static ones: float64
    // n = 35 asks 49000 bytes (it launched without the opt-in on an H200, session 42 call 4, but with
    // little to spare). The opt-in is to the most this kernel is ever asked for on this device, not this
    // call's bytes: the setting is the process's, and a smaller one set by another thread between our
    // setting and our launch would fail the launch.
    if (bytes + kStaticRoom > 48 * 1024) {
      const int64_t most = std::min<int64_t>(
          kSmallRootBuffers * kSmallRootMaxN * kSmallRootMaxN * static_cast<int64_t>(sizeof(scalar_t)),
          optin - kStaticRoom);
      JK_CUDA_CHECK(launch, cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                 static_cast<int>(most)));
    }
    // A block per matrix, grid-stride past 64 blocks per SM (a large batch of small matrices).
    const int64_t blocks = std::min<int64_t>(nb, static_cast<int64_t>(launch.multiprocessors) * 64);
    kernel<<<static_cast<unsigned>(blocks), kSmallRootThreads, static_cast<size_t>(bytes), launch.stream>>>(
        A.const_data_ptr<scalar_t>(), X.mutable_data_ptr<scalar_t>(), residual.mutable_data_ptr<scalar_t>(), nb,
        static_cast<int>(n), static_cast<int>(p), eps, steps);
    JK_CUDA_LAUNCH_CHECK(launch);
    launched = true;
  });
  return launched;
}

void split_bf16x3_cuda(jk::CudaLaunch& launch, const jk::CudaTensor& x, double scale, double shift,
                       const jk::CudaTensor& left, const jk::CudaTensor& right) {
  const int64_t n = x.size(1), rows = x.size(0) * n;
  const float* x_ptr = x.const_data_ptr<float>();
  auto* left_ptr = left.mutable_data_ptr<__nv_bfloat16>();
  auto* right_ptr = right.mutable_data_ptr<__nv_bfloat16>();
  // Row starts are 16-byte (x) and 8-byte (pieces) aligned when n % 4 == 0 and the buffers are.
  const bool vec4 = n % 4 == 0 && jk::aligned16(x_ptr) && reinterpret_cast<uintptr_t>(left_ptr) % 8 == 0 &&
                    reinterpret_cast<uintptr_t>(right_ptr) % 8 == 0;
  const int64_t row_vectors = vec4 ? n / 4 : n;
  int tx = 32;
  while (tx < kThreads && tx < row_vectors) tx *= 2;  // short rows: several rows per block
  const dim3 block(tx, kThreads / tx);
  // Enough blocks for the rows, at most one full wave (8 blocks of 256 threads per SM).
  const int64_t blocks = std::min<int64_t>((rows + block.y - 1) / block.y,
                                           static_cast<int64_t>(launch.multiprocessors) * 8);
  const auto run = [&](auto kernel) {
    kernel<<<static_cast<unsigned>(blocks), block, 0, launch.stream>>>(
        x_ptr, static_cast<float>(scale), static_cast<float>(shift), left_ptr, right_ptr, rows, n);
  };
  if (vec4) {
    run(split_bf16x3_kernel<4>);
  } else {
    run(split_bf16x3_kernel<1>);
  }
  JK_CUDA_LAUNCH_CHECK(launch);
}

template <typename T>
void launch_kron_flat(jk::CudaLaunch& launch, const jk::CudaTensor& out, const jk::CudaTensor& A,
                      const jk::CudaTensor& B) {
  launch_kron_grid<T>(launch, out, A, B, 1, [&](const auto& shape, unsigned blocks) {  // vectors of 1: numel
    kron_flat_kernel<T><<<blocks, kThreads, 0, launch.stream>>>(out.mutable_data_ptr<T>(), A.const_data_ptr<T>(),
                                                                B.const_data_ptr<T>(), shape, shape.vectors);
  });
}

// The widest vectors the shape and the alignments allow: VEC (elements per store, at most 16 bytes)
// divides n*q and out's start is aligned to it; BVEC (elements per B read, at most VEC) divides q and
// B's start is aligned to it (every row's start then is too). Each halves until it fits; where rows
// would take one element per store, kron_flat_kernel writes 16-byte vectors across rows instead.
template <typename T, int VEC = 16 / sizeof(T), int BVEC = VEC>
void launch_kron_widest(jk::CudaLaunch& launch, const jk::CudaTensor& out, const jk::CudaTensor& A,
                        const jk::CudaTensor& B) {
  auto fits = [](int64_t extent, const void* start, int width) {
    return extent % width == 0 && reinterpret_cast<uintptr_t>(start) % (width * sizeof(T)) == 0;
  };
  if constexpr (BVEC == VEC && VEC > 1) {
    if (!fits(A.size(2) * B.size(2), out.const_data_ptr<T>(), VEC))
      return launch_kron_widest<T, VEC / 2, VEC / 2>(launch, out, A, B);
  }
  if constexpr (BVEC > 1) {
    if (!fits(B.size(2), B.const_data_ptr<T>(), BVEC)) return launch_kron_widest<T, VEC, BVEC / 2>(launch, out, A, B);
  }
  if constexpr (VEC == 1) {
    if (jk::aligned16(out.const_data_ptr<T>())) return launch_kron_flat<T>(launch, out, A, B);
  }
  launch_kron<T, VEC, BVEC>(launch, out, A, B);
}

void kron_cuda(jk::CudaLaunch& launch, const jk::CudaTensor& out, const jk::CudaTensor& A, const jk::CudaTensor& B) {
  jk::dispatch_float(out.scalar_type(), [&](auto zero) { launch_kron_widest<decltype(zero)>(launch, out, A, B); });
}

}  // namespace linalg
