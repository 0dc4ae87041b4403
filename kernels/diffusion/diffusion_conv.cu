// Family `diffusion`: the convolution's and GroupNorm + Mish's CUDA kernels and launchers (declared in
// diffusion.h); the scheduler steps' are in diffusion.cu.
//
// Design, against the launch and latency floors:
// - conv1d_gn_mish at small batch x length (diffusion policy at batch 1) is bound by launches and by
//   latency: each weight is used for only a few output positions. A direct kernel (kernel sizes up to 7)
//   spreads the C_in reduction of each output channel over 1-8 warps whose lanes own input channels:
//   a lane holds its channel's K weights and the zero-padded input window (staged once per block in
//   shared memory) in registers and does K * tile FMAs per channel; a transposing warp reduction and
//   shared memory finish. Blocks hold 1-8 output channels, chosen so the grid covers the SMs. With one
//   tile per row, GroupNorm + Mish run in the same launch: a group's blocks (at most 16) form a
//   thread-block cluster (sm_90) that combines per-block statistics through distributed shared memory.
//   Otherwise a GroupNorm + Mish kernel follows (a block per (batch, group), holding groups of up to 1024
//   values in registers). Large batch x length is compute-bound: cuDNN (tensor cores)
//   convolves there without the bias (diffusion.cpp), then the GroupNorm + Mish kernel adds it as it
//   reads. (A one-launch version with one block per (batch, group) measured slower on an H200: only
//   B * G blocks shared the weight streaming.)

#include <cooperative_groups.h>

#include <algorithm>
#include <type_traits>

#include "cuda_launch.cuh"
#include "diffusion.h"
#include "env_flag.h"
#include "opmath.h"
#include "reduce.cuh"

namespace diffusion {

// ---------------------------------------------------------------- GroupNorm + Mish

// Mish in the GPU kernels: float (and the half types) with one exponential (diffusion.h), double as torch.
__device__ __forceinline__ float mish_one_exp(float h) { return mish_given_exp(h, ::expf(h < 20.0f ? h : 20.0f)); }
__device__ __forceinline__ double mish_one_exp(double h) { return mish(h); }

// The mean and 1/std of a group of n values read through value(i) (from memory: twice each), as
// group_statistics does for one held in registers. Call from every thread of the block.
template <typename acc_t, typename Value>
__device__ __forceinline__ void streamed_group_statistics(int64_t n, const Value& value, double eps, acc_t* scratch,
                                                          acc_t& mean, acc_t& rstd) {
  acc_t sum = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) sum += value(i);
  mean = jk::block_sum(sum, scratch) / static_cast<acc_t>(n);
  acc_t sq = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const acc_t d = value(i) - mean;
    sq += d * d;
  }
  rstd = acc_t(1) / ::sqrt(jk::block_sum(sq, scratch) / static_cast<acc_t>(n) + static_cast<acc_t>(eps));
}

// dst = Mish(GroupNorm(src + bias)) for one group's n = channels * length contiguous values; bias (may
// be null), gamma and beta point at the group's first channel. Two-pass statistics: no cancellation
// when |mean| >> std. Call from every thread of the block.
template <typename acc_t, typename in_t, typename out_t>
__device__ void group_norm_mish(const in_t* src, out_t* __restrict__ dst, int64_t n, int64_t length,
                                const out_t* __restrict__ bias, const out_t* __restrict__ gamma,
                                const out_t* __restrict__ beta, double eps, acc_t* scratch) {
  const bool small = n < (int64_t{1} << 31);  // 32-bit division finds the channel
  const auto channel = [&](int64_t i) {
    return small ? static_cast<int64_t>(static_cast<uint32_t>(i) / static_cast<uint32_t>(length)) : i / length;
  };
  const auto value = [&](int64_t i) {
    return static_cast<acc_t>(src[i]) + (bias ? static_cast<acc_t>(bias[channel(i)]) : acc_t(0));
  };
  acc_t mean, rstd;
  streamed_group_statistics(n, value, eps, scratch, mean, rstd);
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const int64_t c = channel(i);
    const acc_t h = (value(i) - mean) * rstd * static_cast<acc_t>(gamma[c]) + static_cast<acc_t>(beta[c]);
    dst[i] = static_cast<out_t>(mish_one_exp(h));
  }
}

// The mean and 1/std of a group of n values held in registers, v[k] at k * blockDim.x + threadIdx.x (zero past
// n): two block sums, so no cancellation when |mean| >> std. Call from every thread of the block.
template <int kPerThread, typename acc_t>
__device__ __forceinline__ void group_statistics(const acc_t (&v)[kPerThread], int n, double eps, acc_t* scratch,
                                                 acc_t& mean, acc_t& rstd) {
  acc_t sum = 0;
#pragma unroll
  for (int k = 0; k < kPerThread; ++k) sum += v[k];
  mean = jk::block_sum(sum, scratch) / static_cast<acc_t>(n);
  acc_t sq = 0;
#pragma unroll
  for (int k = 0; k < kPerThread; ++k) {
    const acc_t d = k * blockDim.x + threadIdx.x < n ? v[k] - mean : acc_t(0);
    sq += d * d;
  }
  rstd = acc_t(1) / ::sqrt(jk::block_sum(sq, scratch) / static_cast<acc_t>(n) + static_cast<acc_t>(eps));
}

