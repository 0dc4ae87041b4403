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
//   each output channel two warps (halves of the C_in * K reduction) and a tile of 4/8/16
//   positions (a register array sized at compile time): lanes stream the channel's weight row
//   with coalesced 16-byte loads, the zero-padded input window sits in shared memory, warp and
//   shared-memory reductions finish. Thousands of warps with 16-byte loads in flight keep every
//   SM streaming weights. Large batch x length is compute-bound: cuDNN (tensor cores) runs the
//   convolution there. Either way one fused GroupNorm + Mish kernel follows (one block per
//   (batch, group), two-pass statistics from L1/L2, one write): 2 launches and one intermediate
//   against eager's 3 launches and 2 intermediates.
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
  // The cached row covers elements [row_begin, row_end); a division only when leaving it.
  int64_t row_begin = 0, row_end = -1;
  StepCoefs<acc_t> c{};
  for (int64_t v = begin + threadIdx.x; v < end; v += blockDim.x) {
    const int64_t i0 = v * kVec;
    if (i0 < row_begin || i0 >= row_end) {
      const int64_t row = per_row ? i0 / inner : 0;
      row_begin = per_row ? row * inner : 0;
      row_end = per_row ? row_begin + inner : INT64_MAX;
      c = fn.template get<acc_t>(row);
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
  // Exactly one wave of resident blocks, each with an equal contiguous chunk (no tail wave).
  static const int per_sm = [] {
    int count = 0;
    C10_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&count, step_kernel<scalar_t, kVec, CoefFn>,
                                                                 kStepThreads, 0));
    return std::max(count, 1);
  }();
  const int64_t max_blocks = static_cast<int64_t>(jk::multiprocessor_count(out.get_device())) * per_sm;
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
  const at::Tensor sched = schedule.contiguous();
  const DdpmCoefFn fn = ddpm_plan(model_output, t, sample, sched, noise, prediction_type, clip_sample_range);
  c10::cuda::CUDAGuard guard(sample.device());  // after the checks: sample is a CUDA tensor
  const bool host_zero = fn.t.ptr == nullptr && fn.t.value == 0;  // t = 0 known here: nothing to draw
  return step_cuda(model_output, sample, noise, fn, clip_sample, clip_sample_range, !host_zero);
}

at::Tensor ddim_step_cuda(const at::Tensor& model_output, const at::Tensor& t, const at::Tensor& t_prev,
                          const at::Tensor& sample, const at::Tensor& schedule, double eta,
                          const std::optional<at::Tensor>& noise, c10::string_view prediction_type, bool clip_sample,
                          double clip_sample_range, bool set_alpha_to_one, bool use_clipped_model_output) {
  const at::Tensor sched = schedule.contiguous();
  const DdimCoefFn fn = ddim_plan(model_output, t, t_prev, sample, sched, eta, noise, prediction_type,
                                  clip_sample_range, set_alpha_to_one, use_clipped_model_output);
  c10::cuda::CUDAGuard guard(sample.device());
  const std::optional<at::Tensor> used_noise = eta > 0 ? noise : std::nullopt;
  return step_cuda(model_output, sample, used_noise, fn, clip_sample, clip_sample_range, eta > 0);
}

// ---------------------------------------------------------------- conv1d_gn_mish

constexpr int kConvCo = 4;                 // output channels per block
constexpr int kConvSplit = 2;              // warps sharing one output channel's reduction
constexpr int kConvThreads = kConvCo * kConvSplit * 32;
constexpr int kConvSmemBytes = 12 * 1024;  // input window for a chunk of input channels
constexpr int64_t kDirectMaxTiles = 8;     // batch x length tiles beyond which cuDNN wins

