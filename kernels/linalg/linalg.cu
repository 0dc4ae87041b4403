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
// - kron and per_sample_grad_linear are write-bound: the output (nb, m*p, n*q) is written
//   exactly once with 16-byte streaming stores. When q % VEC == 0 a thread holds one B vector
//   in registers and writes it, times A[b, i, j], into a chunk of rows i: per store one A value
//   from L1 (the row-by-row kernel before it also loaded a B vector per store, and L2 was 85%
//   busy with those loads: 24.6 us against torch.compile's 22.8 on the H200). Otherwise the
//   row kernel walks each output row, positions advanced with carries (no divisions in loops).
#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <stdexcept>

#include "cuda_launch.cuh"
#include "elementwise_kernel.cuh"  // jk::aligned16
#include "linalg.h"

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

// Shapes of one kron launch, and the grid's row step pre-split on the host (see RowCursor).
struct KronArgs {
  int64_t m, n, p, q, cols, numel, pq;  // cols = n*q, numel = nb*m*p*cols, pq = p*q
  // Row step (gridDim.x * blockDim.y rows, < 2^31) = (db*m + di)*p + dk, kept as the digits
  // di < m, dk < p and the offset increments (db*m + di)*n, (db*p + dk)*q and step*cols.
  int64_t step_i, step_k, step_a, step_b, step_o;
  int64_t sj, sl;  // the column stride blockDim.x * VEC = sj*q + sl, sl < q
};

// x / d for 0 <= x < 2^31, d >= 1: a 32-bit division (~15 instructions; a 64-bit one is ~70).
// d > x gives 0, and otherwise d <= x fits in 32 bits too.
__device__ __forceinline__ int64_t div_small(int64_t x, int64_t d) {
  return d > x ? 0 : static_cast<int64_t>(static_cast<uint32_t>(x) / static_cast<uint32_t>(d));
}

// x / d for any 0 <= x: the 32-bit division when x allows it.
__device__ __forceinline__ int64_t div_any(int64_t x, int64_t d) {
  return x < (int64_t{1} << 31) ? div_small(x, d) : x / d;
}

// A thread's output row (b, i*p + k), i.e. row = (b*m + i)*p + k, as the loops use it: the
// offsets of A row (b, i), B row (b, k) and the output row, plus the digits i and k that say
// when those offsets carry. Moving rows then costs a few adds: no division, no multiply.
struct RowCursor {
  int64_t i, k, a_off, b_off, o_off;  // a_off = (b*m + i)*n, b_off = (b*p + k)*q, o_off = row*cols

  __device__ __forceinline__ RowCursor(int64_t row, const KronArgs& s) {  // row < 2^31: once per thread
    const int64_t ai = div_small(row, s.p), b = div_small(ai, s.m);
    i = ai - b * s.m;
    k = row - ai * s.p;
    a_off = ai * s.n;
    b_off = (b * s.p + k) * s.q;
    o_off = row * s.cols;
  }

  __device__ __forceinline__ bool valid(const KronArgs& s) const { return o_off < s.numel; }  // row < rows

  __device__ __forceinline__ void advance(const KronArgs& s) {  // row += step
    k += s.step_k;
    i += s.step_i;
    a_off += s.step_a;
    b_off += s.step_b;
    o_off += s.step_o;
    if (k >= s.p) {  // each digit sum is < 2 * its base: at most one carry each
      k -= s.p;
      b_off -= s.pq;
      ++i;
      a_off += s.n;
    }
    if (i >= s.m) {
      i -= s.m;
      b_off += s.pq;
    }
  }
};

template <typename T, int VEC, bool kStreaming = true>
__device__ __forceinline__ void store_pack(T* dst, const Pack<T, VEC>& pack) {
  if constexpr (kStreaming && sizeof(pack) == 16) {
    uint4 bits;
    memcpy(&bits, &pack, 16);
    __stcs(reinterpret_cast<uint4*>(dst), bits);  // streaming: the output is not re-read here
  } else {
    *reinterpret_cast<Pack<T, VEC>*>(dst) = pack;
  }
}

