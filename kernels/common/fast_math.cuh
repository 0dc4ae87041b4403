// Sine and cosine by polynomials on the FMA pipe, for the CPU loops (they vectorize where std::sin
// and std::cos are scalar calls): the ebm energies' cos_pi/sin_pi of any argument (on the GPU those
// are MUFU ops after an exact reduction) and sampling's Box-Muller (sincos of a quarter turn; on the
// GPU the 16-bit path's sine and cosine are MUFU ops, sampling.h says why).
// cos_pi_float, sin_pi_float, sincos_quarter, exp_float and exp_polynomial serve the host too (vectorizable CPU
// loops).
#pragma once
#include <c10/macros/Macros.h>

#include <cmath>
#include <cstdint>

#include "bits.h"

namespace jk {

// a·b + c: fmaf on the device; on the host a multiply and an add, since without -mfma fmaf is a
// library call and keeps the CPU loops scalar.
C10_HOST_DEVICE inline float mul_add(float a, float b, float c) {
#ifdef __CUDA_ARCH__
  return fmaf(a, b, c);
#else
  return a * b + c;
#endif
}

// sin(x) and cos(x) for |x| <= π/4, within about 1 ulp of float (Cephes' sinf/cosf minimax
// polynomials: 9 FMA-pipe instructions for both, where __sincosf takes 2 MUFU ops). The host runs
// the same polynomials, so its Box-Muller loops vectorize (std::sin and std::cos are scalar calls).
C10_HOST_DEVICE inline void sincos_quarter(float x, float* s, float* c) {
  const float z = x * x;
  float p = mul_add(z, -1.9515295891e-4f, 8.3321608736e-3f);
  p = mul_add(z, p, -1.6666654611e-1f);
  *s = mul_add(x * z, p, x);
  float q = mul_add(z, 2.443315711809948e-5f, -1.388731625493765e-3f);
  q = mul_add(z, q, 4.166664568298827e-2f);
  q = mul_add(z, q, -0.5f);
  *c = mul_add(z, q, 1.0f);
}

// e^x within about 2 ulp of float for x in [-87.3, 88.72] (float's normal range: above it the result overflows
// to inf, as expf's; below it the result is float's subnormal, rounded once, as expf's, and 0 below -103.97;
// NaN stays NaN): x = n ln2 + r, |r| <= ln2/2 (n = rint(x / ln2), ln2 in two parts so r is exact), Cephes'
// expf polynomial for e^r, and 2^n put into the exponent bits as 2^(n/2)·2^(n - n/2), both normal for n in
// [-150, 128]: 128 is one past float's largest exponent (a clamp at 88 had kept n <= 127 and gave e^88 =
// 1.65e38 for every x in (88, 88.72], up to 2x off: Ackley with b < 0, session 47), and a clamp at -87 gave
// e^-87 = 1.6e-38 for every smaller x (Ackley's score with c = 0, up to 1e4x off; session 48).
// Branch-free, so the CPU loops that call it vectorize (std::exp is a scalar library call).
// p(r) of Cephes' expf polynomial, e^r = 1 + r + r²·p(r) for |r| <= ln2 / 2.
C10_HOST_DEVICE inline float exp_polynomial(float r) {
  float p = 1.9875691500e-4f;
  p = mul_add(p, r, 1.3981999507e-3f);
  p = mul_add(p, r, 8.3334519073e-3f);
  p = mul_add(p, r, 4.1665795894e-2f);
  p = mul_add(p, r, 1.6666665459e-1f);
  return mul_add(p, r, 5.0000001201e-1f);
}

C10_HOST_DEVICE inline float exp_float(float x) {
  x = x > 89.0f ? 89.0f : x;  // n <= 128: e^89 overflows to inf in the product below
  x = x < -104.0f ? -104.0f : x;  // n >= -150: e^-104 rounds to 0 in the product below
  const float n = (x * 1.44269504089f + 12582912.0f) - 12582912.0f;  // rint for |x / ln2| < 2^22
  const float r = mul_add(n, 2.12194440e-4f, mul_add(n, -0.693359375f, x));
  const float e_r = mul_add(exp_polynomial(r), r * r, r + 1.0f);
  // n in [-150, 128]: both factors normal, the first product exact, the second rounded once if subnormal. A NaN x
  // (the clamps keep it) converts n = 0, not NaN, to an integer: that conversion is undefined behaviour (session 53's
  // sanitizer review; x86 gave INT_MIN), and e_r carries the NaN to the result anyway.
  const int32_t whole = static_cast<int32_t>(n == n ? n : 0.0f);
  const int32_t half = whole >> 1;
  const float scale_a = same_bits<float>(static_cast<uint32_t>(half + 127) << 23);
  const float scale_b = same_bits<float>(static_cast<uint32_t>(whole - half + 127) << 23);
  return e_r * scale_a * scale_b;
}

// cos(πt) and sin(πt) of any float t. The argument reduction of a multiple of π is exact and
// cheap: t = n + r with n an integer and |r| <= ½ (r is exact), cos(πt) = (−1)ⁿcos(πr),
// sin(πt) = (−1)ⁿsin(πr). On the host: the Taylor polynomials of cos(πr) and sin(πr)/r in r²
// through (πr)¹³ (truncation < 1e-9 for |πr| <= π/2, a few 1e-7 in all after rounding), n by
// std::rint (one vroundps with SSE4.1, which the loader's -mavx2 implies; a library call without)
// and the sign by flipping the sign bit, so g++ vectorizes the CPU loops (Rastrigin's score:
// 38 ms with std::sin, 6.6 ms vectorized, 4M floats on one thread; rint instead of an integer
// conversion and a step, session 30: B = 32768, D = 16, 2 cores, Rastrigin energy 184 -> 110 us,
// score 145 -> 80). It also needs -fno-trapping-math (loader.py). On the GPU: the MUFU unit
// (radians_within_a_half_turn).

// t = n + r with n an integer and |r| <= ½: returns r and sets *odd to n's parity (0 or 1). Host.
inline float reduce_half_turns(float t, int* odd) {
  // Floats of |t| >= 2^23 are integers: r = t − n is 0, or NaN for Inf and NaN (as std::cos and std::sin
  // give); n's parity by int conversion where that is defined, and beyond 2^31 every float is even.
  const float n = std::rint(t);
  *odd = static_cast<int>(std::fabs(n) < 2147483520.0f ? n : 0.0f) & 1;
  return t - n;
}

// (−1)ⁿ·p for n's parity `odd`: p with its sign bit flipped when n is odd. Host.
inline float with_parity(float p, int odd) {
  return same_bits<float>(same_bits<uint32_t>(p) ^ (static_cast<uint32_t>(odd) << 31));
}

#ifdef __CUDA_ARCH__
// On the GPU: t half-turns are t/2 turns; less the nearest whole number of turns (exact) that is r
// in [−½, ½] turns, and cos.approx / sin.approx (one MUFU op after a multiply) of 2πr in [−π, π],
// where their absolute error is below 2^-20.5: 6 instructions where the polynomial takes 13, which
// is what kept Rastrigin's and Ackley's float energies from the memory rate (session 17). Inf and
// NaN give NaN; floats of |t| >= 2^24 are even integers: r = 0.
__device__ __forceinline__ float radians_within_a_half_turn(float t) {
  const float turns = 0.5f * t;
  return 6.283185307179586f * (turns - rintf(turns));
}
#endif

C10_HOST_DEVICE inline float cos_pi_float(float t) {
#ifdef __CUDA_ARCH__
  float c;
  asm("cos.approx.ftz.f32 %0, %1;" : "=f"(c) : "f"(radians_within_a_half_turn(t)));
  return c;
#else
  int odd;
  const float r = reduce_half_turns(t, &odd), z = r * r;
  float p = 1.929574297e-03f;
  p = mul_add(p, z, -2.580689080e-02f);
  p = mul_add(p, z, 2.353306264e-01f);
  p = mul_add(p, z, -1.335262775e+00f);
  p = mul_add(p, z, 4.058712006e+00f);
  p = mul_add(p, z, -4.934802055e+00f);
  p = mul_add(p, z, 1.0f);
  return with_parity(p, odd);
#endif
}

C10_HOST_DEVICE inline float sin_pi_float(float t) {
#ifdef __CUDA_ARCH__
  float s;
  asm("sin.approx.ftz.f32 %0, %1;" : "=f"(s) : "f"(radians_within_a_half_turn(t)));
  return s;
#else
  int odd;
  const float r = reduce_half_turns(t, &odd), z = r * r;
  float p = 4.663027939e-04f;
  p = mul_add(p, z, -7.370430976e-03f);
  p = mul_add(p, z, 8.214588463e-02f);
  p = mul_add(p, z, -5.992645025e-01f);
  p = mul_add(p, z, 2.550163984e+00f);
  p = mul_add(p, z, -5.167712688e+00f);
  p = mul_add(p, z, 3.141592741e+00f);
  return with_parity(p * r, odd);
#endif
}

}  // namespace jk
