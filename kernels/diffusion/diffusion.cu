// Family `diffusion`: CUDA kernels.
//
// Design, against the memory / launch floors:
// - ddpm_step / ddim_step are memory-bound: read model_output and sample once, write the result
//   once; noise (when not given) is drawn in registers by Philox, so it costs no traffic. Each
//   block owns a contiguous chunk of 16-byte vectors, so a thread's batch row rarely changes and
//   the row's coefficients (computed in double from the float64 schedule) stay in registers. The
//   timestep is read on the device: no host sync, a CUDA graph replays every step as captured.
// - conv1d_gn_mish at small batch x length (diffusion policy at batch 1) is bound by launches and
//   by streaming the weights, each used for only a few output positions. A direct kernel gives
//   each warp one output channel and 16 positions: lanes stream the channel's weight row with
//   coalesced loads, the zero-padded input window sits in shared memory, a warp reduction
//   finishes, and thousands of warps keep every SM streaming weights. Large batch x length is
//   compute-bound: cuDNN (tensor cores) runs the convolution. Either way one fused GroupNorm +
//   Mish kernel follows (one block per (batch, group), two-pass statistics, one write): 2
//   launches and one intermediate against eager's 3 launches and 2 intermediates.
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/ops/conv1d.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "diffusion.h"
#include "elementwise.cuh"
#include "jk.h"
#include "philox_cuda.cuh"
#include "reduce.cuh"

