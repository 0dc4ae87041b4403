// The math of the sampling ops, shared by the CPU (sampling.cpp) and CUDA (sampling.cu) kernels.
#pragma once
#include <c10/macros/Macros.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "philox.h"

namespace sampling {

// Draws for `normal`. Element i of the flattened (n, d) output is lane i % kPer of Philox call
// i / kPer, on CPU and CUDA alike, so every element gets its own independent N(0, 1): kPer = 4
// (32 bits per Box-Muller input) for float32/float64 outputs, 8 (16 bits per input, plenty for a
// 16-bit result; |z| <= 4.86) for float16/bfloat16, so a 16-bit output costs half the Philox work.
//
// Box-Muller: z = r (cos θ, sin θ), r = sqrt(-2 ln u). On the GPU log2, sqrt, sin and cos are one
// MUFU op each (16 results per clock per SM, a warp instruction per 8 clocks per scheduler). 32-bit
// outputs: writing memory is what limits. 16-bit outputs: the SASS instruction count is (307 us
// at n=65536, d=5000 with ~180 instructions per Philox call of 8 normals; an earlier build with
// MUFU sin/cos and ~177 took 301 us, so sin/cos polynomials on the FMA pipe, which saved 2 MUFU ops
// per pair, did not pay for their ~13 more instructions). So a 16-bit pair takes the fewest
// instructions (normal_pair16): θ's 16 bits under a fixed exponent, one FFMA to radians, MUFU sin
// and cos; the radius without its constant factor sqrt(2 ln 2), which the callers fold into std
// (normal_scale). That is ~106 instructions and 16 MUFU ops per call (128 MUFU clocks per warp).
// The CPU takes the same bits through vectorizable polynomials (jk::log_positive, jk::cos_sin_two_pi).
template <typename T>
constexpr int normals_per_call() {
  return sizeof(T) == 2 ? 8 : 4;
}

// What the draws of normals_of<kPer> are to be multiplied by (folded into std by the caller).
template <int kPer>
constexpr float normal_scale() {
  return kPer == 8 ? 1.1774100225154747f : 1.0f;  // sqrt(2 ln 2)
}

using jk::same_bits;

// A uniform in (0, 1] from the top 23 bits: 2 - [1, 2) built from the mantissa (no int->float convert).
C10_HOST_DEVICE inline float uniform_hi23(uint32_t bits) {
  return 2.0f - same_bits<float>(0x3f800000u | (bits >> 9));
}

// A uniform in (0, 1) from the top 16 bits k: (k + ½) 2^-16, exactly. f = 2^7 + k 2^-16 from the
// mantissa, then f - (2^7 - 2^-17) (exact: both are representable, and so is the difference).
C10_HOST_DEVICE inline float uniform_hi16(uint32_t bits) {
  return same_bits<float>(0x43000000u + (bits >> 16)) - (128.0f - 0.00000762939453125f);
}

using jk::box_muller_radius;  // 32-bit outputs' radius and angle (16-bit ones: normal_pair16)
using jk::circle_point_mufu;

// The Box-Muller pair of one Philox word for 16-bit outputs, divided by normal_scale<8>():
// sqrt(-log2 u) (cos θ, sin θ), u = (k + ½) 2^-16 from the top 16 bits k, θ = 2π j 2^-16 + δ from the
// low 16 bits j. (θ's grid has 2^16 points, as u's has; -log2 u <= 17, so |z| <= 4.86.)
// δ = 2^-14 radians (0.64 of the grid's spacing) turns the grid off the quarter turns, where cos or sin
// is exactly 0: without it 1 in 2^15 16-bit outputs was exactly 0 (a true normal rounded to 16 bits
// almost never is). A turned grid of 2^16 points still has cos and sin summing to 0, and on the GPU δ
// costs nothing: it moves the FFMA's constant by one float step.
constexpr float kTwoPi16 = 6.283185307179586f;
constexpr float kAngleTurn16 = 0.00006103515625f;  // δ = 2^-14, the float step of 128 * 2π
C10_HOST_DEVICE inline void normal_pair16(uint32_t bits, float* z0, float* z1) {
  const float u = uniform_hi16(bits);
  float r, s, c;
#ifdef __CUDA_ARCH__
  // f = 2^7 + j 2^-16: the bits of 0x43000000 | (bits & 0xffff) in one PRMT (not two LOP3s).
  const float f = same_bits<float>(__byte_perm(bits, 0x43000000u, 0x7410));
  // Four MUFU ops: lg2, sqrt (of the negation: an operand modifier, no instruction), sin and cos.
  float log2_u;
  asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(log2_u) : "f"(u));
  asm("sqrt.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(-log2_u));
  // θ = (f - 2^7) 2π + δ, rounded once (-2^7 2π + δ is a float: one step above -2^7 2π)
  __sincosf(fmaf(f, kTwoPi16, -128.0f * kTwoPi16 + kAngleTurn16), &s, &c);
#else
  const float f = same_bits<float>(0x43000000u | (bits & 0xffffu));
  r = std::sqrt(-1.4426950408889634f * jk::log_positive(u));  // log2 u = ln u / ln 2
  jk::cos_sin_two_pi((f - 128.0f) + kAngleTurn16 / kTwoPi16, &c, &s);  // j 2^-16 turns (exact), + δ
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

  // The four draws of Philox counter `counter` (first_counter + the call's number).
  C10_HOST_DEVICE jk::Uint4 at_counter(uint64_t counter) const {
    jk::Uint4 c{static_cast<uint32_t>(counter), static_cast<uint32_t>(counter >> 32), 0u, 0u};
#pragma unroll
    for (int round = 0; round < 10; ++round) c = jk::philox_round(c, k0[round], k1[round]);
    return c;
  }
};

// The kPer normals of one Philox call's draws r, times 1 / normal_scale<kPer>(). 32-bit: pairs
// (x, y), (z, w): radius from x's top 23 bits, angle from y's. 16-bit: each word is a pair
// (normal_pair16).
template <int kPer>
C10_HOST_DEVICE inline void normals_of(const jk::Uint4& r, float* z) {
  if constexpr (kPer == 4) {
    circle_point_mufu(uniform_hi23(r.y), box_muller_radius(uniform_hi23(r.x)), &z[0], &z[1]);
    circle_point_mufu(uniform_hi23(r.w), box_muller_radius(uniform_hi23(r.z)), &z[2], &z[3]);
  } else {
    static_assert(kPer == 8, "4 or 8 normals per Philox call");
    const uint32_t w[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
    for (int q = 0; q < 4; ++q) normal_pair16(w[q], &z[2 * q], &z[2 * q + 1]);
  }
}

// The CPU's batch form of normals_of<kPer> for calls [first_call, first_call + calls) of the op's
// reserved range: the same Philox words and the same maths, with the logarithm, sine and cosine
// as branch-free float polynomials (jk::log_positive, jk::cos_sin_two_pi) in loops the compiler
// vectorizes. Per call, std::log / std::sin / std::cos were scalar library calls: ~10 ns a normal
// on one thread, against ~3 ns for eager torch.randn. Host only.
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
      for (int64_t j = 0; j < 4 * batch; ++j) normal_pair16(words[j], &out[2 * j], &out[2 * j + 1]);
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
