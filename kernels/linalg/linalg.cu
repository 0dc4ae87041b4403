// Family `linalg`: CUDA kernels.
//
// Design (what bounds each op, and how the kernels are written to reach it):
// - matrix_inverse_root is compute-bound: a scaled coupled Newton iteration whose cost is its
//   matrix products (cuBLAS through at::bmm, TF32 off so float32 keeps its accuracy). The step
//   count comes from (p, max_cond, dtype) on the host, so there is no sync and no
//   data-dependent control flow; per-step scaling (linalg.cpp) cuts the steps for
//   cond 1e5, p = 4 to 8 (4 products each, minus the first X and the last M product).
//   The only elementwise work, T = c1 I - c2 M and friends, is one pass (eye_axpy below).
// - kron and per_sample_grad_linear are write-bound: the output (nb, m*p, n*q) is written
//   exactly once with 16-byte streaming stores, row by row; the inputs are tiny and served
//   from L1/L2. Column indices advance incrementally, so the inner loop has no divisions.
#include <ATen/Context.h>
#include <ATen/Dispatch.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <algorithm>
#include <cstring>

#include "elementwise.cuh"  // jk::multiprocessor_count
#include "jk.h"
#include "linalg.h"

namespace linalg {

namespace {

constexpr int kThreads = 256;

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

void eye_axpy_cuda(const at::Tensor& out, const at::Tensor& in, const at::Tensor& a_vec, double a_scale,
                   const at::Tensor& d_vec, double d_scale) {
  const int64_t nb = out.size(0), n = out.size(1);
  const int64_t blocks_x = std::min<int64_t>((n * n + kThreads - 1) / kThreads, 4096);
  const dim3 grid(static_cast<unsigned>(blocks_x), static_cast<unsigned>(std::min<int64_t>(nb, 65535)));
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES(out.scalar_type(), "eye_axpy_cuda", [&] {
    eye_axpy_kernel<scalar_t><<<grid, kThreads, 0, stream>>>(
        out.mutable_data_ptr<scalar_t>(), in.defined() ? in.const_data_ptr<scalar_t>() : nullptr,
        a_vec.defined() ? a_vec.const_data_ptr<scalar_t>() : nullptr, static_cast<scalar_t>(a_scale),
        d_vec.defined() ? d_vec.const_data_ptr<scalar_t>() : nullptr, static_cast<scalar_t>(d_scale), nb, n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
}

template <typename T, int VEC>
struct alignas(sizeof(T) * VEC) Pack {
  T v[VEC];
};

// One output row (b, i*p + k) = A[b, i, j] * B[b, k, l] over columns c = j*q + l.
// blockDim = (tx, ty): ty rows per block, tx threads across a row, VEC columns per thread.
// Requires cols % VEC == 0 (rows then start 16-byte aligned in a fresh contiguous output).
template <typename T, int VEC>
__global__ void kron_kernel(T* __restrict__ out, const T* __restrict__ A, const T* __restrict__ B, int64_t nb,
                            int64_t m, int64_t n, int64_t p, int64_t q) {
  const int64_t rows = nb * m * p, cols = n * q;
  // Column position of this thread, and its stride, as (j, l) pairs: computed once.
  const int64_t c0 = static_cast<int64_t>(threadIdx.x) * VEC, stride = static_cast<int64_t>(blockDim.x) * VEC;
  const int64_t j0 = c0 / q, l0 = c0 - j0 * q, sj = stride / q, sl = stride - sj * q;
  for (int64_t row = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y; row < rows;
       row += static_cast<int64_t>(gridDim.x) * blockDim.y) {
    const int64_t b = row / (m * p), r = row - b * (m * p), i = r / p, k = r - i * p;
    const T* a_row = A + (b * m + i) * n;
    const T* b_row = B + (b * p + k) * q;
    T* o_row = out + row * cols;
    int64_t j = j0, l = l0;
    for (int64_t c = c0; c < cols; c += stride) {
      Pack<T, VEC> pack;
      int64_t jj = j, ll = l;
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        pack.v[e] = kron_mul(a_row[jj], b_row[ll]);  // tiny inputs: L1/L2 hits
        if (++ll == q) {
          ll = 0;
          ++jj;
        }
      }
      if constexpr (sizeof(pack) == 16) {
        uint4 bits;
        memcpy(&bits, &pack, 16);
        __stcs(reinterpret_cast<uint4*>(o_row + c), bits);  // streaming: the output is not re-read here
      } else {
        *reinterpret_cast<Pack<T, VEC>*>(o_row + c) = pack;
      }
      j += sj;
      l += sl;
      if (l >= q) {
        l -= q;
        ++j;
      }
    }
  }
}

template <typename T, int VEC>
void launch_kron(const at::Tensor& out, const at::Tensor& A, const at::Tensor& B) {
  const int64_t nb = out.size(0), m = A.size(1), n = A.size(2), p = B.size(1), q = B.size(2);
  const int64_t rows = nb * m * p, vcols = n * q / VEC;
  int tx = 32;
  while (tx < kThreads && tx < vcols) tx *= 2;  // short rows: several rows per block
  const int ty = kThreads / tx;
  const int sms = jk::multiprocessor_count(out.get_device());
  const int64_t blocks = std::min<int64_t>((rows + ty - 1) / ty, static_cast<int64_t>(sms) * 32);
  kron_kernel<T, VEC><<<static_cast<unsigned>(blocks), dim3(tx, ty), 0, c10::cuda::getCurrentCUDAStream()>>>(
      out.mutable_data_ptr<T>(), A.const_data_ptr<T>(), B.const_data_ptr<T>(), nb, m, n, p, q);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

void kron_cuda_kernel(const at::Tensor& out, const at::Tensor& A, const at::Tensor& B) {
  const int64_t cols = A.size(2) * B.size(2);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, out.scalar_type(), "kron_cuda", [&] {
    constexpr int vec = 16 / sizeof(scalar_t);
    const bool aligned = reinterpret_cast<uintptr_t>(out.data_ptr()) % 16 == 0;
    if (cols % vec == 0 && aligned) {
      launch_kron<scalar_t, vec>(out, A, B);
    } else {
      launch_kron<scalar_t, 1>(out, A, B);
    }
  });
}

std::tuple<at::Tensor, at::Tensor> matrix_inverse_root_cuda(const at::Tensor& A, int64_t p, double eps,
                                                            double max_cond) {
  const c10::cuda::CUDAGuard guard(A.device());
  const at::NoTF32Guard no_tf32;  // float32 products in full precision, whatever the global flag says
  return matrix_inverse_root_impl(A, p, eps, max_cond, &eye_axpy_cuda);
}

at::Tensor kron_cuda(const at::Tensor& A, const at::Tensor& B) {
  const c10::cuda::CUDAGuard guard(A.device());
  return kron_impl(A, B, &kron_cuda_kernel);
}

std::tuple<at::Tensor, at::Tensor> per_sample_grad_linear_cuda(const at::Tensor& x, const at::Tensor& grad_out,
                                                               bool with_bias) {
  const c10::cuda::CUDAGuard guard(x.device());
  return per_sample_grad_linear_impl(x, grad_out, with_bias, &kron_cuda_kernel);
}

}  // namespace

JK_LIBRARY_IMPL(CUDA, m) {
  m.impl("matrix_inverse_root", &matrix_inverse_root_cuda);
  m.impl("kron", &kron_cuda);
  m.impl("per_sample_grad_linear", &per_sample_grad_linear_cuda);
}

}  // namespace linalg