// y (B, C, L) contiguous; one block per (batch, group), whose C/G * L values are contiguous. Groups of
// up to kGnThreads * kPerThread values stay in registers: y is read once and the statistics are two
// block reductions. (A warp per group measured 23 µs for B = 256, 512 channels, L = 16 on an H100:
// 2048 warps were too few to hide the latency; reading y three times from a block, 18 µs.)
constexpr int kGnThreads = 128;
template <typename scalar_t, typename in_t, int kPerThread>
__global__ void __launch_bounds__(kGnThreads) gn_mish_kernel(
    const in_t* __restrict__ y, const scalar_t* __restrict__ bias, const scalar_t* __restrict__ gamma,
    const scalar_t* __restrict__ beta, scalar_t* __restrict__ out, int groups, int cg, int length,
    float inv_length, double eps) {
  using acc_t = jk::opmath_t<scalar_t>;
  __shared__ acc_t scratch[32];
  const int64_t bg = blockIdx.x;
  const int n = cg * length, ch0 = static_cast<int>(bg % groups) * cg;
  const in_t* src = y + bg * n;
  acc_t v[kPerThread];
  int channel[kPerThread];
#pragma unroll
  for (int k = 0; k < kPerThread; ++k) {  // every load issued before any use
    const int i = k * blockDim.x + threadIdx.x;
    v[k] = i < n ? static_cast<acc_t>(src[i]) : acc_t(0);
    // i / length without an integer division (about 20 instructions, twice per value, were a third of
    // the kernel's): (i + 0.5) / length lies at least 0.5 / length from an integer, and float's error
    // here is under i * 2^-23 / length, so truncation is exact while n < 2^22 (here n <= 1024).
    channel[k] = ch0 + static_cast<int>((static_cast<float>(i) + 0.5f) * inv_length);
  }
  if (bias) {
#pragma unroll
    for (int k = 0; k < kPerThread; ++k) {
      if (k * blockDim.x + threadIdx.x < n) v[k] += static_cast<acc_t>(bias[channel[k]]);  // zero past n
    }
  }
  acc_t mean, rstd;
  group_statistics(v, n, eps, scratch, mean, rstd);
#pragma unroll
  for (int k = 0; k < kPerThread; ++k) {
    const int i = k * blockDim.x + threadIdx.x;
    if (i < n) {
      const int c = channel[k];
      const acc_t h = (v[k] - mean) * rstd * static_cast<acc_t>(gamma[c]) + static_cast<acc_t>(beta[c]);
      out[bg * n + i] = static_cast<scalar_t>(mish_one_exp(h));
    }
  }
}

// The same for groups too large for registers: each value is read three times (sum, squares, output).
template <typename scalar_t, typename in_t>
__global__ void gn_mish_streaming_kernel(const in_t* __restrict__ y, const scalar_t* __restrict__ bias,
                                         const scalar_t* __restrict__ gamma, const scalar_t* __restrict__ beta,
                                         scalar_t* __restrict__ out, int64_t groups, int64_t cg, int64_t length,
                                         double eps) {
  using acc_t = jk::opmath_t<scalar_t>;
  __shared__ acc_t scratch[32];
  const int64_t bg = blockIdx.x, n = cg * length, ch0 = (bg % groups) * cg;
  group_norm_mish<acc_t>(y + bg * n, out + bg * n, n, length, bias ? bias + ch0 : nullptr, gamma + ch0, beta + ch0,
                         eps, scratch);
}

// Calls launch(per_thread, threads) with the fewest values per thread (1, 2, 4 or 8, an integral_constant) that hold
// a group of n values in at most kGnThreads threads, and those threads; returns false, launching nothing, when the
// group needs more (the streaming kernels take it).
template <typename F>
bool launch_group_in_registers(int64_t n, F&& launch) {
  const auto with = [&](auto per_thread) {
    constexpr int kPerThread = decltype(per_thread)::value;
    const int64_t threads = std::min<int64_t>(kGnThreads, (n + kPerThread - 1) / kPerThread + 31) / 32 * 32;
    launch(per_thread, static_cast<int>(threads));
    return true;
  };
  if (n <= kGnThreads) return with(std::integral_constant<int, 1>{});
  if (n <= 2 * kGnThreads) return with(std::integral_constant<int, 2>{});
  if (n <= 4 * kGnThreads) return with(std::integral_constant<int, 4>{});
  if (n <= 8 * kGnThreads) return with(std::integral_constant<int, 8>{});
  return false;
}

template <typename scalar_t, typename in_t>
void launch_gn_mish(jk::CudaLaunch& launch, const jk::CudaTensor& out, const in_t* y, const jk::CudaTensor& bias,
                    const jk::CudaTensor& gn_weight, const jk::CudaTensor& gn_bias, int64_t groups, double eps) {
  const int64_t batch_groups = out.size(0) * groups, cg = out.size(1) / groups, length = out.size(2), n = cg * length;
  const scalar_t* bias_data = bias.const_data_ptr<scalar_t>();  // null without a bias
  const scalar_t* gamma = gn_weight.const_data_ptr<scalar_t>();
  const scalar_t* beta = gn_bias.const_data_ptr<scalar_t>();
  scalar_t* dst = out.mutable_data_ptr<scalar_t>();
  const cudaStream_t stream = launch.stream;
  const bool in_registers = launch_group_in_registers(n, [&](auto per_thread, int threads) {
    gn_mish_kernel<scalar_t, in_t, decltype(per_thread)::value><<<batch_groups, threads, 0, stream>>>(
        y, bias_data, gamma, beta, dst, static_cast<int>(groups), static_cast<int>(cg), static_cast<int>(length),
        1.0f / static_cast<float>(length), eps);
  });
  if (!in_registers) {
    const int threads = static_cast<int>(std::min<int64_t>(512, (n + 31) / 32 * 32));
    gn_mish_streaming_kernel<scalar_t><<<batch_groups, threads, 0, stream>>>(y, bias_data, gamma, beta, dst, groups,
                                                                             cg, length, eps);
  }
  JK_CUDA_LAUNCH_CHECK(launch);
}

