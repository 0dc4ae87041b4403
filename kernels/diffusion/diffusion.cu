// Family `diffusion`: the scheduler steps' CUDA kernels and launchers (declared in diffusion.h); the
// convolution's are in diffusion_conv.cu, so nvcc compiles the two halves at once on a first build.
// Checks, allocation, the device guard, the stream, scratch memory, the generator and registration live in
// diffusion.cpp (through cuda_launch.cuh), so these files include no tensor header and their cold nvcc time is
// their own code's.
//
// Design, against the memory floor:
// - ddpm_step / ddim_step are memory-bound: read model_output and sample once, write the result once;
//   noise (when not given) is drawn in registers by Philox (one call per 4 outputs), so it costs no
//   traffic. The kernel has the shape of the shared elementwise launcher (small blocks, a thread's loads
//   issued before its math, one tile per block up to 256 blocks per SM), which runs two-input ops at a
//   same-size copy's speed. The rows' coefficients (double math on the float64 schedule, timesteps read
//   on the device) come from a small kernel before it, which the step kernel follows as a programmatic
//   dependent launch: its data loads fly before it waits for the table. The noise mode (none / given /
//   drawn) is a template parameter, so a kernel holds registers only for the loads it makes. No host
//   sync: a CUDA graph replays every step as captured.

#include <algorithm>

#include "cuda_launch.cuh"
#include "dependent_launch.cuh"
#include "diffusion.h"
#include "elementwise_kernel.cuh"  // jk::Vec, jk::aligned16
#include "opmath.h"
#include "philox_cuda.cuh"

namespace diffusion {

// ---------------------------------------------------------------- scheduler steps

constexpr int kStepThreads = 128;
constexpr int kStepUnroll = 2;  // 16-byte items per thread and tile (vector path)

// Where the noise term comes from: none (its coefficient is 0), a given tensor, or Philox in registers.
// A template parameter, so a kernel holds registers only for the loads it makes.
enum class Noise { kNone, kGiven, kDraw };

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

// Either scheduler's coefficients, so one kernel serves both (only the coefficient math differs;
// half the kernels, half the compile time).
struct StepCoefFn {
  DdpmCoefFn ddpm;
  DdimCoefFn ddim;
  bool is_ddim;

  C10_HOST_DEVICE bool per_row() const { return is_ddim ? ddim.per_row() : ddpm.per_row(); }
  C10_HOST_DEVICE const double* schedule() const { return is_ddim ? ddim.schedule : ddpm.schedule; }
  C10_HOST_DEVICE int64_t num_timesteps() const { return is_ddim ? ddim.num_timesteps : ddpm.num_timesteps; }
  template <typename acc_t>
  __device__ StepCoefs<acc_t> get(int64_t row) const {
    return is_ddim ? ddim.template get<acc_t>(row) : ddpm.template get<acc_t>(row);
  }
};

// table[r] = the coefficients of row r (r < rows; one row without per-row timesteps): the timestep
// reads and the double math, once per row, in a kernel of its own that the step kernel follows as a
// dependent launch, so the step kernel holds no double math (its registers) and no dependent loads
// before its data loads (their latency).
template <typename acc_t>
__global__ void step_coefs_kernel(StepCoefs<acc_t>* __restrict__ table, int64_t rows, StepCoefFn fn) {
  jk::let_next_kernel_launch();
  // A row's schedule values are read after its timestep (a dependent load): bring the whole schedule
  // (64 KB for 1000 steps) into L2 alongside the timestep loads, so that second load hits L2. Session
  // 19, H200, 256x16x2048 ddpm_step: 32.6 -> 32.0 us under do_bench (clean L2: 28.3 -> 28.2, noise).
  // Only while that is a few prefetches per thread (a schedule of thousands of steps is not worth it).
  const int64_t r = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const char* schedule = reinterpret_cast<const char*>(fn.schedule());
  const int64_t schedule_lines = (fn.num_timesteps() * kScheduleCols * int64_t{sizeof(double)} + 127) / 128;
  const int64_t threads = static_cast<int64_t>(gridDim.x) * blockDim.x;
  if (schedule_lines <= 8 * threads) {
    for (int64_t i = r; i < schedule_lines; i += threads) prefetch_l2(schedule + 128 * i);
  }
  if (r < rows) table[r] = fn.template get<acc_t>(r);
}

// The coefficients of the row of element i, for a thread whose elements only increase: read from the
// table only when the thread enters a new row.
template <typename acc_t>
struct RowLookup {
  const StepCoefs<acc_t>* table;
  int64_t inner;          // elements per row
  bool per_row;           // one timestep per row (else one for every element)
  int64_t row_end = -1;   // end of the current row (INT64_MAX: one row for every element)
  StepCoefs<acc_t> c{};

