// The math of the sampling ops, shared by the CPU (sampling.cpp) and CUDA (sampling.cu) kernels.
#pragma once
#include <c10/macros/Macros.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "fast_math.cuh"
#include "philox.h"

namespace sampling {

// Draws for `normal`. Element i of the flattened (n, d) output is lane i % kPer of Philox call
// i / kPer, on CPU and CUDA alike, so every element gets its own independent N(0, 1): kPer = 4
// (32 bits per Box-Muller input) for float32/float64 outputs, 8 (16 bits per input, plenty for a
// 16-bit result; |z| <= 4.86) for float16/bfloat16, so a 16-bit output costs half the Philox work.
//
// Box-Muller: z = r (cos θ, sin θ), r = sqrt(-2 ln u). On the GPU log2, sqrt, sin and cos are
// MUFU ops (16 results per clock per SM). 16-bit outputs: half the bytes per normal, so the MUFU
// unit is what limits: only log2 and sqrt use it and the point on the circle comes from
// polynomials on the FMA pipe (jk::sincos_quarter): θ's bits give an angle x in the quarter
// (-π/4, π/4), and two more bits swap the pair and negate the cosine; those four images of the
// quarter tile the circle, so θ is uniform on a grid of 2^16 angles. 32-bit outputs: writing memory
// is what limits, and the polynomial's extra instructions would cost more than the MUFU ops they
// save, so sin and cos stay MUFU ops there. The CPU takes the same bits through std::.
template <typename T>
constexpr int normals_per_call() {
  return sizeof(T) == 2 ? 8 : 4;
}

using jk::same_bits;

// A uniform in (0, 1] from the top 23 bits: 2 - [1, 2) built from the mantissa (no int->float convert).
C10_HOST_DEVICE inline float uniform_hi23(uint32_t bits) {
  return 2.0f - same_bits<float>(0x3f800000u | (bits >> 9));
}

// A uniform in (0, 1) from the top 16 bits k: (k + ½) 2^-16, exactly. f = 1 + k 2^-23 from the
// mantissa, then 128 f - (128 - 2^-17) (exact: both steps are representable).
C10_HOST_DEVICE inline float uniform_hi16(uint32_t bits) {
  const float f = same_bits<float>(0x3f800000u | (bits >> 16));
  return 128.0f * f - (128.0f - 0.00000762939453125f);
}

// Box-Muller's radius sqrt(-2 ln u) for u in (0, 1].
C10_HOST_DEVICE inline float box_muller_radius(float u) {
#ifdef __CUDA_ARCH__
  // One MUFU op each (the compiler's sqrtf and log2f are longer sequences; u is never subnormal,
  // so .ftz changes nothing); -2 ln u = -2 ln2 * log2 u.
  float log2_u, radius;
  asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(log2_u) : "f"(u));
  asm("sqrt.approx.ftz.f32 %0, %1;" : "=f"(radius) : "f"(-1.3862943611198906f * log2_u));
  return radius;
#else
  return std::sqrt(-2.0f * std::log(u));
#endif
}

// r times a uniform point on the circle, from `bits`: bits 1..kAngleBits pick the angle
// x = j π/2^(kAngleBits+2), j odd in (-2^kAngleBits, 2^kAngleBits), so |x| < π/4; bit 0 swaps the
// two outputs; bit `negate_bit` negates the cosine. (The odd j is built exactly as a float:
// 2^23 + j + 2^kAngleBits from the mantissa, minus 2^23 + 2^kAngleBits.)
template <int kAngleBits, int kNegateBit>
C10_HOST_DEVICE inline void circle_point(uint32_t bits, float r, float* z0, float* z1) {
  static_assert(kAngleBits >= 1 && kAngleBits <= 22 && kNegateBit > kAngleBits && kNegateBit < 32, "bit layout");
  constexpr uint32_t kAngleMask = ((1u << kAngleBits) - 1u) << 1;
  constexpr float kOffset = 8388608.0f + float(1u << kAngleBits);  // 2^23 + 2^kAngleBits
  constexpr float kStep = 0.78539816339744831f / float(1u << kAngleBits);  // (π/4) / 2^kAngleBits
  const float j = same_bits<float>(0x4b000001u | (bits & kAngleMask)) - kOffset;
  float s, c;
  jk::sincos_quarter(j * kStep, &s, &c);
  c = same_bits<float>(same_bits<uint32_t>(c) ^ ((bits << (31 - kNegateBit)) & 0x80000000u));
  const bool swap = bits & 1u;
  *z0 = r * (swap ? s : c);
  *z1 = r * (swap ? c : s);
}