void gn_mish_cuda(jk::CudaLaunch& launch, const jk::CudaTensor& out, const jk::CudaTensor& y,
                  const jk::CudaTensor& bias, const jk::CudaTensor& gn_weight, const jk::CudaTensor& gn_bias,
                  int64_t groups, double eps) {
  jk::dispatch_float(out.scalar_type(), [&](auto zero) {
    using scalar_t = decltype(zero);
    using acc_t = jk::opmath_t<scalar_t>;
    if (y.scalar_type() == out.scalar_type()) {
      launch_gn_mish<scalar_t>(launch, out, y.const_data_ptr<scalar_t>(), bias, gn_weight, gn_bias, groups, eps);
    } else {  // y in the accumulation type (the direct convolution's output)
      launch_gn_mish<scalar_t>(launch, out, y.const_data_ptr<acc_t>(), bias, gn_weight, gn_bias, groups, eps);
    }
  });
}

// ---------------------------------------------------------------- GroupNorm + Mish backward

__device__ __forceinline__ float mish_derivative_one_exp(float h) {
  return mish_derivative_given_exp(h, ::expf(h < mish_derivative_clamp<float>() ? h : mish_derivative_clamp<float>()));
}
__device__ __forceinline__ double mish_derivative_one_exp(double h) { return mish_derivative(h); }

// Writes the group's per-channel sums of dh * zn, dh and grad_z (gn_weight's, gn_bias's and a convolution
// bias's gradients, one batch row's share) from shared memory to partials (3, C, B). In a fixed order, so
// the results do not change from run to run: a thread per channel for short rows, else a warp. `sums` holds
// three arrays of m values, channel c's position l at c * stride + l: an odd stride keeps a thread per
// channel off each other's banks (a stride of 16 had 16 threads on one bank).
template <typename acc_t>
__device__ void store_channel_sums(const acc_t* sums, int64_t m, int64_t stride, int64_t cg, int64_t length,
                                   int64_t channels, int64_t batch, int64_t ch0, int64_t b,
                                   acc_t* __restrict__ partials) {
  const auto store = [&](int64_t c, acc_t w, acc_t bias, acc_t dz) {
    partials[partial_at(0, ch0 + c, b, channels, batch)] = w;
    partials[partial_at(1, ch0 + c, b, channels, batch)] = bias;
    partials[partial_at(2, ch0 + c, b, channels, batch)] = dz;
  };
  if (length <= 32) {
    for (int64_t c = threadIdx.x; c < cg; c += blockDim.x) {
      acc_t w = 0, bias = 0, dz = 0;
      for (int64_t i = c * stride; i < c * stride + length; ++i) {
        w += sums[i];
        bias += sums[m + i];
        dz += sums[2 * m + i];
      }
      store(c, w, bias, dz);
    }
    return;
  }
  const int lane = threadIdx.x % 32;
  for (int64_t c = threadIdx.x / 32; c < cg; c += blockDim.x / 32) {
    acc_t w = 0, bias = 0, dz = 0;
    for (int64_t i = c * stride + lane; i < c * stride + length; i += 32) {
      w += sums[i];
      bias += sums[m + i];
      dz += sums[2 * m + i];
    }
    w = jk::warp_sum(w);
    bias = jk::warp_sum(bias);
    dz = jk::warp_sum(dz);
    if (lane == 0) store(c, w, bias, dz);
  }
}

// One block per (batch, group) as gn_mish_kernel, the group's z and grad in registers (groups of up to
// kGnThreads * kPerThread values): four block sums (the statistics, then those of dzn = dh * gamma and
// dzn * zn), grad_z, and the per-element terms of the channel sums in shared memory (3 rows of
// cg * (length | 1) values). (torch's GroupNorm backward kernel ComputeInternalGradients alone took 80 us at
// B = 256, 512 channels, L = 16, bfloat16, on an H200: session 53's profile; a first version of this kernel,
// a warp per channel and Mish' computed twice, took 58-64 us.)
template <typename scalar_t, int kPerThread>
__global__ void __launch_bounds__(kGnThreads) gn_mish_backward_kernel(
    const scalar_t* __restrict__ grad, const scalar_t* __restrict__ z, const scalar_t* __restrict__ gamma,
    const scalar_t* __restrict__ beta, scalar_t* __restrict__ grad_z, jk::opmath_t<scalar_t>* __restrict__ partials,
    int groups, int cg, int length, float inv_length, int64_t batch, double eps) {
  using acc_t = jk::opmath_t<scalar_t>;
  __shared__ acc_t scratch[32];
  extern __shared__ __align__(16) unsigned char shared_bytes[];
  acc_t* sums = reinterpret_cast<acc_t*>(shared_bytes);  // dh * zn, dh, grad_z (store_channel_sums' layout)
  const int64_t bg = blockIdx.x;
  const int n = cg * length, ch0 = static_cast<int>(bg % groups) * cg, stride = length | 1, m = cg * stride;
  acc_t v[kPerThread], g[kPerThread];
  int channel[kPerThread];
#pragma unroll
  for (int k = 0; k < kPerThread; ++k) {  // every load issued before any use
    const int i = k * blockDim.x + threadIdx.x;
    v[k] = i < n ? static_cast<acc_t>(z[bg * n + i]) : acc_t(0);
    g[k] = i < n ? static_cast<acc_t>(grad[bg * n + i]) : acc_t(0);
    channel[k] = ch0 + static_cast<int>((static_cast<float>(i) + 0.5f) * inv_length);  // gn_mish_kernel's
  }
  acc_t mean, rstd;
  group_statistics(v, n, eps, scratch, mean, rstd);
  acc_t dzn_sum = 0, dzn_zn_sum = 0;
#pragma unroll
  for (int k = 0; k < kPerThread; ++k) {  // v becomes zn, g becomes dzn
    const int i = k * blockDim.x + threadIdx.x;
    if (i < n) {
      const acc_t zn = (v[k] - mean) * rstd, scale = static_cast<acc_t>(gamma[channel[k]]);
      const acc_t dh = g[k] * mish_derivative_one_exp(zn * scale + static_cast<acc_t>(beta[channel[k]]));
      const int at = i + (channel[k] - ch0) * (stride - length);  // channel c's position l: c * stride + l
      sums[at] = dh * zn;
      sums[m + at] = dh;
      v[k] = zn;
      g[k] = dh * scale;
      dzn_sum += g[k];
      dzn_zn_sum += g[k] * zn;
    }
  }
  const acc_t dzn_mean = jk::block_sum(dzn_sum, scratch) / static_cast<acc_t>(n);
  const acc_t dzn_zn_mean = jk::block_sum(dzn_zn_sum, scratch) / static_cast<acc_t>(n);
#pragma unroll
  for (int k = 0; k < kPerThread; ++k) {
    const int i = k * blockDim.x + threadIdx.x;
    if (i < n) {
      const acc_t dz = rstd * (g[k] - dzn_mean - v[k] * dzn_zn_mean);
      grad_z[bg * n + i] = static_cast<scalar_t>(dz);
      sums[2 * m + i + (channel[k] - ch0) * (stride - length)] = dz;
    }
  }
  __syncthreads();
  store_channel_sums(sums, m, stride, cg, length, static_cast<int64_t>(groups) * cg, batch, ch0, bg / groups, partials);
}