namespace diffusion {

// diffusion.cpp: argument checks shared with the CPU kernels.
DdpmCoefFn ddpm_plan(const at::Tensor& model_output, const at::Tensor& t, const at::Tensor& sample,
                     const at::Tensor& schedule, const std::optional<at::Tensor>& noise,
                     c10::string_view prediction_type, double clip_sample_range);
DdimCoefFn ddim_plan(const at::Tensor& model_output, const at::Tensor& t, const at::Tensor& t_prev,
                     const at::Tensor& sample, const at::Tensor& schedule, double eta,
                     const std::optional<at::Tensor>& noise, c10::string_view prediction_type,
                     double clip_sample_range, bool set_alpha_to_one, bool use_clipped_model_output);
int64_t check_conv_args(const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                        const at::Tensor& gn_weight, const at::Tensor& gn_bias, int64_t num_groups,
                        std::optional<int64_t> padding, double eps);

// ---------------------------------------------------------------- scheduler steps

constexpr int kStepThreads = 256;

// Normals for elements i0 .. i0 + kVec - 1: element i uses lane i % 4 of Philox block i / 4 (as on the CPU).
template <int kVec, typename acc_t>
__device__ __forceinline__ void fill_normals(acc_t (&z)[kVec], uint64_t seed, uint64_t base, int64_t i0) {
  if constexpr (kVec % 4 == 0) {  // i0 is a multiple of 4
#pragma unroll
    for (int q = 0; q < kVec / 4; ++q) {
      const jk::Float4 f = jk::normal4(seed, base + static_cast<uint64_t>(i0) / 4 + q);
      z[4 * q] = f.x;
      z[4 * q + 1] = f.y;
      z[4 * q + 2] = f.z;
      z[4 * q + 3] = f.w;
    }
  } else {
    uint64_t have = UINT64_MAX;
    jk::Float4 f{0, 0, 0, 0};
#pragma unroll
    for (int j = 0; j < kVec; ++j) {
      const uint64_t e = static_cast<uint64_t>(i0) + j, q = e / 4;
      if (q != have) {
        f = jk::normal4(seed, base + q);
        have = q;
      }
      const int lane = static_cast<int>(e & 3);
      z[j] = lane == 0 ? f.x : lane == 1 ? f.y : lane == 2 ? f.z : f.w;
    }
  }
}

// kVec elements per thread per iteration; the host guarantees a vector never straddles two rows.
template <typename scalar_t, int kVec, typename CoefFn>
__global__ void __launch_bounds__(kStepThreads)
    step_kernel(scalar_t* __restrict__ out, const scalar_t* __restrict__ m, const scalar_t* __restrict__ x,
                const scalar_t* __restrict__ noise, int64_t n_vec, int64_t inner, int64_t chunk, CoefFn fn, bool clip,
                double range, bool draw, at::PhiloxCudaState philox) {
  using acc_t = at::opmath_type<scalar_t>;
  using V = jk::Vec<scalar_t, kVec>;
  const int64_t begin = static_cast<int64_t>(blockIdx.x) * chunk;
  const int64_t end = begin + chunk < n_vec ? begin + chunk : n_vec;
  uint64_t seed = 0, base = 0;
  if (draw) {
    const jk::PhiloxSeed s = jk::unpack_philox(philox);
    seed = s.seed;
    base = s.offset / 4;
  }
  const bool per_row = fn.per_row();
  const acc_t r = static_cast<acc_t>(range);
  int64_t row = -1;
  StepCoefs<acc_t> c{};
  for (int64_t v = begin + threadIdx.x; v < end; v += blockDim.x) {
    const int64_t i0 = v * kVec;
    const int64_t ri = per_row ? i0 / inner : 0;
    if (ri != row) {
      row = ri;
      c = fn.template get<acc_t>(ri);
    }
    const V mv = reinterpret_cast<const V*>(m)[v];
    const V xv = reinterpret_cast<const V*>(x)[v];
    acc_t z[kVec];
    if (noise != nullptr) {
      const V nv = reinterpret_cast<const V*>(noise)[v];
#pragma unroll
      for (int j = 0; j < kVec; ++j) z[j] = static_cast<acc_t>(nv.val[j]);
    } else if (draw) {
      fill_normals<kVec>(z, seed, base, i0);
    } else {
#pragma unroll
      for (int j = 0; j < kVec; ++j) z[j] = acc_t(0);
    }
    V o;
#pragma unroll
    for (int j = 0; j < kVec; ++j) {
      o.val[j] = static_cast<scalar_t>(
          step_element(c, static_cast<acc_t>(mv.val[j]), static_cast<acc_t>(xv.val[j]), z[j], clip, r));
    }
    reinterpret_cast<V*>(out)[v] = o;
  }
}

template <typename scalar_t, int kVec, typename CoefFn>
void launch_step(const at::Tensor& out, const at::Tensor& m, const at::Tensor& x, const at::Tensor* noise,
                 const CoefFn& fn, bool clip, double range, bool draw, const at::PhiloxCudaState& philox) {
  const int64_t n = out.numel(), n_vec = n / kVec, inner = n / x.size(0);
  const int64_t max_blocks = static_cast<int64_t>(jk::multiprocessor_count(out.get_device())) * (2048 / kStepThreads);
  int64_t blocks = std::min((n_vec + kStepThreads - 1) / kStepThreads, max_blocks);
  const int64_t chunk = (n_vec + blocks - 1) / blocks;
  blocks = (n_vec + chunk - 1) / chunk;
  step_kernel<scalar_t, kVec><<<blocks, kStepThreads, 0, c10::cuda::getCurrentCUDAStream()>>>(
      out.mutable_data_ptr<scalar_t>(), m.const_data_ptr<scalar_t>(), x.const_data_ptr<scalar_t>(),
      noise ? noise->const_data_ptr<scalar_t>() : nullptr, n_vec, inner, chunk, fn, clip, range, draw, philox);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

template <typename CoefFn>
at::Tensor step_cuda(const at::Tensor& model_output, const at::Tensor& sample, const std::optional<at::Tensor>& noise,
                     const CoefFn& fn, bool clip, double range, bool draw) {
  at::Tensor out = at::empty(sample.sizes(), sample.options());
  if (out.numel() == 0) return out;
  const at::Tensor m = model_output.contiguous(), x = sample.contiguous();
  const at::Tensor z = noise.has_value() ? noise->contiguous() : at::Tensor();
  const at::Tensor* zp = noise.has_value() ? &z : nullptr;
  draw = draw && zp == nullptr;
  // Reserve one draw per element, so consecutive calls (and graph replays) never reuse numbers.
  const at::PhiloxCudaState philox = draw ? jk::cuda_philox_state(out.numel()) : at::PhiloxCudaState();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, sample.scalar_type(), "diffusion_step_cuda", [&] {
    constexpr int kVec = 16 / sizeof(scalar_t);
    auto aligned = [](const at::Tensor& t) { return reinterpret_cast<uintptr_t>(t.const_data_ptr()) % 16 == 0; };
    const bool vec = out.numel() / sample.size(0) % kVec == 0 && aligned(out) && aligned(m) && aligned(x) &&
                     (zp == nullptr || aligned(z));
    if (vec) {
      launch_step<scalar_t, kVec>(out, m, x, zp, fn, clip, range, draw, philox);
    } else {
      launch_step<scalar_t, 1>(out, m, x, zp, fn, clip, range, draw, philox);
    }
  });
  return out;
}

at::Tensor ddpm_step_cuda(const at::Tensor& model_output, const at::Tensor& t, const at::Tensor& sample,
                          const at::Tensor& schedule, const std::optional<at::Tensor>& noise,
                          c10::string_view prediction_type, bool clip_sample, double clip_sample_range) {
  c10::cuda::CUDAGuard guard(sample.device());
  const at::Tensor sched = schedule.contiguous();
  const DdpmCoefFn fn = ddpm_plan(model_output, t, sample, sched, noise, prediction_type, clip_sample_range);
  const bool host_zero = fn.t.ptr == nullptr && fn.t.value == 0;  // t = 0 known here: nothing to draw
  return step_cuda(model_output, sample, noise, fn, clip_sample, clip_sample_range, !host_zero);
}

at::Tensor ddim_step_cuda(const at::Tensor& model_output, const at::Tensor& t, const at::Tensor& t_prev,
                          const at::Tensor& sample, const at::Tensor& schedule, double eta,
                          const std::optional<at::Tensor>& noise, c10::string_view prediction_type, bool clip_sample,
                          double clip_sample_range, bool set_alpha_to_one, bool use_clipped_model_output) {
  c10::cuda::CUDAGuard guard(sample.device());
  const at::Tensor sched = schedule.contiguous();
  const DdimCoefFn fn = ddim_plan(model_output, t, t_prev, sample, sched, eta, noise, prediction_type,
                                  clip_sample_range, set_alpha_to_one, use_clipped_model_output);
  const std::optional<at::Tensor> used_noise = eta > 0 ? noise : std::nullopt;
  return step_cuda(model_output, sample, used_noise, fn, clip_sample, clip_sample_range, eta > 0);
}

// ---------------------------------------------------------------- conv1d_gn_mish

constexpr int kConvTile = 16;              // output positions per warp: a compile-time register array
constexpr int kConvWarps = 4;              // output channels per block, one per warp
constexpr int kConvSmemBytes = 12 * 1024;  // input window per chunk of input channels
constexpr int64_t kDirectMaxTiles = 8;     // batch x length tiles beyond which cuDNN wins

// y[b, co, l0 + n] = bias[co] + sum_{ci, k} w[co, ci, k] * x[b, ci, l0 + n + k - pad] (zero outside [0, L)).
// Block (blockIdx.x, blockIdx.y) = (output channels 4 blockIdx.x .. +3, (batch, tile of 16 positions)).
template <typename scalar_t>
__global__ void __launch_bounds__(kConvWarps * 32)
    conv1d_direct_kernel(const scalar_t* __restrict__ x, const scalar_t* __restrict__ w,
                         const scalar_t* __restrict__ bias, at::opmath_type<scalar_t>* __restrict__ y, int64_t c_in,
                         int64_t length, int64_t c_out, int kernel, int64_t pad, int64_t l_out, int64_t tiles,
                         int chunk) {
  using acc_t = at::opmath_type<scalar_t>;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  acc_t* xs = reinterpret_cast<acc_t*>(smem_raw);  // [chunk][width]
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t co = static_cast<int64_t>(blockIdx.x) * kConvWarps + warp;
  const bool active = co < c_out;  // warp-uniform; inactive warps still stage and sync
  const int64_t b = blockIdx.y / tiles, l0 = (blockIdx.y % tiles) * kConvTile;
  const int width = kConvTile + kernel - 1;
  const scalar_t* xb = x + b * c_in * length;
  const scalar_t* wrow = w + (active ? co : 0) * c_in * kernel;
  const int step_ci = 32 / kernel, step_k = 32 % kernel;  // (ci, k) advance of r += 32
  acc_t acc[kConvTile];
#pragma unroll
  for (int n = 0; n < kConvTile; ++n) acc[n] = acc_t(0);

  for (int64_t c0 = 0; c0 < c_in; c0 += chunk) {
    const int cc = static_cast<int>(c_in - c0 < chunk ? c_in - c0 : chunk);
    __syncthreads();  // every warp is done reading the previous chunk
    for (int i = threadIdx.x; i < cc * width; i += blockDim.x) {
      const int ci = i / width, j = i - ci * width;
      const int64_t l = l0 - pad + j;
      xs[i] = (l >= 0 && l < length) ? static_cast<acc_t>(xb[(c0 + ci) * length + l]) : acc_t(0);
    }
    __syncthreads();
    if (active) {
      const scalar_t* wc = wrow + c0 * kernel;  // this chunk's weights: contiguous, r = ci * K + k
      const int count = cc * kernel;
      int ci = lane / kernel, k = lane - (lane / kernel) * kernel;
      for (int r = lane; r < count; r += 32) {
        const acc_t wv = static_cast<acc_t>(wc[r]);
        const acc_t* xr = xs + ci * width + k;  // largest index read: cc * width - 1
#pragma unroll
        for (int n = 0; n < kConvTile; ++n) acc[n] += wv * xr[n];
        ci += step_ci;
        k += step_k;
        if (k >= kernel) {
          k -= kernel;
          ++ci;
        }
      }
    }
  }
  if (active) {
#pragma unroll
    for (int n = 0; n < kConvTile; ++n) acc[n] = jk::warp_sum(acc[n]);
    const acc_t bv = bias != nullptr ? static_cast<acc_t>(bias[co]) : acc_t(0);
    acc_t* yrow = y + (b * c_out + co) * l_out;
#pragma unroll
    for (int n = 0; n < kConvTile; ++n) {
      if (lane == n && l0 + n < l_out) yrow[l0 + n] = acc[n] + bv;
    }
  }
}

// out = Mish(GroupNorm(y)); y (B, C, L) contiguous; one block per (batch, group), whose C/G * L values
// are contiguous. kSmall: the group has < 2^31 values, so 32-bit division finds the channel.
template <typename in_t, typename out_t, bool kSmall>
__global__ void gn_mish_kernel(const in_t* __restrict__ y, const out_t* __restrict__ gamma,
                               const out_t* __restrict__ beta, out_t* __restrict__ out, int64_t groups, int64_t cg,
                               int64_t length, double eps) {
  using acc_t = at::opmath_type<out_t>;
  __shared__ acc_t scratch[32];
  const int64_t bg = blockIdx.x, n = cg * length;
  const in_t* src = y + bg * n;
  out_t* dst = out + bg * n;
  acc_t sum = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) sum += static_cast<acc_t>(src[i]);
  const acc_t mean = jk::block_sum(sum, scratch) / static_cast<acc_t>(n);
  acc_t sq = 0;  // second pass (from L1/L2): no cancellation when |mean| >> std
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const acc_t d = static_cast<acc_t>(src[i]) - mean;
    sq += d * d;
  }
  const acc_t var = jk::block_sum(sq, scratch) / static_cast<acc_t>(n);
  const acc_t rstd = acc_t(1) / ::sqrt(var + static_cast<acc_t>(eps));
  const int64_t ch0 = (bg % groups) * cg;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const int64_t c = kSmall ? static_cast<int64_t>(static_cast<uint32_t>(i) / static_cast<uint32_t>(length))
                             : i / length;
    const acc_t h = (static_cast<acc_t>(src[i]) - mean) * rstd * static_cast<acc_t>(gamma[ch0 + c]) +
                    static_cast<acc_t>(beta[ch0 + c]);
    dst[i] = static_cast<out_t>(mish(h));
  }
}