  __device__ __forceinline__ const StepCoefs<acc_t>& at(int64_t i) {
    if (i >= row_end) {
      const int64_t r = per_row ? i / inner : 0;
      row_end = per_row ? (r + 1) * inner : INT64_MAX;
      c = table[r];
    }
    return c;
  }
};

// The shape of the shared elementwise launcher (kernels/common/elementwise_kernel.cuh), which runs a
// two-input op at a same-size copy's speed: small blocks of kStepThreads threads, each thread issuing the
// loads of kUnroll items before any math, a grid of tiles up to 256 blocks per SM (grid-stride beyond).
// Session 16, H200, 256x16x2048 float32 (benchmarks/results/session16): the earlier kernel (one wave of
// resident blocks, a contiguous chunk each, streaming loads, an L2 prefetch of the next batch, row
// coefficients in a shared table) took 36.5 us where this shape's relu_add took 29.0 (a same-size copy:
// 28.6); this shape computing each thread's row coefficients itself took 42.1 (the double math sized its
// registers, and its dependent loads came before the data loads).
// Element i uses lane i % 4 of Philox block i / 4 (as on the CPU), whatever the path.
template <typename scalar_t, int kItem, bool kVector, Noise kNoise>
__global__ void __launch_bounds__(kStepThreads)
    step_kernel(scalar_t* __restrict__ out, const scalar_t* __restrict__ m, const scalar_t* __restrict__ x,
                const scalar_t* __restrict__ noise, int64_t n, int64_t inner,
                const StepCoefs<jk::opmath_t<scalar_t>>* __restrict__ table, bool per_row, bool clip, double range,
                at::PhiloxCudaState philox) {
  using acc_t = jk::opmath_t<scalar_t>;
  using I = Item<scalar_t, kItem, kVector>;
  constexpr int kUnroll = kVector ? kStepUnroll : 1;
  constexpr int kLoads = kNoise == Noise::kGiven ? kUnroll : 0;
  constexpr int64_t kTile = int64_t{kStepThreads} * kUnroll;
  const int64_t n_items = (n + kItem - 1) / kItem;
  uint64_t seed = 0, base = 0;
  if constexpr (kNoise == Noise::kDraw) {
    const jk::PhiloxSeed s = jk::unpack_philox(philox);
    seed = s.seed;
    base = s.offset / 4;
  }
  const acc_t r = static_cast<acc_t>(range);
  constexpr bool kNoiseFinite = kNoise != Noise::kGiven;
  RowLookup<acc_t> lookup{table, inner, per_row};

  for (int64_t first = blockIdx.x * kTile + threadIdx.x; first < n_items;
       first += static_cast<int64_t>(gridDim.x) * kTile) {
    I mv[kUnroll], xv[kUnroll], zv[kLoads > 0 ? kLoads : 1];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t item = first + u * kStepThreads;
      if (item < n_items) {
        mv[u].load(m, item, n);
        xv[u].load(x, item, n);
        if constexpr (kNoise == Noise::kGiven) zv[u].load(noise, item, n);
      }
    }
    // Drawn noise needs neither the data nor the table: draw it while the loads are in flight.
    float drawn[kNoise == Noise::kDraw ? kUnroll : 1][kItem];
    if constexpr (kNoise == Noise::kDraw) {
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const uint64_t counter = base + static_cast<uint64_t>(first + u * kStepThreads) * (kItem / 4);
#pragma unroll
        for (int q = 0; q < kItem / 4; ++q) {
          const jk::Float4 f = jk::normal4(seed, counter + q);
          drawn[u][4 * q] = f.x;
          drawn[u][4 * q + 1] = f.y;
          drawn[u][4 * q + 2] = f.z;
          drawn[u][4 * q + 3] = f.w;
        }
      }
    }
    // The coefficient table is written (a no-op after the first trip); waiting only once the first
    // load has arrived keeps the loads of the first wave in flight while the coefficient kernel runs.
    jk::wait_for_previous_kernel_after(jk::same_bits<uint32_t>(static_cast<float>(mv[0].v[0])));
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t item = first + u * kStepThreads;
      if (item >= n_items) break;
      acc_t z[kItem];
#pragma unroll
      for (int e = 0; e < kItem; ++e) {
        if constexpr (kNoise == Noise::kDraw) {
          z[e] = static_cast<acc_t>(drawn[u][e]);
        } else {
          z[e] = kNoise == Noise::kGiven ? static_cast<acc_t>(zv[kLoads > 0 ? u : 0].v[e]) : acc_t(0);
        }
      }
      const int64_t i0 = item * kItem;
      I o;
      if constexpr (kVector) {  // 16-byte items lie in one row: one lookup per item
        const StepCoefs<acc_t> c = lookup.at(i0);
#pragma unroll
        for (int e = 0; e < kItem; ++e) {
          o.v[e] = static_cast<scalar_t>(step_element<kNoiseFinite>(c, static_cast<acc_t>(mv[u].v[e]),
                                                                     static_cast<acc_t>(xv[u].v[e]), z[e], clip, r));
        }
      } else {  // the last item may run past n: its row (and coefficient table entry) does not exist
#pragma unroll
        for (int e = 0; e < kItem; ++e) {
          if (i0 + e >= n) break;
          o.v[e] = static_cast<scalar_t>(step_element<kNoiseFinite>(
              lookup.at(i0 + e), static_cast<acc_t>(mv[u].v[e]), static_cast<acc_t>(xv[u].v[e]), z[e], clip, r));
        }
      }
      o.store(out, item, n);
    }
  }
}