// The same for groups too large for registers and shared memory: a warp per channel, z read four times (mean,
// variance, channel sums, grad_z) and grad twice, Mish' computed twice.
template <typename scalar_t>
__global__ void gn_mish_backward_streaming_kernel(
    const scalar_t* __restrict__ grad, const scalar_t* __restrict__ z, const scalar_t* __restrict__ gamma,
    const scalar_t* __restrict__ beta, scalar_t* __restrict__ grad_z, jk::opmath_t<scalar_t>* __restrict__ partials,
    int64_t groups, int64_t cg, int64_t length, int64_t batch, double eps) {
  using acc_t = jk::opmath_t<scalar_t>;
  __shared__ acc_t scratch[32];
  const int64_t bg = blockIdx.x, n = cg * length, ch0 = (bg % groups) * cg, b = bg / groups, channels = groups * cg;
  const scalar_t* zg = z + bg * n;
  const scalar_t* gg = grad + bg * n;
  acc_t mean, rstd;
  streamed_group_statistics(n, [&](int64_t i) { return static_cast<acc_t>(zg[i]); }, eps, scratch, mean, rstd);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  const auto dh_at = [&](int64_t c, int64_t i, acc_t& zn) {  // dh = grad * Mish'(h), and zn
    zn = (static_cast<acc_t>(zg[i]) - mean) * rstd;
    const acc_t h = zn * static_cast<acc_t>(gamma[ch0 + c]) + static_cast<acc_t>(beta[ch0 + c]);
    return static_cast<acc_t>(gg[i]) * mish_derivative_one_exp(h);
  };
  acc_t dzn_sum = 0, dzn_zn_sum = 0;  // lane 0s
  for (int64_t c = warp; c < cg; c += warps) {
    acc_t weight_sum = 0, bias_sum = 0;
    for (int64_t i = c * length + lane; i < (c + 1) * length; i += 32) {
      acc_t zn;
      const acc_t dh = dh_at(c, i, zn);
      weight_sum += dh * zn;
      bias_sum += dh;
    }
    weight_sum = jk::warp_sum(weight_sum);
    bias_sum = jk::warp_sum(bias_sum);
    if (lane == 0) {
      partials[partial_at(0, ch0 + c, b, channels, batch)] = weight_sum;
      partials[partial_at(1, ch0 + c, b, channels, batch)] = bias_sum;
      dzn_sum += static_cast<acc_t>(gamma[ch0 + c]) * bias_sum;
      dzn_zn_sum += static_cast<acc_t>(gamma[ch0 + c]) * weight_sum;
    }
  }
  const acc_t dzn_mean = jk::block_sum(dzn_sum, scratch) / static_cast<acc_t>(n);
  const acc_t dzn_zn_mean = jk::block_sum(dzn_zn_sum, scratch) / static_cast<acc_t>(n);
  for (int64_t c = warp; c < cg; c += warps) {
    const acc_t scale = static_cast<acc_t>(gamma[ch0 + c]);
    acc_t dz_sum = 0;
    for (int64_t i = c * length + lane; i < (c + 1) * length; i += 32) {
      acc_t zn;
      const acc_t dz = rstd * (dh_at(c, i, zn) * scale - dzn_mean - zn * dzn_zn_mean);
      grad_z[bg * n + i] = static_cast<scalar_t>(dz);
      dz_sum += dz;
    }
    dz_sum = jk::warp_sum(dz_sum);
    if (lane == 0) partials[partial_at(2, ch0 + c, b, channels, batch)] = dz_sum;
  }
}

void gn_mish_backward_cuda(jk::CudaLaunch& launch, const jk::CudaTensor& grad_z, const jk::CudaTensor& partials,
                           const jk::CudaTensor& grad, const jk::CudaTensor& z, const jk::CudaTensor& gn_weight,
                           const jk::CudaTensor& gn_bias, int64_t groups, double eps) {
  const int64_t batch = z.size(0), batch_groups = batch * groups, cg = z.size(1) / groups, length = z.size(2);
  const int64_t n = cg * length;
  const cudaStream_t stream = launch.stream;
  jk::dispatch_float(z.scalar_type(), [&](auto zero) {
    using scalar_t = decltype(zero);
    using acc_t = jk::opmath_t<scalar_t>;
    const scalar_t* grad_data = grad.const_data_ptr<scalar_t>();
    const scalar_t* z_data = z.const_data_ptr<scalar_t>();
    const scalar_t* gamma = gn_weight.const_data_ptr<scalar_t>();
    const scalar_t* beta = gn_bias.const_data_ptr<scalar_t>();
    scalar_t* dst = grad_z.mutable_data_ptr<scalar_t>();
    acc_t* partial_sums = partials.mutable_data_ptr<acc_t>();
    const size_t shared = 3 * cg * (length | 1) * sizeof(acc_t);  // at most 3 * 1536 values (length 2)
    const bool in_registers = launch_group_in_registers(n, [&](auto per_thread, int threads) {
      gn_mish_backward_kernel<scalar_t, decltype(per_thread)::value><<<batch_groups, threads, shared, stream>>>(
          grad_data, z_data, gamma, beta, dst, partial_sums, static_cast<int>(groups), static_cast<int>(cg),
          static_cast<int>(length), 1.0f / static_cast<float>(length), batch, eps);
    });
    if (!in_registers) {
      const int threads = 32 * static_cast<int>(std::min<int64_t>(16, cg));  // a warp per channel
      gn_mish_backward_streaming_kernel<scalar_t><<<batch_groups, threads, 0, stream>>>(
          grad_data, z_data, gamma, beta, dst, partial_sums, groups, cg, length, batch, eps);
    }
  });
  JK_CUDA_LAUNCH_CHECK(launch);
}