// r times (cos 2πa, sin 2πa) (the 32-bit outputs' Box-Muller angle, a uniform).
C10_HOST_DEVICE inline void circle_point_mufu(float a, float r, float* z0, float* z1) {
  constexpr float kTwoPi = 6.283185307179586f;
  float s, c;
#ifdef __CUDA_ARCH__
  __sincosf(kTwoPi * a, &s, &c);
#else
  s = std::sin(kTwoPi * a);
  c = std::cos(kTwoPi * a);
#endif
  *z0 = r * c;
  *z1 = r * s;
}

// Philox4x32-10 for one seed and subsequence 0: the rounds of jk::philox4x32_10 with the 20 round
// keys computed once. A CUDA thread's loop over calls otherwise recomputes them every call (20 adds,
// 8% of the 16-bit kernel's instructions by the SASS count); the empty asm keeps the compiler from
// folding them back into the loop. test_sampling.py checks the 16-bit draws (this) against the
// 32-bit ones (jk::philox4x32_10) call by call.
struct PhiloxKeyed {
  uint32_t k0[10], k1[10];
  uint64_t first_counter;

  C10_HOST_DEVICE explicit PhiloxKeyed(const jk::PhiloxSeed& s) : first_counter(s.offset / 4) {
    uint32_t a = static_cast<uint32_t>(s.seed), b = static_cast<uint32_t>(s.seed >> 32);
    for (int round = 0; round < 10; ++round) {
#ifdef __CUDA_ARCH__
      asm volatile("" : "+r"(a), "+r"(b));
#endif
      k0[round] = a;
      k1[round] = b;
      a += jk::kPhiloxKeyStep0;
      b += jk::kPhiloxKeyStep1;
    }
  }

  // The four draws of call `call` (counter first_counter + call).
  C10_HOST_DEVICE jk::Uint4 operator()(uint64_t call) const {
    const uint64_t counter = first_counter + call;
    jk::Uint4 c{static_cast<uint32_t>(counter), static_cast<uint32_t>(counter >> 32), 0u, 0u};
#pragma unroll
    for (int round = 0; round < 10; ++round) c = jk::philox_round(c, k0[round], k1[round]);
    return c;
  }
};