template <typename scalar_t, int kItem, bool kVector, Noise kNoise>
void launch_step(jk::CudaLaunch& launch, const jk::CudaTensor& out, const jk::CudaTensor& m, const jk::CudaTensor& x,
                 const jk::CudaTensor& noise, const StepCoefFn& fn, bool clip, double range) {
  constexpr int kUnroll = kVector ? kStepUnroll : 1;
  const int64_t n = out.numel(), n_items = (n + kItem - 1) / kItem, inner = n / x.size(0);
  // A block per tile up to 256 blocks per SM (as the elementwise launcher); grid-stride beyond.
  const int64_t max_blocks = static_cast<int64_t>(launch.multiprocessors) * 256;
  const int64_t blocks = std::min((n_items + kStepThreads * kUnroll - 1) / (kStepThreads * kUnroll), max_blocks);
  using acc_t = jk::opmath_t<scalar_t>;
  const bool per_row = fn.per_row();
  const int64_t rows = per_row ? x.size(0) : 1;
  auto* table = static_cast<StepCoefs<acc_t>*>(launch.scratch(rows * static_cast<int64_t>(sizeof(StepCoefs<acc_t>))));
  step_coefs_kernel<acc_t><<<static_cast<unsigned>((rows + 127) / 128), 128, 0, launch.stream>>>(table, rows, fn);
  JK_CUDA_LAUNCH_CHECK(launch);
  // Reserve one draw per element, so consecutive calls (and graph replays) never reuse numbers.
  const at::PhiloxCudaState philox = kNoise == Noise::kDraw ? launch.philox(n) : at::PhiloxCudaState();
  jk::launch_after_previous(launch, step_kernel<scalar_t, kItem, kVector, kNoise>,
                            dim3(static_cast<unsigned>(blocks)), dim3(kStepThreads), out.mutable_data_ptr<scalar_t>(),
                            m.const_data_ptr<scalar_t>(), x.const_data_ptr<scalar_t>(),
                            noise.const_data_ptr<scalar_t>(), n, inner,
                            static_cast<const StepCoefs<acc_t>*>(table), per_row, clip, range, philox);
}

template <typename scalar_t, int kItem, bool kVector>
void launch_step_noise(jk::CudaLaunch& launch, const jk::CudaTensor& out, const jk::CudaTensor& m,
                       const jk::CudaTensor& x, const jk::CudaTensor& noise, const StepCoefFn& fn, bool clip,
                       double range, bool draw) {
  if (noise.defined()) {
    launch_step<scalar_t, kItem, kVector, Noise::kGiven>(launch, out, m, x, noise, fn, clip, range);
  } else if (draw) {
    launch_step<scalar_t, kItem, kVector, Noise::kDraw>(launch, out, m, x, noise, fn, clip, range);
  } else {
    launch_step<scalar_t, kItem, kVector, Noise::kNone>(launch, out, m, x, noise, fn, clip, range);
  }
}

void step_cuda(jk::CudaLaunch& launch, const jk::CudaTensor& out, const jk::CudaTensor& m, const jk::CudaTensor& x,
               const jk::CudaTensor& noise, const StepCoefFn& fn, bool clip, double range, bool draw) {
  jk::dispatch_float(out.scalar_type(), [&](auto zero) {
    using scalar_t = decltype(zero);
    constexpr int kItem = std::max<int>(16 / sizeof(scalar_t), 4);
    auto aligned = [](const jk::CudaTensor& t) { return jk::aligned16(t.const_data_ptr()); };
    const bool vector = out.numel() / x.size(0) % kItem == 0 && aligned(out) && aligned(m) && aligned(x) &&
                        (!noise.defined() || aligned(noise));
    if (vector) {
      launch_step_noise<scalar_t, kItem, true>(launch, out, m, x, noise, fn, clip, range, draw);
    } else {
      launch_step_noise<scalar_t, 4, false>(launch, out, m, x, noise, fn, clip, range, draw);
    }
  });
}

void ddpm_step_cuda(jk::CudaLaunch& launch, const jk::CudaTensor& out, const jk::CudaTensor& model_output,
                    const jk::CudaTensor& sample, const jk::CudaTensor& noise, const DdpmCoefFn& fn, bool clip,
                    double range, bool draw) {
  step_cuda(launch, out, model_output, sample, noise, StepCoefFn{fn, DdimCoefFn{}, false}, clip, range, draw);
}

void ddim_step_cuda(jk::CudaLaunch& launch, const jk::CudaTensor& out, const jk::CudaTensor& model_output,
                    const jk::CudaTensor& sample, const jk::CudaTensor& noise, const DdimCoefFn& fn, bool clip,
                    double range, bool draw) {
  step_cuda(launch, out, model_output, sample, noise, StepCoefFn{DdpmCoefFn{}, fn, true}, clip, range, draw);
}

}  // namespace diffusion
