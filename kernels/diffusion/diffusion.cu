// Family `diffusion`: CUDA kernels and their launchers (declared in diffusion.h). Checks, allocation and
// registration live in diffusion.cpp, which keeps this file's includes (and its cold nvcc time) small.
//
// Design, against the memory / launch floors:
// - ddpm_step / ddim_step are memory-bound: read model_output and sample once, write the result once;
//   noise (when not given) is drawn in registers by Philox (one call per 4 outputs), so it costs no
//   traffic. One wave of resident blocks, each owning an equal contiguous chunk of items (16-byte
//   vectors); a thread issues the loads of kStepUnroll items before any math. A row's coefficients
//   (double math on the float64 schedule) are computed when a thread enters the row, not per element.
//   Timesteps are read on the device: no host sync, a CUDA graph replays every step as captured.
// - conv1d_gn_mish at small batch x length (diffusion policy at batch 1) is bound by launch latency:
//   one launch does it all, one block per (batch, group). The zero-padded input window sits in shared
//   memory; each thread owns a 4-channel x 4-position tile over a slice of the input channels and
//   streams that tile's weights; slices are summed in shared memory, where the group's statistics
//   (two passes) and GroupNorm + Mish follow. Large batch x length is compute-bound: cuDNN (tensor
//   cores) convolves there (diffusion.cpp) and gn_mish_kernel finishes in one pass.
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <algorithm>

#include "diffusion.h"
#include "elementwise.cuh"
#include "philox_cuda.cuh"
#include "reduce.cuh"

namespace diffusion {

// ---------------------------------------------------------------- scheduler steps

constexpr int kStepThreads = 256;
constexpr int kStepUnroll = 4;  // items per thread with loads in flight at once

// An item is kItem consecutive elements (a multiple of 4: whole Philox blocks). kVector: loaded as
// 16-byte vectors; the host guarantees 16-byte aligned pointers and rows of a multiple of kItem
// elements, so an item never straddles two rows. Otherwise elements are loaded one by one.
template <typename scalar_t, int kItem, bool kVector>
struct Item {
  scalar_t v[kItem];

  __device__ __forceinline__ void load(const scalar_t* __restrict__ p, int64_t item, int64_t n) {
    if constexpr (kVector) {
      constexpr int kVec = 16 / sizeof(scalar_t);
      using V = jk::Vec<scalar_t, kVec>;
#pragma unroll
      for (int j = 0; j < kItem / kVec; ++j) {
        const V vec = reinterpret_cast<const V*>(p)[item * (kItem / kVec) + j];
#pragma unroll
        for (int e = 0; e < kVec; ++e) v[j * kVec + e] = vec.val[e];
      }
    } else {
#pragma unroll
      for (int e = 0; e < kItem; ++e) {
        const int64_t i = item * kItem + e;
        v[e] = i < n ? p[i] : scalar_t(0);
      }
    }
  }

