// The math of the sampling ops, shared by the CPU (sampling.cpp) and CUDA (sampling.cu) kernels.
#pragma once
#include <c10/macros/Macros.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "philox.h"

namespace sampling {

// Element i of the flattened (n, d) output of `normal` uses draw i % 4 of Philox group
// i / 4, on CPU and CUDA alike, so every element gets its own independent N(0, 1).
C10_HOST_DEVICE inline jk::Float4 normal_group(const jk::PhiloxSeed& s, uint64_t group) {
  return jk::normal4(s.seed, s.offset / 4 + group, 0);
}

// mean + std * z; a negative std gives NaN (on CUDA the op cannot raise without a host sync).
template <typename P>
C10_HOST_DEVICE inline P affine(P mean, P std, float z) {
  return std >= P(0) ? mean + std * static_cast<P>(z) : P(NAN);
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