// ---------------------------------------------------------------- direct convolution (small batch x length)

constexpr int kConvMaxKernel = 7;      // kernel sizes the direct kernel unrolls (1..7); larger ones go to cuDNN
// 256 threads per block at most, so two blocks fit an SM (<= 128 registers) and every cluster of a
// launch is resident at once: with 512 threads and one block per SM, clusters of 16 blocks ran in two
// waves on an H100 (B=1 512->512 L=8: 15 us between the first and the last block's start).
constexpr int kConvMaxWarps = 8;
constexpr int kConvCiPerLane = 2;      // input channels a lane aims to own: loads in flight vs. more warps
constexpr int kConvSmemBytes = 40 * 1024;  // input window for a chunk of input channels
constexpr int64_t kDirectMaxTiles = 8;     // batch x length tiles beyond which cuDNN wins
constexpr int kPortableCluster = 8;        // thread-block cluster sizes every sm_90 GPU runs
constexpr int kMaxCluster = 16;            // H100 / H200 run these too, when the blocks fit a GPC (<= 32)

// GroupNorm + Mish inside the convolution kernel: the blocks of one (batch, group) form a thread-block
// cluster and combine their statistics through distributed shared memory (sm_90).
template <typename scalar_t>
struct FusedGroupNorm {
  const scalar_t* gamma;
  const scalar_t* beta;
  scalar_t* out;         // (B, C_out, L_out), like y
  int64_t group_values;  // channels per group * L_out
  double eps;
};

// Sums v[n] over the warp's 32 lanes for every n < kTile in kTile + 5 - log2(kTile) shuffles (5 * kTile
// with one warp_sum per value): each exchange with the lane `offset` away hands over half of the values
// a lane still holds and keeps the other half. Lane l ends with the total of position
// l / (32 / kTile), which the call returns.
template <int kTile, typename T>
__device__ __forceinline__ T warp_transpose_sum(T (&v)[kTile], int lane) {
  static_assert(kTile == 4 || kTile == 8 || kTile == 16, "tiles of 4, 8 or 16 positions");
  int offset = 16;
#pragma unroll
  for (int half = kTile / 2; half >= 1; half /= 2, offset /= 2) {
    const bool upper = lane & offset;  // the upper lane keeps the upper half of the positions
#pragma unroll
    for (int i = 0; i < half; ++i) {
      const T give = upper ? v[i] : v[i + half];
      v[i] = (upper ? v[i + half] : v[i]) + __shfl_xor_sync(0xffffffffu, give, offset);
    }
  }
  T total = v[0];
  for (; offset > 0; offset /= 2) total += __shfl_xor_sync(0xffffffffu, total, offset);
  return total;
}