  __device__ __forceinline__ void store(scalar_t* __restrict__ p, int64_t item, int64_t n) const {
    if constexpr (kVector) {
      constexpr int kVec = 16 / sizeof(scalar_t);
      using V = jk::Vec<scalar_t, kVec>;
#pragma unroll
      for (int j = 0; j < kItem / kVec; ++j) {
        V vec;
#pragma unroll
        for (int e = 0; e < kVec; ++e) vec.val[e] = v[j * kVec + e];
        reinterpret_cast<V*>(p)[item * (kItem / kVec) + j] = vec;
      }
    } else {
#pragma unroll
      for (int e = 0; e < kItem; ++e) {
        const int64_t i = item * kItem + e;
        if (i < n) p[i] = v[e];
      }
    }
  }
};

// Block b owns items [b * chunk, (b + 1) * chunk); element i uses lane i % 4 of Philox block i / 4 (as on
// the CPU), whatever the path.
template <typename scalar_t, int kItem, bool kVector, typename CoefFn>
__global__ void __launch_bounds__(kStepThreads)
    step_kernel(scalar_t* __restrict__ out, const scalar_t* __restrict__ m, const scalar_t* __restrict__ x,
                const scalar_t* __restrict__ noise, int64_t n, int64_t inner, int64_t chunk, CoefFn fn, bool clip,
                double range, bool draw, at::PhiloxCudaState philox) {
  using acc_t = at::opmath_type<scalar_t>;
  using I = Item<scalar_t, kItem, kVector>;
  const int64_t n_items = (n + kItem - 1) / kItem;
  const int64_t begin = static_cast<int64_t>(blockIdx.x) * chunk;
  const int64_t end = begin + chunk < n_items ? begin + chunk : n_items;
  uint64_t seed = 0, base = 0;
  if (draw) {
    const jk::PhiloxSeed s = jk::unpack_philox(philox);
    seed = s.seed;
    base = s.offset / 4;
  }
  const acc_t r = static_cast<acc_t>(range);
  RowCache<acc_t, CoefFn> rows(fn, inner);
  for (int64_t first = begin + threadIdx.x; first < end; first += kStepThreads * kStepUnroll) {
    I mv[kStepUnroll], xv[kStepUnroll], zv[kStepUnroll];
#pragma unroll
    for (int u = 0; u < kStepUnroll; ++u) {  // every load first
      const int64_t item = first + u * kStepThreads;
      if (item < end) {
        mv[u].load(m, item, n);
        xv[u].load(x, item, n);
        if (noise != nullptr) zv[u].load(noise, item, n);
      }
    }
#pragma unroll
    for (int u = 0; u < kStepUnroll; ++u) {
      const int64_t item = first + u * kStepThreads;
      if (item >= end) break;
      acc_t z[kItem];
      if (noise != nullptr) {
#pragma unroll
        for (int e = 0; e < kItem; ++e) z[e] = static_cast<acc_t>(zv[u].v[e]);
      } else if (draw) {
#pragma unroll
        for (int q = 0; q < kItem / 4; ++q) {
          const jk::Float4 f = jk::normal4(seed, base + static_cast<uint64_t>(item) * (kItem / 4) + q);
          z[4 * q] = f.x;
          z[4 * q + 1] = f.y;
          z[4 * q + 2] = f.z;
          z[4 * q + 3] = f.w;
        }
      } else {
#pragma unroll
        for (int e = 0; e < kItem; ++e) z[e] = acc_t(0);
      }
      const int64_t i0 = item * kItem;
      I o;
      if constexpr (kVector) {  // the item lies in one row
        const StepCoefs<acc_t> c = rows.at(i0);
#pragma unroll
        for (int e = 0; e < kItem; ++e) {
          o.v[e] = static_cast<scalar_t>(
              step_element(c, static_cast<acc_t>(mv[u].v[e]), static_cast<acc_t>(xv[u].v[e]), z[e], clip, r));
        }
      } else {
#pragma unroll
        for (int e = 0; e < kItem; ++e) {
          o.v[e] = static_cast<scalar_t>(step_element(rows.at(i0 + e), static_cast<acc_t>(mv[u].v[e]),
                                                      static_cast<acc_t>(xv[u].v[e]), z[e], clip, r));
        }
      }
      o.store(out, item, n);
    }
  }
}

template <typename scalar_t, int kItem, bool kVector, typename CoefFn>
void launch_step(const at::Tensor& out, const at::Tensor& m, const at::Tensor& x, const at::Tensor* noise,
                 const CoefFn& fn, bool clip, double range, bool draw) {
  const int64_t n = out.numel(), n_items = (n + kItem - 1) / kItem, inner = n / x.size(0);
  // One wave of resident blocks, each with an equal contiguous chunk (no tail wave); chunks are whole
  // warps of items so each warp's accesses stay aligned.
  static const int per_sm = [] {
    int count = 0;
    C10_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &count, step_kernel<scalar_t, kItem, kVector, CoefFn>, kStepThreads, 0));
    return std::max(count, 1);
  }();
  const int64_t max_blocks = static_cast<int64_t>(jk::multiprocessor_count(out.get_device())) * per_sm;
  const int64_t blocks_wanted = std::min((n_items + kStepThreads - 1) / kStepThreads, max_blocks);
  const int64_t chunk = ((n_items + blocks_wanted - 1) / blocks_wanted + 31) / 32 * 32;
  const int64_t blocks = (n_items + chunk - 1) / chunk;
  // Reserve one draw per element, so consecutive calls (and graph replays) never reuse numbers.
  const at::PhiloxCudaState philox = draw ? jk::cuda_philox_state(n) : at::PhiloxCudaState();
  step_kernel<scalar_t, kItem, kVector><<<blocks, kStepThreads, 0, c10::cuda::getCurrentCUDAStream()>>>(
      out.mutable_data_ptr<scalar_t>(), m.const_data_ptr<scalar_t>(), x.const_data_ptr<scalar_t>(),
      noise ? noise->const_data_ptr<scalar_t>() : nullptr, n, inner, chunk, fn, clip, range, draw, philox);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

