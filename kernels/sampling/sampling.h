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
// (one 32-bit uniform per Box-Muller input) for float32/float64 outputs, 8 (16-bit uniforms, plenty
// for a 16-bit result; |z| <= 4.7) for float16/bfloat16, so a 16-bit output costs half the Philox work.
template <typename T>
constexpr int normals_per_call() {
  return sizeof(T) == 2 ? 8 : 4;
}

C10_HOST_DEVICE inline float bits_as_float(uint32_t bits) {
#ifdef __CUDA_ARCH__
  return __uint_as_float(bits);
#else
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
#endif
}

// A uniform in (0, 1] from the top 23 bits: 2 - [1, 2) built from the mantissa (no int->float convert).
C10_HOST_DEVICE inline float uniform_hi23(uint32_t bits) {
  return 2.0f - bits_as_float(0x3f800000u | (bits >> 9));
}

// A uniform in (0, 1] from 16 bits (the low half of `bits`): steps of 2^-16.
C10_HOST_DEVICE inline float uniform_lo16(uint32_t bits) {
  return 2.0f - bits_as_float(0x3f800000u | ((bits & 0xffffu) << 7));
}

// Box-Muller: two independent N(0, 1) from a radius uniform u in (0, 1] and an angle uniform a.
C10_HOST_DEVICE inline void box_muller(float u, float a, float* z0, float* z1) {
  constexpr float kTwoPi = 6.283185307179586f;
#ifdef __CUDA_ARCH__
  // One MUFU op each (the compiler's sqrtf is the IEEE sequence); -2 ln u = -2 ln2 * log2 u.
  float radius;
  asm("sqrt.approx.ftz.f32 %0, %1;" : "=f"(radius) : "f"(-1.3862943611198906f * __log2f(u)));
  float s, c;
  __sincosf(kTwoPi * a, &s, &c);
#else
  const float radius = std::sqrt(-2.0f * std::log(u));
  const float s = std::sin(kTwoPi * a), c = std::cos(kTwoPi * a);
#endif
  *z0 = radius * c;
  *z1 = radius * s;
}

// The kPer normals of Philox call `call` (counter offset / 4 + call of the op's reserved range).
template <int kPer>
C10_HOST_DEVICE inline void normals(const jk::PhiloxSeed& s, uint64_t call, float* z) {
  const jk::Uint4 r = jk::philox4x32_10(s.seed, s.offset / 4 + call, 0);
  if constexpr (kPer == 4) {
    box_muller(uniform_hi23(r.x), uniform_hi23(r.y), &z[0], &z[1]);
    box_muller(uniform_hi23(r.z), uniform_hi23(r.w), &z[2], &z[3]);
  } else {
    static_assert(kPer == 8, "4 or 8 normals per Philox call");
    const uint32_t w[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
    for (int q = 0; q < 4; ++q) box_muller(uniform_lo16(w[q]), uniform_lo16(w[q] >> 16), &z[2 * q], &z[2 * q + 1]);
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
  K bits;
#ifdef __CUDA_ARCH__
  bits = *reinterpret_cast<const K*>(&score);
#else
  std::memcpy(&bits, &score, sizeof(K));
#endif
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