// y[b, co, l0 + n] = bias[co] + sum_{ci, k} w[co, ci, k] * x[b, ci, l0 + n + k - pad] (zero outside [0, L)).
// Block (blockIdx.x, blockIdx.y) = (output channels co_per_block * blockIdx.x + [0, co_per_block), (batch,
// tile of kTile positions)); warp w computes channel w % co_per_block over the input channels of split
// w / co_per_block. Lanes own input channels (ci = split * 32 + lane, then every 32 * splits): a lane
// reads the channel's K weights into registers and does K * kTile FMAs against its row of the
// zero-padded input window, staged once per block in shared memory (rows of odd stride: conflict-free).
// Then one warp_transpose_sum and a sum over splits through shared memory. kGroupNorm: one tile per
// batch row, a group's blocks are one cluster, and the block writes Mish(GroupNorm(y)) to gn.out.
template <typename scalar_t, int kTile, bool kGroupNorm>
__global__ void __launch_bounds__(kConvMaxWarps * 32, 2)
    conv1d_direct_kernel(const scalar_t* __restrict__ x, const scalar_t* __restrict__ w,
                         const scalar_t* __restrict__ bias, jk::opmath_t<scalar_t>* __restrict__ y, int64_t c_in,
                         int64_t length, int64_t c_out, int kernel, int64_t pad, int64_t l_out, int64_t tiles,
                         int chunk, int co_per_block, FusedGroupNorm<scalar_t> gn) {
  using acc_t = jk::opmath_t<scalar_t>;
  constexpr int kWindow = kTile + kConvMaxKernel - 1;
  constexpr int kUnroll = kTile == 16 ? 2 : 4;  // input channels whose loads are in flight at once
  constexpr int kStage = 16;                     // input-window loads a thread has in flight at once
  extern __shared__ __align__(16) unsigned char smem_raw[];
  acc_t* xs = reinterpret_cast<acc_t*>(smem_raw);  // [chunk][stride], zero-padded input window
  __shared__ acc_t partial[kConvMaxWarps][kTile];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int splits = static_cast<int>(blockDim.x / 32) / co_per_block;
  const int co_local = warp % co_per_block, split = warp / co_per_block;
  const int64_t co = static_cast<int64_t>(blockIdx.x) * co_per_block + co_local;
  const bool active = co < c_out;  // warp-uniform; inactive warps still stage and sync
  const int64_t b = blockIdx.y / tiles, l0 = (blockIdx.y % tiles) * kTile;
  const int width = kTile + kernel - 1, stride = width | 1;
  const scalar_t* xb = x + b * c_in * length;
  const scalar_t* wrow = w + (active ? co : 0) * c_in * kernel;
  if (active) {  // the channel's weight row heads for L2 while the input window is staged
    constexpr int kLine = 128 / sizeof(scalar_t);  // weights per 128-byte line
    for (int64_t r = (split * 32 + lane) * kLine; r < c_in * kernel; r += splits * 32 * kLine) {
      prefetch_l2(wrow + r);
    }
  }
  // Thread t finishes value (channel t / kTile, position t % kTile) of this block's channels; its
  // parameters are read now, so their latency hides behind the convolution's.
  const int c_mine = threadIdx.x / kTile, pos = threadIdx.x % kTile;
  const int64_t co_mine = static_cast<int64_t>(blockIdx.x) * co_per_block + c_mine;
  const bool mine = c_mine < co_per_block && co_mine < c_out && l0 + pos < l_out;
  acc_t bias_mine = 0, gamma_mine = 0, beta_mine = 0;
  if (mine) {
    if (bias != nullptr) bias_mine = static_cast<acc_t>(bias[co_mine]);
    if constexpr (kGroupNorm) {
      gamma_mine = static_cast<acc_t>(gn.gamma[co_mine]);
      beta_mine = static_cast<acc_t>(gn.beta[co_mine]);
    }
  }
  acc_t acc[kTile];
#pragma unroll
  for (int n = 0; n < kTile; ++n) acc[n] = acc_t(0);

  for (int64_t c0 = 0; c0 < c_in; c0 += chunk) {
    const int cc = static_cast<int>(c_in - c0 < chunk ? c_in - c0 : chunk);
    __syncthreads();  // every warp is done reading the previous chunk
    // All kStage loads of a batch issue before its stores: a plain loop kept each load -> store pair in
    // order and paid the memory latency once per element (10 us of 20 at B=1 256->256 on an H100).
    const int staged = cc * width;
    for (int base = threadIdx.x; base < staged; base += kStage * blockDim.x) {
      acc_t value[kStage];
      int slot[kStage];
#pragma unroll
      for (int u = 0; u < kStage; ++u) {
        const int i = base + u * static_cast<int>(blockDim.x);
        const int ci = i / width, j = i - ci * width;
        const int64_t l = l0 - pad + j;
        slot[u] = i < staged ? ci * stride + j : -1;
        value[u] = i < staged && l >= 0 && l < length ? static_cast<acc_t>(xb[(c0 + ci) * length + l]) : acc_t(0);
      }
#pragma unroll
      for (int u = 0; u < kStage; ++u) {
        if (slot[u] >= 0) xs[slot[u]] = value[u];
      }
    }
    __syncthreads();
    if (!active) continue;
#pragma unroll kUnroll
    for (int ci = split * 32 + lane; ci < cc; ci += splits * 32) {
      const scalar_t* wc = wrow + (c0 + ci) * kernel;
      const acc_t* xr = xs + ci * stride;
      acc_t wk[kConvMaxKernel], xw[kWindow];
#pragma unroll
      for (int k = 0; k < kConvMaxKernel; ++k) wk[k] = k < kernel ? static_cast<acc_t>(wc[k]) : acc_t(0);
#pragma unroll
      for (int j = 0; j < kWindow; ++j) xw[j] = j < width ? xr[j] : acc_t(0);
#pragma unroll
      for (int k = 0; k < kConvMaxKernel; ++k) {
        if (k < kernel) {  // warp-uniform
#pragma unroll
          for (int n = 0; n < kTile; ++n) acc[n] += wk[k] * xw[n + k];
        }
      }
    }
  }
  constexpr int kLanesPerPosition = 32 / kTile;
  if (active) {
    const acc_t total = warp_transpose_sum<kTile>(acc, lane);
    if (lane % kLanesPerPosition == 0) partial[warp][lane / kLanesPerPosition] = total;
  }
  __syncthreads();
  acc_t v = 0;
  if (mine) {
    v = bias_mine;
    for (int s = 0; s < splits; ++s) v += partial[s * co_per_block + c_mine][pos];
  }
  if constexpr (!kGroupNorm) {
    if (mine) y[(b * c_out + co_mine) * l_out + l0 + pos] = v;
  } else {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    // Statistics of the group without a second pass over the cluster: each block's mean and sum of
    // squared deviations (exact two-pass within the block), combined as Chan et al. do (no cancellation
    // when |mean| >> std). Every block has co_per_block * l_out values (the launcher checks).
    namespace cg = cooperative_groups;
    __shared__ acc_t scratch[kConvMaxWarps];
    __shared__ acc_t block_stats[2];
    const acc_t count = static_cast<acc_t>(co_per_block * l_out);
    const acc_t block_mean = jk::block_sum(v, scratch) / count;
    const acc_t dev = mine ? v - block_mean : acc_t(0);
    const acc_t block_m2 = jk::block_sum(dev * dev, scratch);
    if (threadIdx.x == 0) {
      block_stats[0] = block_mean;
      block_stats[1] = block_m2;
    }
    cg::cluster_group cluster = cg::this_cluster();
    cluster.sync();
    // Lane r of every warp reads block r's statistics (all remote reads in flight at once; the
    // butterfly sums give every warp of every block the same bits).
    const unsigned blocks = cluster.num_blocks();  // <= kMaxCluster <= 32
    acc_t rank_mean = 0, rank_m2 = 0;
    if (static_cast<unsigned>(lane) < blocks) {
      const acc_t* stats = cluster.map_shared_rank(block_stats, static_cast<unsigned>(lane));
      rank_mean = stats[0];
      rank_m2 = stats[1];
    }
    const acc_t mean = jk::warp_sum(rank_mean) / static_cast<acc_t>(blocks);
    const acc_t shift = static_cast<unsigned>(lane) < blocks ? rank_mean - mean : acc_t(0);
    const acc_t var = jk::warp_sum(rank_m2 + count * shift * shift) / static_cast<acc_t>(gn.group_values);
    const acc_t rstd = acc_t(1) / ::sqrt(var + static_cast<acc_t>(gn.eps));
    if (mine) {
      const acc_t h = (v - mean) * rstd * gamma_mine + beta_mine;
      gn.out[(b * c_out + co_mine) * l_out + pos] = static_cast<scalar_t>(mish_one_exp(h));
    }
    cluster.sync();  // no block leaves while another may read its statistics
#else
    __trap();  // the launcher runs this path only on binaries for sm_90 and newer
#endif
  }
}