template <typename CoefFn>
void step_cuda(const at::Tensor& out, const at::Tensor& m, const at::Tensor& x, const at::Tensor* noise,
               const CoefFn& fn, bool clip, double range, bool draw) {
  c10::cuda::CUDAGuard guard(out.device());
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, out.scalar_type(), "diffusion_step_cuda", [&] {
    constexpr int kItem = std::max<int>(16 / sizeof(scalar_t), 4);
    auto aligned = [](const at::Tensor& t) { return reinterpret_cast<uintptr_t>(t.const_data_ptr()) % 16 == 0; };
    const bool vector = out.numel() / x.size(0) % kItem == 0 && aligned(out) && aligned(m) && aligned(x) &&
                        (noise == nullptr || aligned(*noise));
    if (vector) {
      launch_step<scalar_t, kItem, true>(out, m, x, noise, fn, clip, range, draw);
    } else {
      launch_step<scalar_t, 4, false>(out, m, x, noise, fn, clip, range, draw);
    }
  });
}

void ddpm_step_cuda(const at::Tensor& out, const at::Tensor& model_output, const at::Tensor& sample,
                    const at::Tensor* noise, const DdpmCoefFn& fn, bool clip, double range, bool draw) {
  step_cuda(out, model_output, sample, noise, fn, clip, range, draw);
}

void ddim_step_cuda(const at::Tensor& out, const at::Tensor& model_output, const at::Tensor& sample,
                    const at::Tensor* noise, const DdimCoefFn& fn, bool clip, double range, bool draw) {
  step_cuda(out, model_output, sample, noise, fn, clip, range, draw);
}

// ---------------------------------------------------------------- GroupNorm + Mish

// dst = Mish(GroupNorm(src)) for one group's n = channels * length contiguous values (shared or global
// memory); gamma / beta point at the group's first channel. Two-pass statistics: no cancellation when
// |mean| >> std. Call from every thread of the block.
template <typename acc_t, typename in_t, typename out_t>
__device__ void group_norm_mish(const in_t* src, out_t* __restrict__ dst, int64_t n, int64_t length,
                                const out_t* __restrict__ gamma, const out_t* __restrict__ beta, double eps,
                                acc_t* scratch) {
  acc_t sum = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) sum += static_cast<acc_t>(src[i]);
  const acc_t mean = jk::block_sum(sum, scratch) / static_cast<acc_t>(n);
  acc_t sq = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const acc_t d = static_cast<acc_t>(src[i]) - mean;
    sq += d * d;
  }
  const acc_t var = jk::block_sum(sq, scratch) / static_cast<acc_t>(n);
  const acc_t rstd = acc_t(1) / ::sqrt(var + static_cast<acc_t>(eps));
  const bool small = n < (int64_t{1} << 31);  // 32-bit division finds the channel
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const int64_t c = small ? static_cast<int64_t>(static_cast<uint32_t>(i) / static_cast<uint32_t>(length))
                            : i / length;
    const acc_t h = (static_cast<acc_t>(src[i]) - mean) * rstd * static_cast<acc_t>(gamma[c]) +
                    static_cast<acc_t>(beta[c]);
    dst[i] = static_cast<out_t>(mish(h));
  }
}

// y (B, C, L) contiguous; one block per (batch, group), whose C/G * L values are contiguous.
template <typename scalar_t>
__global__ void gn_mish_kernel(const scalar_t* __restrict__ y, const scalar_t* __restrict__ gamma,
                               const scalar_t* __restrict__ beta, scalar_t* __restrict__ out, int64_t groups,
                               int64_t cg, int64_t length, double eps) {
  using acc_t = at::opmath_type<scalar_t>;
  __shared__ acc_t scratch[32];
  const int64_t bg = blockIdx.x, n = cg * length, ch0 = (bg % groups) * cg;
  group_norm_mish<acc_t>(y + bg * n, out + bg * n, n, length, gamma + ch0, beta + ch0, eps, scratch);
}

