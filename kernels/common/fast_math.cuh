// Sine and cosine on the FMA pipe, for kernels where the MUFU unit (16 results per clock per SM, a
// sixteenth of the FMA rate; MUFU.SIN/COS/LG2/SQRT all share it) is what limits. Shared by the ebm
// energies (cos_pi/sin_pi of any argument) and sampling's Box-Muller (sincos of a quarter turn).
// Host code sees only what it can compile: the device functions sit under __CUDA_ARCH__.
#pragma once
#include <c10/macros/Macros.h>

#include <cmath>

namespace jk {

// sin(x) and cos(x) for |x| <= π/4, within about 1 ulp of float (Cephes' sinf/cosf minimax
// polynomials: 9 FMA-pipe instructions for both, where __sincosf takes 2 MUFU ops). The host
// computes them with std::sin/std::cos.
C10_HOST_DEVICE inline void sincos_quarter(float x, float* s, float* c) {
#ifdef __CUDA_ARCH__
  const float z = x * x;
  float p = fmaf(z, -1.9515295891e-4f, 8.3321608736e-3f);
  p = fmaf(z, p, -1.6666654611e-1f);
  *s = fmaf(x * z, p, x);
  float q = fmaf(z, 2.443315711809948e-5f, -1.388731625493765e-3f);
  q = fmaf(z, q, 4.166664568298827e-2f);
  q = fmaf(z, q, -0.5f);
  *c = fmaf(z, q, 1.0f);
#else
  *s = std::sin(x);
  *c = std::cos(x);
#endif
}

#ifdef __CUDA_ARCH__
// cos(πt) and sin(πt) of any float t. The argument reduction of a multiple of π is exact and
// cheap: t = n + r with n = rint(t), |r| <= ½ (r is exact), cos(πt) = (−1)ⁿcos(πr),
// sin(πt) = (−1)ⁿsin(πr). Float: the Taylor polynomials of cos(πr) and sin(πr)/r in r² through
// (πr)¹³ (truncation < 1e-9 for |πr| <= π/2, a few 1e-7 in all after rounding), about 12
// instructions where cospif/sinpif (which evaluate both polynomials and select) take about 22.

// (−1)ⁿ as the sign of p, for n = rint(t) (|n| >= 2^25 is even: floats there are even integers).
__device__ __forceinline__ float times_parity(float p, float n) {
  const float h = 0.5f * n;
  return h != rintf(h) ? -p : p;
}

__device__ __forceinline__ float cos_pi_float(float t) {
  const float n = rintf(t), r = t - n, z = r * r;
  float p = 1.929574297e-03f;
  p = fmaf(p, z, -2.580689080e-02f);
  p = fmaf(p, z, 2.353306264e-01f);
  p = fmaf(p, z, -1.335262775e+00f);
  p = fmaf(p, z, 4.058712006e+00f);
  p = fmaf(p, z, -4.934802055e+00f);
  p = fmaf(p, z, 1.0f);
  return times_parity(p, n);
}

__device__ __forceinline__ float sin_pi_float(float t) {
  const float n = rintf(t), r = t - n, z = r * r;
  float p = 4.663027939e-04f;
  p = fmaf(p, z, -7.370430976e-03f);
  p = fmaf(p, z, 8.214588463e-02f);
  p = fmaf(p, z, -5.992645025e-01f);
  p = fmaf(p, z, 2.550163984e+00f);
  p = fmaf(p, z, -5.167712688e+00f);
  p = fmaf(p, z, 3.141592741e+00f);
  return times_parity(p * r, n);
}
#endif

}  // namespace jk