// Output (nb, m*p, n*q) when a vector of VEC output columns lies in one B row (q % VEC == 0, B
// aligned; VEC = 1 always does): out[b, i*p + k, v*VEC + e] = A[b, i, j] * B[b, k, l + e] with
// j*q + l = v*VEC. A thread owns one B vector, the slot (b, k, v) = (slot block) * blockDim.x +
// threadIdx.x (v fastest, so a warp's stores are contiguous), and the rows i of one chunk: B is read
// once, and each 16-byte store costs one A value (an L1 hit). kOuter (p = 1, outer products such as
// per-sample gradients): the chunk is blockIdx.x, so the blocks that run at once write neighbouring rows,
// with plain stores; otherwise the slot block is blockIdx.x, with streaming stores (launch_kron says why).
template <typename T, int VEC, bool kOuter>
__global__ void __launch_bounds__(kThreads) kron_slots_kernel(T* __restrict__ out, const T* __restrict__ A,
                                                              const T* __restrict__ B, KronArgs s, int64_t slots,
                                                              int64_t rows_per_chunk) {
  const unsigned slot_block = kOuter ? blockIdx.y : blockIdx.x, chunk = kOuter ? blockIdx.x : blockIdx.y;
  const int64_t slot = static_cast<int64_t>(slot_block) * blockDim.x + threadIdx.x;
  if (slot >= slots) return;
  const int64_t vcols = s.cols / VEC;
  const int64_t bk = div_any(slot, vcols), v = slot - bk * vcols;  // bk = b*p + k
  const int64_t b = div_any(bk, s.p), k = bk - b * s.p;
  const int64_t j = div_any(v * VEC, s.q), l = v * VEC - j * s.q;
  const Pack<T, VEC> b_vec = *reinterpret_cast<const Pack<T, VEC>*>(B + bk * s.q + l);
  const int64_t i_begin = static_cast<int64_t>(chunk) * rows_per_chunk;
  const int64_t i_end = i_begin + rows_per_chunk < s.m ? i_begin + rows_per_chunk : s.m;
  const T* a = A + (b * s.m + i_begin) * s.n + j;
  T* o = out + ((b * s.m + i_begin) * s.p + k) * s.cols + v * VEC;
  const int64_t o_step = s.p * s.cols;
#pragma unroll 4
  for (int64_t i = i_begin; i < i_end; ++i, a += s.n, o += o_step) {
    Pack<T, VEC> pack;
    const T ai = *a;
#pragma unroll
    for (int e = 0; e < VEC; ++e) pack.v[e] = kron_mul(ai, b_vec.v[e]);
    store_pack<T, VEC, !kOuter>(o, pack);
  }
}

// VEC output columns j*q + l ... of one row when q % VEC != 0: a vector may cross into the next
// A column, so walk (j, l) element by element.
template <typename T, int VEC>
__device__ __forceinline__ Pack<T, VEC> kron_pack(const T* a_row, const T* b_row, int64_t j, int64_t l,
                                                  int64_t q) {
  Pack<T, VEC> pack;
#pragma unroll
  for (int e = 0; e < VEC; ++e) {
    pack.v[e] = kron_mul(a_row[j], b_row[l]);
    if (++l == q) {
      l = 0;
      ++j;
    }
  }
  return pack;
}