void gn_mish_cuda(const at::Tensor& out, const at::Tensor& y, const at::Tensor& gn_weight, const at::Tensor& gn_bias,
                  int64_t groups, double eps) {
  c10::cuda::CUDAGuard guard(out.device());
  const int64_t batch = y.size(0), cg = y.size(1) / groups, length = y.size(2), n = cg * length;
  const int threads = static_cast<int>(std::min<int64_t>(512, std::max<int64_t>(32, (n + 31) / 32 * 32)));
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, out.scalar_type(), "gn_mish_cuda", [&] {
    gn_mish_kernel<scalar_t><<<batch * groups, threads, 0, c10::cuda::getCurrentCUDAStream()>>>(
        y.const_data_ptr<scalar_t>(), gn_weight.const_data_ptr<scalar_t>(), gn_bias.const_data_ptr<scalar_t>(),
        out.mutable_data_ptr<scalar_t>(), groups, cg, length, eps);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
}

// ---------------------------------------------------------------- conv1d_gn_mish in one launch

constexpr int kFusedThreads = 512;
constexpr int kTileC = 4, kTileL = 4;   // a thread's output tile: channels x positions
constexpr int64_t kFusedMaxRows = 8;    // batch x ceil(L_out / 16) beyond which cuDNN wins

// Block = (batch b, group g). xs[ci][j] = x[b, ci, j - pad] (0 outside [0, L)) for the whole length;
// thread t owns tile t % tiles (kTileC channels x kTileL positions of the group) over input-channel slice
// t / tiles; part[slice][c * l_out + l] collects the slices' sums, part[0] then holds y = conv + bias.
template <typename scalar_t>
__global__ void __launch_bounds__(kFusedThreads)
    conv_gn_mish_kernel(const scalar_t* __restrict__ x, const scalar_t* __restrict__ w,
                        const scalar_t* __restrict__ bias, const scalar_t* __restrict__ gamma,
                        const scalar_t* __restrict__ beta, scalar_t* __restrict__ out, int c_in, int length,
                        int groups, int cg, int kernel, int pad, int l_out, int width, int slices, double eps) {
  using acc_t = at::opmath_type<scalar_t>;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  acc_t* xs = reinterpret_cast<acc_t*>(smem_raw);  // [c_in][width]
  acc_t* part = xs + c_in * width;                  // [slices][cg * l_out]
  __shared__ acc_t scratch[32];
  const int b = blockIdx.x / groups, g = blockIdx.x - b * groups;
  const int outputs = cg * l_out;
  const scalar_t* xb = x + static_cast<int64_t>(b) * c_in * length;
  for (int i = threadIdx.x; i < c_in * width; i += blockDim.x) {
    const int ci = i / width, l = i - ci * width - pad;
    xs[i] = (l >= 0 && l < length) ? static_cast<acc_t>(xb[ci * length + l]) : acc_t(0);
  }
  __syncthreads();

  const int tiles_l = (l_out + kTileL - 1) / kTileL, tiles = (cg + kTileC - 1) / kTileC * tiles_l;
  const int tile = threadIdx.x % tiles, slice = threadIdx.x / tiles;
  if (slice < slices) {
    const int c0 = tile / tiles_l * kTileC, l0 = (tile % tiles_l) * kTileL;
    const int per_slice = (c_in + slices - 1) / slices;
    const int ci_begin = slice * per_slice, ci_end = min(ci_begin + per_slice, c_in);
    const scalar_t* wrow[kTileC];  // channels past the group's end recompute its last one (discarded)
#pragma unroll
    for (int c = 0; c < kTileC; ++c) wrow[c] = w + static_cast<int64_t>(g * cg + min(c0 + c, cg - 1)) * c_in * kernel;
    acc_t acc[kTileC][kTileL] = {};
    for (int ci = ci_begin; ci < ci_end; ++ci) {
      const acc_t* xr = xs + ci * width + l0;  // largest index read: (tiles_l - 1) * kTileL + kTileL - 1 + K - 1
      for (int k = 0; k < kernel; ++k) {
        acc_t xv[kTileL];
#pragma unroll
        for (int n = 0; n < kTileL; ++n) xv[n] = xr[k + n];
#pragma unroll
        for (int c = 0; c < kTileC; ++c) {
          const acc_t wv = static_cast<acc_t>(wrow[c][ci * kernel + k]);
#pragma unroll
          for (int n = 0; n < kTileL; ++n) acc[c][n] += wv * xv[n];
        }
      }
    }
#pragma unroll
    for (int c = 0; c < kTileC; ++c) {
#pragma unroll
      for (int n = 0; n < kTileL; ++n) {
        if (c0 + c < cg && l0 + n < l_out) part[slice * outputs + (c0 + c) * l_out + l0 + n] = acc[c][n];
      }
    }
  }
  __syncthreads();
  for (int o = threadIdx.x; o < outputs; o += blockDim.x) {  // only this thread touches column o
    acc_t y = bias != nullptr ? static_cast<acc_t>(bias[g * cg + o / l_out]) : acc_t(0);
    for (int s = 0; s < slices; ++s) y += part[s * outputs + o];
    part[o] = y;
  }
  __syncthreads();
  group_norm_mish<acc_t>(part, out + static_cast<int64_t>(blockIdx.x) * outputs, outputs, l_out, gamma + g * cg,
                         beta + g * cg, eps, scratch);
}

template <typename scalar_t>
bool launch_conv_gn_mish(const at::Tensor& out, const at::Tensor& x, const at::Tensor& w, const at::Tensor* bias,
                         const at::Tensor& gamma, const at::Tensor& beta, int64_t groups, int64_t pad, double eps) {
  using acc_t = at::opmath_type<scalar_t>;
  const int64_t batch = x.size(0), c_in = x.size(1), length = x.size(2);
  const int64_t cg = w.size(0) / groups, kernel = w.size(2), l_out = out.size(2);
  if (batch * ((l_out + 15) / 16) > kFusedMaxRows) return false;
  const int64_t tiles_l = (l_out + kTileL - 1) / kTileL, tiles = (cg + kTileC - 1) / kTileC * tiles_l;
  if (tiles > kFusedThreads) return false;
  const int64_t slices = std::min<int64_t>(kFusedThreads / tiles, c_in);
  const int64_t width = tiles_l * kTileL + kernel - 1;
  const int64_t smem = (c_in * width + slices * cg * l_out) * static_cast<int64_t>(sizeof(acc_t));
  static const int smem_limit = [] {  // opt in to all of the device's shared memory, once
    int device = 0, limit = 0;
    C10_CUDA_CHECK(cudaGetDevice(&device));
    C10_CUDA_CHECK(cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    limit -= 32 * static_cast<int>(sizeof(acc_t));  // the static scratch
    C10_CUDA_CHECK(cudaFuncSetAttribute(conv_gn_mish_kernel<scalar_t>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        limit));
    return limit;
  }();
  if (smem > smem_limit) return false;
  conv_gn_mish_kernel<scalar_t><<<batch * groups, kFusedThreads, smem, c10::cuda::getCurrentCUDAStream()>>>(
      x.const_data_ptr<scalar_t>(), w.const_data_ptr<scalar_t>(), bias ? bias->const_data_ptr<scalar_t>() : nullptr,
      gamma.const_data_ptr<scalar_t>(), beta.const_data_ptr<scalar_t>(), out.mutable_data_ptr<scalar_t>(),
      static_cast<int>(c_in), static_cast<int>(length), static_cast<int>(groups), static_cast<int>(cg),
      static_cast<int>(kernel), static_cast<int>(pad), static_cast<int>(l_out), static_cast<int>(width),
      static_cast<int>(slices), eps);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return true;
}

bool conv1d_gn_mish_cuda(const at::Tensor& out, const at::Tensor& x, const at::Tensor& weight, const at::Tensor* bias,
                         const at::Tensor& gn_weight, const at::Tensor& gn_bias, int64_t groups, int64_t pad,
                         double eps) {
  c10::cuda::CUDAGuard guard(out.device());
  bool ran = false;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "conv1d_gn_mish_cuda", [&] {
    ran = launch_conv_gn_mish<scalar_t>(out, x, weight, bias, gn_weight, gn_bias, groups, pad, eps);
  });
  return ran;
}

}  // namespace diffusion