// Whether `kernel` (the fused GroupNorm one) runs on `device` from a binary for sm_90+ (thread-block
// clusters); one answer per device, as every kernel of this library is built for the same archs.
inline bool clusters_supported(const void* kernel, int device) {
  static int cached[64] = {0};  // 0: not asked yet, 1: yes, -1: no
  if (device < 0 || device >= 64) return false;
  if (cached[device] == 0) {
    cudaFuncAttributes attributes{};
    cached[device] = cudaFuncGetAttributes(&attributes, kernel) == cudaSuccess && attributes.binaryVersion >= 90
                         ? 1 : -1;
    (void)cudaGetLastError();  // a failed query leaves no sticky error behind
  }
  return cached[device] == 1;
}

// Block shape of the direct kernel: output channels per block and warps per channel (splits).
struct ConvBlocks {
  int co_per_block = 0;  // 0: no shape fits (fused GroupNorm only)
  int splits = 0;
};

// Splits give each lane about kConvCiPerLane input channels. Channels per block: one, or with GroupNorm
// fused the fewest that keep a group's blocks within one cluster; then doubled while the grid still
// covers every SM twice (fuller blocks stage the input window fewer times).
inline ConvBlocks conv_blocks(int64_t c_in, int64_t c_out, int64_t row_tiles, int64_t group_channels,
                              int sm_count) {
  ConvBlocks shape;
  int co = 1;
  if (group_channels > 0) {
    while (co <= kConvMaxWarps && (group_channels % co != 0 || group_channels / co > kMaxCluster)) co *= 2;
    if (co > kConvMaxWarps) return shape;
  }
  auto blocks = [&](int per_block) { return (c_out + per_block - 1) / per_block * row_tiles; };
  const int64_t wanted = (c_in + 32 * kConvCiPerLane - 1) / (32 * kConvCiPerLane);
  int splits = static_cast<int>(std::min<int64_t>(wanted, kConvMaxWarps / co));
  while (2 * co * splits <= kConvMaxWarps && blocks(2 * co) >= 2 * sm_count &&
         (group_channels == 0 || group_channels % (2 * co) == 0)) {
    co *= 2;
  }
  shape.co_per_block = co;
  shape.splits = std::max(splits, 1);
  return shape;
}