// The kPer normals of one Philox call's draws r. 32-bit: pairs (x, y), (z, w): radius from x's top
// 23 bits, angle from y's. 16-bit: each word is a pair: radius from its top 16 bits, angle from the
// low 16 (14 bits, swap bit 0, negate bit 15).
template <int kPer>
C10_HOST_DEVICE inline void normals_of(const jk::Uint4& r, float* z) {
  if constexpr (kPer == 4) {
    circle_point_mufu(uniform_hi23(r.y), box_muller_radius(uniform_hi23(r.x)), &z[0], &z[1]);
    circle_point_mufu(uniform_hi23(r.w), box_muller_radius(uniform_hi23(r.z)), &z[2], &z[3]);
  } else {
    static_assert(kPer == 8, "4 or 8 normals per Philox call");
    const uint32_t w[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
    for (int q = 0; q < 4; ++q)
      circle_point<14, 15>(w[q], box_muller_radius(uniform_hi16(w[q])), &z[2 * q], &z[2 * q + 1]);
  }
}

// The kPer normals of Philox call `call` (counter offset / 4 + call of the op's reserved range).
template <int kPer>
C10_HOST_DEVICE inline void normals(const jk::PhiloxSeed& s, uint64_t call, float* z) {
  normals_of<kPer>(jk::philox4x32_10(s.seed, s.offset / 4 + call, 0), z);
}

// The CPU's batch form of normals<kPer> for calls [first_call, first_call + calls): the same Philox
// words and the same maths, with the logarithm, sine and cosine as branch-free float polynomials
// (jk::log_positive, jk::cos_sin_two_pi, jk::sincos_quarter) in loops the compiler vectorizes. Per
// call, std::log / std::sin / std::cos were scalar library calls: ~10 ns a normal on one thread,
// against ~3 ns for eager torch.randn. Host only.
template <int kPer>
inline void normals_batch_cpu(const jk::PhiloxSeed& s, uint64_t first_call, int64_t calls, float* z) {
  constexpr int64_t kBatch = jk::kPhiloxBatchCpu;
  uint32_t words[4 * kBatch];
  for (int64_t done = 0; done < calls; done += kBatch) {
    const int64_t batch = calls - done < kBatch ? calls - done : kBatch;
    jk::philox_words_cpu(s.seed, s.offset / 4 + first_call + static_cast<uint64_t>(done), batch, words);
    float* out = z + kPer * done;
    if constexpr (kPer == 4) {
      for (int64_t j = 0; j < 2 * batch; ++j) {  // pair j: radius from words[2j], angle from words[2j + 1]
        const float radius = std::sqrt(-2.0f * jk::log_positive(uniform_hi23(words[2 * j])));
        float c, sn;
        jk::cos_sin_two_pi(uniform_hi23(words[2 * j + 1]), &c, &sn);
        out[2 * j] = radius * c;
        out[2 * j + 1] = radius * sn;
      }
    } else {
      static_assert(kPer == 8, "4 or 8 normals per Philox call");
      for (int64_t j = 0; j < 4 * batch; ++j) {  // word j is a pair, as in normals_of
        const float radius = std::sqrt(-2.0f * jk::log_positive(uniform_hi16(words[j])));
        circle_point<14, 15>(words[j], radius, &out[2 * j], &out[2 * j + 1]);
      }
    }
  }
}

// mean + std * z is computed as m + std * z with m = NaN where std < 0 (on CUDA the op cannot raise
// without a host sync, so that column comes out NaN).
template <typename P>
C10_HOST_DEVICE inline P mean_or_nan(P mean, P std) {
  return std >= P(0) ? mean : P(NAN);
}

// Unsigned keys whose order is the selection order of cem_update: ascending score
// (descending when maximize), NaN last whatever the direction, -0.0 == +0.0.
// Equal keys are broken by the lower index, like a stable sort.
template <typename K, typename F>
C10_HOST_DEVICE inline K order_key(F score, bool maximize) {
  static_assert(sizeof(K) == sizeof(F), "key and score widths differ");
  if (score != score) return ~K(0);
  if (score == F(0)) score = F(0);  // -0.0 -> +0.0
  const K bits = same_bits<K>(score);
  constexpr K kSign = K(1) << (8 * sizeof(K) - 1);
  const K key = (bits & kSign) ? ~bits : (bits | kSign);  // IEEE order as unsigned order
  return maximize ? ~key : key;  // no number maps to ~0, so NaN stays last
}

// The key type and the float the score is read as: 32 bits for float/half/bf16, 64 for double.
template <typename S>
struct KeyOf {
  using key = uint32_t;
  using real = float;
};
template <>
struct KeyOf<double> {
  using key = uint64_t;
  using real = double;
};

// The old value blended with the fitted one; std floored at min_std (NaN stays NaN).
template <typename A>
C10_HOST_DEVICE inline void blend(A fit_mean, A fit_std, A old_mean, A old_std, A smoothing, A min_std,
                                  A* new_mean, A* new_std) {
  *new_mean = smoothing * old_mean + (A(1) - smoothing) * fit_mean;
  A s = old_std >= A(0) ? smoothing * old_std + (A(1) - smoothing) * fit_std : A(NAN);
  *new_std = s < min_std ? min_std : s;
}

}  // namespace sampling