// Output (nb, m*p, n*q) when q % VEC != 0, row by row: row (b, i*p + k), column j*q + l =
// A[b, i, j] * B[b, k, l]. blockDim = (tx, ty): tx threads across a row, VEC columns per thread,
// ty rows per block; each thread steps by the grid's row step. Requires cols % VEC == 0 (rows
// then start 16-byte aligned in a fresh contiguous output). Positions are split into digits once
// per thread (32-bit divisions: the start row is below the step, the start column below
// blockDim.x * VEC) and then moved with carries.
template <typename T, int VEC>
__global__ void __launch_bounds__(kThreads) kron_rows_kernel(T* __restrict__ out, const T* __restrict__ A,
                                                             const T* __restrict__ B, const KronArgs s) {
  const int64_t c0 = static_cast<int64_t>(threadIdx.x) * VEC, stride = static_cast<int64_t>(blockDim.x) * VEC;
  if (c0 >= s.cols) return;  // short rows: this thread has no column
  const int64_t j0 = div_small(c0, s.q), l0 = c0 - j0 * s.q;
  for (RowCursor cur(static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y, s); cur.valid(s); cur.advance(s)) {
    const T* a_row = A + cur.a_off;
    const T* b_row = B + cur.b_off;
    T* o_row = out + cur.o_off;
    int64_t j = j0, l = l0;
    for (int64_t c = c0; c < s.cols; c += stride) {
      store_pack<T, VEC>(o_row + c, kron_pack<T, VEC>(a_row, b_row, j, l, s.q));
      j += s.sj;
      l += s.sl;
      if (l >= s.q) {
        l -= s.q;
        ++j;
      }
    }
  }
}

// kVecB: a vector of VEC output columns lies in one B row (q % VEC == 0 and B aligned, or VEC = 1).
template <typename T, int VEC, bool kVecB>
void launch_kron(jk::CudaLaunch& launch, const jk::CudaTensor& out, const jk::CudaTensor& A, const jk::CudaTensor& B) {
  KronArgs s{};
  s.m = A.size(1), s.n = A.size(2), s.p = B.size(1), s.q = B.size(2);
  s.cols = s.n * s.q, s.numel = out.numel(), s.pq = s.p * s.q;
  const int64_t vcols = s.cols / VEC;
  const int64_t sms = launch.multiprocessors;
  const cudaStream_t stream = launch.stream;
  if constexpr (kVecB) {
    // Rows i split into chunks so that about four waves of threads (2048 per SM) share the work:
    // enough stores in flight, short blocks, a short tail.
    const int64_t slots = out.size(0) * s.p * vcols;
    const int64_t slot_blocks = (slots + kThreads - 1) / kThreads;
    // (std::runtime_error: PyTorch raises it as RuntimeError, as TORCH_CHECK's, without c10's headers)
    if (slot_blocks >= (int64_t{1} << 31)) throw std::runtime_error("kron: output too large for one launch");
    const int64_t threads_wanted = sms * 2048 * 4;
    int64_t chunks = std::clamp<int64_t>((threads_wanted + slots - 1) / slots, 1, std::min<int64_t>(s.m, 65535));
    // Outer products (p = 1: per_sample_grad_linear) write a batch entry's rows one after another in
    // memory: chunks of 4 rows, chunk-fastest in the grid, so the blocks that run at once write
    // neighbouring rows, and plain stores. H200, B = 256, 1024 x 1024 float32 (session 24,
    // results/session24/call3-4, kron_ab.py): 286 -> 245 us (torch.compile 240); kron 50x50 (x)
    // 100x100, whose rows i are p output rows apart, gained nothing from either and keeps its layout.
    const bool outer = s.p == 1 && slot_blocks <= 65535;
    if (outer) chunks = std::min<int64_t>((s.m + 3) / 4, int64_t{1} << 30);
    const int64_t rows_per_chunk = (s.m + chunks - 1) / chunks;
    chunks = (s.m + rows_per_chunk - 1) / rows_per_chunk;
    T* o = out.mutable_data_ptr<T>();
    if (outer) {
      kron_slots_kernel<T, VEC, true><<<dim3(static_cast<unsigned>(chunks), static_cast<unsigned>(slot_blocks)),
                                        kThreads, 0, stream>>>(o, A.const_data_ptr<T>(), B.const_data_ptr<T>(), s,
                                                               slots, rows_per_chunk);
    } else {
      kron_slots_kernel<T, VEC, false><<<dim3(static_cast<unsigned>(slot_blocks), static_cast<unsigned>(chunks)),
                                         kThreads, 0, stream>>>(o, A.const_data_ptr<T>(), B.const_data_ptr<T>(), s,
                                                                slots, rows_per_chunk);
    }
  } else {
    int tx = 32;
    while (tx < kThreads && tx < vcols) tx *= 2;  // short rows: several rows per block
    const int ty = kThreads / tx;
    s.sj = tx * VEC / s.q;
    s.sl = tx * VEC - s.sj * s.q;
    // Enough blocks for the work, up to 32 per SM (more than fit at once: the tail stays short).
    const int64_t rows = s.numel / s.cols;
    const int64_t blocks = std::min<int64_t>((rows + ty - 1) / ty, sms * 32);
    const int64_t step = blocks * ty;
    if (step > INT32_MAX) throw std::logic_error("kron: row step too large for the 32-bit start split");
    const int64_t ai = step / s.p, db = ai / s.m;
    s.step_i = ai - db * s.m;
    s.step_k = step - ai * s.p;
    s.step_a = ai * s.n;
    s.step_b = (db * s.p + s.step_k) * s.q;
    s.step_o = step * s.cols;
    kron_rows_kernel<T, VEC><<<static_cast<unsigned>(blocks), dim3(tx, ty), 0, stream>>>(
        out.mutable_data_ptr<T>(), A.const_data_ptr<T>(), B.const_data_ptr<T>(), s);
  }
  JK_CUDA_LAUNCH_CHECK(launch);
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
      const T a = a_row[j];
      found |= j == i ? !isfinite(a) : a != T(0);
    }
    if (__any_sync(kFullMask, found) && lane == 0) not_diagonal[b] = 1;
  }
}