// y = conv1d(x, w, bias) into y (gn == nullptr), or out = Mish(GroupNorm(conv1d(...))) in one launch
// when the group's blocks fit one cluster; returns false when it could not run (gn only).
template <typename scalar_t, int kTile>
bool launch_conv1d_direct(jk::CudaLaunch& launch, const jk::CudaTensor& y, const jk::CudaTensor& x,
                          const jk::CudaTensor& w, const jk::CudaTensor& bias, int64_t pad,
                          const FusedGroupNorm<scalar_t>* gn, int64_t groups) {
  using acc_t = jk::opmath_t<scalar_t>;
  const int64_t batch = x.size(0), c_in = x.size(1), length = x.size(2);
  const int64_t c_out = w.size(0), kernel = w.size(2), l_out = y.size(2);
  const int64_t tiles = (l_out + kTile - 1) / kTile, stride = (kTile + kernel - 1) | 1;
  const int64_t chunk = std::min<int64_t>(c_in, kConvSmemBytes / (stride * static_cast<int64_t>(sizeof(acc_t))));
  const size_t smem = static_cast<size_t>(chunk * stride) * sizeof(acc_t);
  const int sm_count = launch.multiprocessors;
  const int64_t group_channels = gn != nullptr ? c_out / groups : 0;
  if (gn != nullptr && tiles != 1) return false;  // the group's statistics span one block row
  const ConvBlocks shape = conv_blocks(c_in, c_out, batch * tiles, group_channels, sm_count);
  if (shape.co_per_block == 0) return false;
  const dim3 grid(static_cast<unsigned>((c_out + shape.co_per_block - 1) / shape.co_per_block),
                  static_cast<unsigned>(batch * tiles));
  const dim3 block(static_cast<unsigned>(32 * shape.co_per_block * shape.splits));
  const scalar_t* bias_ptr = bias.const_data_ptr<scalar_t>();  // null without a bias
  const cudaStream_t stream = launch.stream;
  if (gn == nullptr) {
    conv1d_direct_kernel<scalar_t, kTile, false><<<grid, block, smem, stream>>>(
        x.const_data_ptr<scalar_t>(), w.const_data_ptr<scalar_t>(), bias_ptr, y.mutable_data_ptr<acc_t>(), c_in,
        length, c_out, static_cast<int>(kernel), pad, l_out, tiles, static_cast<int>(chunk), shape.co_per_block,
        FusedGroupNorm<scalar_t>{});
    JK_CUDA_LAUNCH_CHECK(launch);
    return true;
  }
  // Fused: the group's blocks are one cluster of at most kMaxCluster blocks.
  const int64_t cluster = group_channels / shape.co_per_block;
  const auto fused = conv1d_direct_kernel<scalar_t, kTile, true>;
  if (!clusters_supported(reinterpret_cast<const void*>(fused), y.get_device())) return false;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeClusterDimension;
  attribute.val.clusterDim.x = static_cast<unsigned>(cluster);
  attribute.val.clusterDim.y = 1;
  attribute.val.clusterDim.z = 1;
  config.attrs = &attribute;
  config.numAttrs = 1;
  if (cluster > kPortableCluster) {
    // JITKERNELS_PORTABLE_CLUSTERS=1: portable sizes only (the unfused path for larger groups).
    // tools/sanitize.sh sets it for synccheck, which reports the barriers of 16-block clusters as
    // divergent even in a kernel of straight-line __syncthreads (results/session9/synccheck_cluster).
    static const bool portable_only = jk::env_flag("JITKERNELS_PORTABLE_CLUSTERS", false);
    if (portable_only) return false;
    // Allowed on request, and asked of the device (once per device, with the largest blocks and window,
    // before any CUDA graph capture: the first call is a warm-up), not assumed.
    static int large_clusters[64] = {0};  // 0: not asked yet, 1: they run, -1: they do not
    const int device = y.get_device();
    if (device < 0 || device >= 64) return false;
    if (large_clusters[device] == 0) {
      cudaLaunchConfig_t query = config;
      cudaLaunchAttribute query_dims = attribute;
      query_dims.val.clusterDim.x = kMaxCluster;
      query.attrs = &query_dims;
      // A grid of whole clusters: this call's grid need not divide into kMaxCluster blocks (a cluster of
      // 12 has a grid of 12k), and with it the query failed as "cluster misconfiguration" and turned
      // large clusters off for the process (found by compute-sanitizer, session 8).
      query.gridDim = dim3(kMaxCluster);
      query.blockDim = dim3(kConvMaxWarps * 32);
      query.dynamicSmemBytes = kConvSmemBytes;
      int active = 0;
      const bool runs = cudaFuncSetAttribute(fused, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) ==
                            cudaSuccess &&
                        cudaOccupancyMaxActiveClusters(&active, fused, &query) == cudaSuccess && active >= 1;
      (void)cudaGetLastError();  // a failed query leaves no sticky error behind
      large_clusters[device] = runs ? 1 : -1;
    }
    if (large_clusters[device] != 1) return false;
  }
  JK_CUDA_CHECK(launch, cudaLaunchKernelEx(&config, fused, x.const_data_ptr<scalar_t>(), w.const_data_ptr<scalar_t>(),
                                           bias_ptr, static_cast<acc_t*>(nullptr), c_in, length, c_out,
                                           static_cast<int>(kernel), pad, l_out, tiles, static_cast<int>(chunk),
                                           shape.co_per_block, *gn));
  return true;
}

// The direct convolution, or nothing when cuDNN should convolve (large batch x length, kernels wider
// than kConvMaxKernel). With `out`: GroupNorm + Mish fused into the same launch where possible; false:
// the caller runs gn_mish_cuda.
template <typename scalar_t>
bool conv1d_direct_dispatch(jk::CudaLaunch& launch, const jk::CudaTensor& y, const jk::CudaTensor& x,
                            const jk::CudaTensor& weight, const jk::CudaTensor& bias, int64_t pad,
                            const FusedGroupNorm<scalar_t>* gn, int64_t groups) {
  const int64_t l_out = y.size(2), kernel = weight.size(2);
  const int tile = l_out <= 4 ? 4 : l_out <= 8 ? 8 : 16;
  const int64_t tiles = (l_out + tile - 1) / tile;
  if (x.size(0) * tiles > kDirectMaxTiles || kernel > kConvMaxKernel || weight.size(0) >= (int64_t{1} << 31)) {
    return false;
  }
  if (tile == 4) return launch_conv1d_direct<scalar_t, 4>(launch, y, x, weight, bias, pad, gn, groups);
  if (tile == 8) return launch_conv1d_direct<scalar_t, 8>(launch, y, x, weight, bias, pad, gn, groups);
  return launch_conv1d_direct<scalar_t, 16>(launch, y, x, weight, bias, pad, gn, groups);
}

bool conv1d_direct_cuda(jk::CudaLaunch& launch, const jk::CudaTensor& y, const jk::CudaTensor& x,
                        const jk::CudaTensor& weight, const jk::CudaTensor& bias, int64_t pad) {
  bool ran = false;
  jk::dispatch_float(x.scalar_type(), [&](auto zero) {
    using scalar_t = decltype(zero);
    ran = conv1d_direct_dispatch<scalar_t>(launch, y, x, weight, bias, pad, nullptr, 1);
  });
  return ran;
}

bool conv1d_gn_mish_direct_cuda(jk::CudaLaunch& launch, const jk::CudaTensor& out, const jk::CudaTensor& x,
                                const jk::CudaTensor& weight, const jk::CudaTensor& bias,
                                const jk::CudaTensor& gn_weight, const jk::CudaTensor& gn_bias, int64_t groups,
                                int64_t pad, double eps) {
  bool ran = false;
  jk::dispatch_float(x.scalar_type(), [&](auto zero) {
    using scalar_t = decltype(zero);
    const FusedGroupNorm<scalar_t> gn{gn_weight.const_data_ptr<scalar_t>(), gn_bias.const_data_ptr<scalar_t>(),
                                      out.mutable_data_ptr<scalar_t>(), out.size(1) / groups * out.size(2), eps};
    ran = conv1d_direct_dispatch<scalar_t>(launch, out, x, weight, bias, pad, &gn, groups);
  });
  return ran;
}

}  // namespace diffusion