// y[b, co, l0 + n] = bias[co] + sum_{ci, k} w[co, ci, k] * x[b, ci, l0 + n + k - pad] (zero outside [0, L)).
// Block (blockIdx.x, blockIdx.y) = (output channels kConvCo * blockIdx.x + [0, kConvCo), (batch, tile of
// kTile positions)). Warp w computes channel w % kConvCo over reduction slice w / kConvCo: the channel's
// weight row (r = ci * K + k, contiguous) is read in interleaved runs of 32 lanes x kVec elements with
// 16-byte loads; each weight meets kTile staged inputs in registers; slices are summed via shared memory.
template <typename scalar_t, int kTile>
__global__ void __launch_bounds__(kConvThreads)
    conv1d_direct_kernel(const scalar_t* __restrict__ x, const scalar_t* __restrict__ w,
                         const scalar_t* __restrict__ bias, at::opmath_type<scalar_t>* __restrict__ y, int64_t c_in,
                         int64_t length, int64_t c_out, int kernel, int64_t pad, int64_t l_out, int64_t tiles,
                         int chunk, bool vec_weights) {
  using acc_t = at::opmath_type<scalar_t>;
  constexpr int kVec = 16 / sizeof(scalar_t);  // weights per 16-byte load
  using V = jk::Vec<scalar_t, kVec>;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  acc_t* xs = reinterpret_cast<acc_t*>(smem_raw);  // [chunk][width], zero-padded input window
  __shared__ acc_t partial[kConvSplit][kConvCo][kTile];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int co_local = warp % kConvCo, split = warp / kConvCo;
  const int64_t co = static_cast<int64_t>(blockIdx.x) * kConvCo + co_local;
  const bool active = co < c_out;  // warp-uniform; inactive warps still stage and sync
  const int64_t b = blockIdx.y / tiles, l0 = (blockIdx.y % tiles) * kTile;
  const int width = kTile + kernel - 1;
  const scalar_t* xb = x + b * c_in * length;
  const scalar_t* wrow = w + (active ? co : 0) * c_in * kernel;
  acc_t acc[kTile];
#pragma unroll
  for (int n = 0; n < kTile; ++n) acc[n] = acc_t(0);

  for (int64_t c0 = 0; c0 < c_in; c0 += chunk) {
    const int cc = static_cast<int>(c_in - c0 < chunk ? c_in - c0 : chunk);
    __syncthreads();  // every warp is done reading the previous chunk
    for (int i = threadIdx.x; i < cc * width; i += blockDim.x) {
      const int ci = i / width, j = i - ci * width;
      const int64_t l = l0 - pad + j;
      xs[i] = (l >= 0 && l < length) ? static_cast<acc_t>(xb[(c0 + ci) * length + l]) : acc_t(0);
    }
    __syncthreads();
    if (!active) continue;
    const scalar_t* wc = wrow + c0 * kernel;  // this chunk's weights; 16-byte aligned when vec_weights
    const int count = cc * kernel;
    int r_done = 0;
    if (vec_weights) {
      const int stride = 32 * kVec * kConvSplit;
      const int dci = stride / kernel, dk = stride % kernel;  // (ci, k) advance of r += stride
      const int count_vec = count / kVec * kVec;
      int r = (split * 32 + lane) * kVec;
      int ci = r / kernel, k = r - (r / kernel) * kernel;
      for (; r < count_vec; r += stride) {
        const V wv = *reinterpret_cast<const V*>(wc + r);
        int cj = ci, kj = k;
#pragma unroll
        for (int j = 0; j < kVec; ++j) {
          const acc_t wj = static_cast<acc_t>(wv.val[j]);
          const acc_t* xr = xs + cj * width + kj;  // largest index read: cc * width - 1
#pragma unroll
          for (int n = 0; n < kTile; ++n) acc[n] += wj * xr[n];
          if (++kj == kernel) {
            kj = 0;
            ++cj;
          }
        }
        ci += dci;
        k += dk;
        if (k >= kernel) {
          k -= kernel;
          ++ci;
        }
      }
      r_done = count_vec;
    }
    // The rest (all of it without aligned weights), one weight per lane.
    for (int r = r_done + split * 32 + lane; r < count; r += 32 * kConvSplit) {
      const int ci = r / kernel, k = r - ci * kernel;
      const acc_t wv = static_cast<acc_t>(wc[r]);
      const acc_t* xr = xs + ci * width + k;
#pragma unroll
      for (int n = 0; n < kTile; ++n) acc[n] += wv * xr[n];
    }
  }
  if (active) {
#pragma unroll
    for (int n = 0; n < kTile; ++n) {
      const acc_t total = jk::warp_sum(acc[n]);
      if (lane == n) partial[split][co_local][n] = total;
    }
  }
  __syncthreads();
  if (active && split == 0 && lane < kTile && l0 + lane < l_out) {
    acc_t sum = bias != nullptr ? static_cast<acc_t>(bias[co]) : acc_t(0);
#pragma unroll
    for (int s = 0; s < kConvSplit; ++s) sum += partial[s][co_local][lane];
    y[(b * c_out + co) * l_out + l0 + lane] = sum;
  }
}