// X[b] = diag((max(a_scale * A_ii, 0) + eps)^exponent) and residual[b] = 0 for each unmarked matrix b.
template <typename T>
__global__ void __launch_bounds__(kThreads) write_diagonal_answer_kernel(const T* __restrict__ A, T* __restrict__ X,
                                                                       T* __restrict__ residual,
                                                                       const int* __restrict__ not_diagonal,
                                                                       int64_t rows, int64_t n, T a_scale, T eps,
                                                                       T exponent) {
  const int lane = threadIdx.x & 31;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * blockDim.x / 32;
  for (int64_t row = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32; row < rows; row += warps) {
    const int64_t b = row / n, i = row - b * n;
    if (not_diagonal[b]) continue;
    const T a = a_scale * A[row * n + i];
    const T root = pow((a < T(0) ? T(0) : a) + eps, exponent);
    for (int64_t j = lane; j < n; j += 32) X[row * n + j] = j == i ? root : T(0);
    if (i == 0 && lane == 0) residual[b] = T(0);
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
        not_diagonal, rows, n, static_cast<scalar_t>(a_scale), static_cast<scalar_t>(eps),
        static_cast<scalar_t>(-1.0 / static_cast<double>(p)));
    JK_CUDA_LAUNCH_CHECK(launch);
  });
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

void kron_cuda(jk::CudaLaunch& launch, const jk::CudaTensor& out, const jk::CudaTensor& A, const jk::CudaTensor& B) {
  const int64_t cols = A.size(2) * B.size(2), q = B.size(2);
  jk::dispatch_float(out.scalar_type(), [&](auto zero) {
    using scalar_t = decltype(zero);
    constexpr int vec = 16 / sizeof(scalar_t);
    if (cols % vec == 0 && jk::aligned16(out.const_data_ptr<scalar_t>())) {
      if (q % vec == 0 && jk::aligned16(B.const_data_ptr<scalar_t>())) {
        launch_kron<scalar_t, vec, true>(launch, out, A, B);  // common case: vector loads of B rows
      } else {
        launch_kron<scalar_t, vec, false>(launch, out, A, B);
      }
    } else {
      launch_kron<scalar_t, 1, true>(launch, out, A, B);  // one element per "vector": always inside one B row
    }
  });
}

}  // namespace linalg