template <typename in_t, typename out_t>
void launch_gn_mish(const at::Tensor& y, const at::Tensor& gamma, const at::Tensor& beta, const at::Tensor& out,
                    int64_t groups, double eps) {
  const int64_t batch = y.size(0), cg = y.size(1) / groups, length = y.size(2), n = cg * length;
  TORCH_CHECK_VALUE(batch * groups < (int64_t{1} << 31), "x.size(0) * num_groups must be < 2^31, got ",
                    batch * groups);
  const int threads = static_cast<int>(std::min<int64_t>(512, std::max<int64_t>(32, (n + 31) / 32 * 32)));
  auto stream = c10::cuda::getCurrentCUDAStream();
  auto kernel = n < (int64_t{1} << 31) ? gn_mish_kernel<in_t, out_t, true> : gn_mish_kernel<in_t, out_t, false>;
  kernel<<<batch * groups, threads, 0, stream>>>(y.const_data_ptr<in_t>(), gamma.const_data_ptr<out_t>(),
                                                 beta.const_data_ptr<out_t>(), out.mutable_data_ptr<out_t>(), groups,
                                                 cg, length, eps);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

at::Tensor conv1d_gn_mish_cuda(const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                               const at::Tensor& gn_weight, const at::Tensor& gn_bias, int64_t num_groups,
                               std::optional<int64_t> padding, double eps) {
  const int64_t pad = check_conv_args(x, weight, bias, gn_weight, gn_bias, num_groups, padding, eps);
  c10::cuda::CUDAGuard guard(x.device());
  const int64_t batch = x.size(0), c_in = x.size(1), length = x.size(2);
  const int64_t c_out = weight.size(0), kernel = weight.size(2), l_out = length + 2 * pad - kernel + 1;
  at::Tensor out = at::empty({batch, c_out, l_out}, x.options());
  if (out.numel() == 0) return out;
  const at::Tensor xc = x.contiguous(), wc = weight.contiguous();
  const at::Tensor gamma = gn_weight.contiguous(), beta = gn_bias.contiguous();
  const std::optional<at::Tensor> bc = bias.has_value() ? std::optional<at::Tensor>(bias->contiguous()) : std::nullopt;
  const int64_t tiles = (l_out + kConvTile - 1) / kConvTile;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "conv1d_gn_mish_cuda", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    const int64_t width = kConvTile + kernel - 1;
    const bool direct = batch * tiles <= kDirectMaxTiles && width * static_cast<int64_t>(sizeof(acc_t)) <= kConvSmemBytes &&
                        (c_out + kConvWarps - 1) / kConvWarps < (int64_t{1} << 31);
    if (direct) {
      at::Tensor y = at::empty({batch, c_out, l_out}, x.options().dtype(c10::CppTypeToScalarType<acc_t>::value));
      const int chunk = static_cast<int>(std::min<int64_t>(c_in, kConvSmemBytes / (width * sizeof(acc_t))));
      const size_t smem = static_cast<size_t>(std::max(chunk, 1)) * width * sizeof(acc_t);
      const dim3 grid(static_cast<unsigned>((c_out + kConvWarps - 1) / kConvWarps), static_cast<unsigned>(batch * tiles));
      conv1d_direct_kernel<scalar_t><<<grid, kConvWarps * 32, smem, c10::cuda::getCurrentCUDAStream()>>>(
          xc.const_data_ptr<scalar_t>(), wc.const_data_ptr<scalar_t>(),
          bc.has_value() ? bc->const_data_ptr<scalar_t>() : nullptr, y.mutable_data_ptr<acc_t>(), c_in, length, c_out,
          static_cast<int>(kernel), pad, l_out, tiles, std::max(chunk, 1));
      C10_CUDA_KERNEL_LAUNCH_CHECK();
      launch_gn_mish<acc_t, scalar_t>(y, gamma, beta, out, num_groups, eps);
    } else {
      const at::Tensor y = at::conv1d(xc, wc, bc, 1, pad).contiguous();
      launch_gn_mish<scalar_t, scalar_t>(y, gamma, beta, out, num_groups, eps);
    }
  });
  return out;
}

JK_LIBRARY_IMPL(CUDA, m) {
  m.impl("ddpm_step", &ddpm_step_cuda);
  m.impl("ddim_step", &ddim_step_cuda);
  m.impl("conv1d_gn_mish", &conv1d_gn_mish_cuda);
}

}  // namespace diffusion