template <int kTile>
int64_t direct_tiles(int64_t l_out) {
  return (l_out + kTile - 1) / kTile;
}

template <typename scalar_t, int kTile>
void launch_conv1d_direct(const at::Tensor& x, const at::Tensor& w, const std::optional<at::Tensor>& bias,
                          const at::Tensor& y, int64_t pad) {
  using acc_t = at::opmath_type<scalar_t>;
  constexpr int kVec = 16 / sizeof(scalar_t);
  const int64_t batch = x.size(0), c_in = x.size(1), length = x.size(2);
  const int64_t c_out = w.size(0), kernel = w.size(2), l_out = y.size(2);
  const int64_t tiles = direct_tiles<kTile>(l_out), width = kTile + kernel - 1;
  const int64_t fit = kConvSmemBytes / (width * static_cast<int64_t>(sizeof(acc_t)));  // >= 1 (host checked)
  int64_t chunk = std::min(c_in, fit);
  bool vec = (c_in * kernel) % kVec == 0 && reinterpret_cast<uintptr_t>(w.const_data_ptr()) % 16 == 0;
  if (vec && chunk < c_in) {  // chunks must start on 16-byte weight boundaries
    chunk = chunk / kVec * kVec;
    if (chunk == 0) {
      vec = false;
      chunk = fit;
    }
  }
  chunk = std::max<int64_t>(chunk, 1);
  const size_t smem = static_cast<size_t>(chunk * width) * sizeof(acc_t);
  const dim3 grid(static_cast<unsigned>((c_out + kConvCo - 1) / kConvCo), static_cast<unsigned>(batch * tiles));
  conv1d_direct_kernel<scalar_t, kTile><<<grid, kConvThreads, smem, c10::cuda::getCurrentCUDAStream()>>>(
      x.const_data_ptr<scalar_t>(), w.const_data_ptr<scalar_t>(),
      bias.has_value() ? bias->const_data_ptr<scalar_t>() : nullptr, y.mutable_data_ptr<acc_t>(), c_in, length,
      c_out, static_cast<int>(kernel), pad, l_out, tiles, static_cast<int>(chunk), vec);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
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
  // Direct kernel when batch x length is small (weight-streaming, launch-bound); cuDNN otherwise.
  const int tile = l_out <= 4 ? 4 : l_out <= 8 ? 8 : 16;
  const int64_t tiles = (l_out + tile - 1) / tile;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "conv1d_gn_mish_cuda", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    const bool direct = batch * tiles <= kDirectMaxTiles &&
                        (tile + kernel - 1) * static_cast<int64_t>(sizeof(acc_t)) <= kConvSmemBytes &&
                        (c_out + kConvCo - 1) / kConvCo < (int64_t{1} << 31);
    if (direct) {
      at::Tensor y = at::empty({batch, c_out, l_out}, x.options().dtype(c10::CppTypeToScalarType<acc_t>::value));
      if (tile == 4) {
        launch_conv1d_direct<scalar_t, 4>(xc, wc, bc, y, pad);
      } else if (tile == 8) {
        launch_conv1d_direct<scalar_t, 8>(xc, wc, bc, y, pad);
      } else {
        launch_conv1d_direct<scalar_t, 16>(xc, wc, bc, y, pad);
      }
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
