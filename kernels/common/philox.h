// Counter-based random numbers (Philox4x32-10) usable on host and device, so CPU
// and CUDA kernels share one generator design. Seeds come from PyTorch's
// generators (philox_seeds.h, host only), so torch.manual_seed reproduces every draw.
// No tensor or generator header here: .cu files include this.
#pragma once
#include <c10/macros/Macros.h>

#include <cmath>
#include <cstdint>

#include "bits.h"
#include "fast_math.cuh"

#if defined(__AVX2__) && !defined(__CUDACC__)
#include <immintrin.h>
#endif

namespace jk {

struct PhiloxSeed {
  uint64_t seed;
  uint64_t offset;  // in 32-bit draws already used; counters start at offset / 4
};

struct Uint4 {
  uint32_t x, y, z, w;
};

// On the device two 32-bit multiplies: the 64-bit product compiled to a wide multiply plus an
// extra add, and that alone cost sampling.normal a quarter of its time on an H200.
C10_HOST_DEVICE inline uint32_t mulhilo32(uint32_t a, uint32_t b, uint32_t* hi) {
#ifdef __CUDA_ARCH__
  *hi = __umulhi(a, b);
  return a * b;
#else
  const uint64_t product = static_cast<uint64_t>(a) * b;
  *hi = static_cast<uint32_t>(product >> 32);
  return static_cast<uint32_t>(product);
#endif
}

// Philox4x32's round keys advance by these (the Weyl sequence of the key schedule).
constexpr uint32_t kPhiloxKeyStep0 = 0x9E3779B9u, kPhiloxKeyStep1 = 0xBB67AE85u;

// One Philox4x32 round under the round keys (k0, k1).
C10_HOST_DEVICE inline Uint4 philox_round(const Uint4& c, uint32_t k0, uint32_t k1) {
  uint32_t hi0, hi1;
  const uint32_t lo0 = mulhilo32(0xD2511F53u, c.x, &hi0);
  const uint32_t lo1 = mulhilo32(0xCD9E8D57u, c.z, &hi1);
  return Uint4{hi1 ^ c.y ^ k0, lo1, hi0 ^ c.w ^ k1, lo0};
}

// Four independent 32-bit draws for (seed, counter, subsequence).
C10_HOST_DEVICE inline Uint4 philox4x32_10(uint64_t seed, uint64_t counter, uint64_t subsequence) {
  Uint4 c{static_cast<uint32_t>(counter), static_cast<uint32_t>(counter >> 32),
          static_cast<uint32_t>(subsequence), static_cast<uint32_t>(subsequence >> 32)};
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
#pragma unroll
  for (int round = 0; round < 10; ++round) {
    c = philox_round(c, k0, k1);
    k0 += kPhiloxKeyStep0;
    k1 += kPhiloxKeyStep1;
  }
  return c;
}

// (0, 1]: never 0, so log() is finite.
C10_HOST_DEVICE inline float uniform_open0(uint32_t bits) {
  return (static_cast<float>(bits >> 8) + 1.0f) * (1.0f / 16777216.0f);
}

struct Float4 {
  float x, y, z, w;
};

// Box-Muller's radius sqrt(-2 ln u) for u in (0, 1]. On the device one MUFU op each for the log and
// the root (sqrtf and __logf are longer sequences, sqrtf with a slow-path branch; u is never
// subnormal, so .ftz changes nothing): -2 ln u = -2 ln 2 * log2 u.
C10_HOST_DEVICE inline float box_muller_radius(float u) {
#ifdef __CUDA_ARCH__
  float log2_u, radius;
  asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(log2_u) : "f"(u));
  asm("sqrt.approx.ftz.f32 %0, %1;" : "=f"(radius) : "f"(-1.3862943611198906f * log2_u));
  return radius;
#else
  return std::sqrt(-2.0f * std::log(u));
#endif
}

// r times (cos 2πa, sin 2πa): Box-Muller's point for a uniform a (a MUFU sin and cos on the device).
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

// Four independent standard normals (Box-Muller on two pairs of uniforms).
C10_HOST_DEVICE inline Float4 normal4(uint64_t seed, uint64_t counter, uint64_t subsequence = 0) {
  const Uint4 r = philox4x32_10(seed, counter, subsequence);
  Float4 z;
  circle_point_mufu(uniform_open0(r.y), box_muller_radius(uniform_open0(r.x)), &z.x, &z.y);
  circle_point_mufu(uniform_open0(r.w), box_muller_radius(uniform_open0(r.z)), &z.z, &z.w);
  return z;
}

// ---- The CPU's batch form of normal4: the same draws, in a form the compiler vectorizes.
// std::log / std::sin / std::cos are scalar library calls (one element at a time, ~4x slower than
// PyTorch's vectorized randn on the CPU); these branch-free float polynomials (Cephes' logf, sinf and
// cosf, about 1 ulp) vectorize in a plain loop. Host only.

// log(u) for a normal float u > 0: u = m·2^e with m in [√½, √2), log(1 + f) by a polynomial in f.
// Selections are bit operations, so the loop stays free of branches.
inline float log_positive(float u) {
  const uint32_t bits = same_bits<uint32_t>(u);
  const uint32_t mantissa = bits & 0x007fffffu;
  const uint32_t below = mantissa < 0x003504f3u ? 1u : 0u;  // 1.mantissa < √2: take m in [1, √2)
  const int32_t e = static_cast<int32_t>(bits >> 23) - 127 - static_cast<int32_t>(below) + 1;
  const float m = same_bits<float>(mantissa | (0x3f000000u + (below << 23)));  // [√½, 1) or [1, √2)
  const float f = m - 1.0f;
  const float z = f * f;
  float p = 7.0376836292e-2f;
  p = p * f - 1.1514610310e-1f;
  p = p * f + 1.1676998740e-1f;
  p = p * f - 1.2420140846e-1f;
  p = p * f + 1.4249322787e-1f;
  p = p * f - 1.6668057665e-1f;
  p = p * f + 2.0000714765e-1f;
  p = p * f - 2.4999993993e-1f;
  p = p * f + 3.3333331174e-1f;
  return f + (f * z * p - 0.5f * z) + static_cast<float>(e) * 0.69314718056f;
}

// (cos 2πa, sin 2πa) for a in [0, 1]: 4a = n + r with n = rint(4a), |r| <= ½ (exact), the
// quarter-turn polynomials (jk::sincos_quarter) at x = r·π/2, turned by n quarter turns (swap, then
// signs, as bits).
inline void cos_sin_two_pi(float a, float* c, float* s) {
  const float t = 4.0f * a;
  const float n = (t + 12582912.0f) - 12582912.0f;  // rint(t) for |t| < 2^22 (round to nearest)
  float sin_x, cos_x;
  sincos_quarter((t - n) * 1.5707963268f, &sin_x, &cos_x);
  const uint32_t quarter = static_cast<uint32_t>(static_cast<int32_t>(n));  // θ = x + quarter·π/2
  const uint32_t swap = 0u - (quarter & 1u);                                // all ones: cos θ = ∓sin x
  const uint32_t sin_bits = same_bits<uint32_t>(sin_x), cos_bits = same_bits<uint32_t>(cos_x);
  const uint32_t c0 = (cos_bits & ~swap) | (sin_bits & swap), s0 = (sin_bits & ~swap) | (cos_bits & swap);
  *c = same_bits<float>(c0 ^ (((quarter + 1u) & 2u) << 30));  // negative in quarters 1 and 2
  *s = same_bits<float>(s0 ^ ((quarter & 2u) << 30));         // negative in quarters 2 and 3
}

// The CPU's batch draws fill a buffer of Philox words, then run their maths over it in a loop that
// vectorizes. words[4i + k] = lane k of philox4x32_10(seed, first + i, subsequence), for i < count.
constexpr int64_t kPhiloxBatchCpu = 64;  // calls whose words wait in the buffer (1 KB) for the maths

#if defined(__AVX2__) && !defined(__CUDACC__)
// Eight Philox calls side by side in AVX2 registers, call j in lane j of the counter words c0..c3 (the results
// replace them): the compiler does not vectorize the scalar loop, which took 2-3x as long (the CPU's draws
// spent most of their time there). vpmuludq multiplies the even 32-bit lanes into 64-bit products, so each
// multiply is done for the even and the odd lanes, then the products' low and high words are blended back.
inline void philox8_avx2(uint64_t seed, __m256i& c0, __m256i& c1, __m256i& c2, __m256i& c3) {
  const __m256i m0 = _mm256_set1_epi32(static_cast<int>(0xD2511F53u));
  const __m256i m1 = _mm256_set1_epi32(static_cast<int>(0xCD9E8D57u));
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  for (int round = 0; round < 10; ++round) {  // philox_round, lane by lane
    const __m256i even0 = _mm256_mul_epu32(c0, m0), odd0 = _mm256_mul_epu32(_mm256_srli_epi64(c0, 32), m0);
    const __m256i even1 = _mm256_mul_epu32(c2, m1), odd1 = _mm256_mul_epu32(_mm256_srli_epi64(c2, 32), m1);
    const __m256i lo0 = _mm256_blend_epi32(even0, _mm256_slli_epi64(odd0, 32), 0xAA);
    const __m256i hi0 = _mm256_blend_epi32(_mm256_srli_epi64(even0, 32), odd0, 0xAA);
    const __m256i lo1 = _mm256_blend_epi32(even1, _mm256_slli_epi64(odd1, 32), 0xAA);
    const __m256i hi1 = _mm256_blend_epi32(_mm256_srli_epi64(even1, 32), odd1, 0xAA);
    c0 = _mm256_xor_si256(_mm256_xor_si256(hi1, c1), _mm256_set1_epi32(static_cast<int>(k0)));
    c2 = _mm256_xor_si256(_mm256_xor_si256(hi0, c3), _mm256_set1_epi32(static_cast<int>(k1)));
    c1 = lo1;
    c3 = lo0;
    k0 += kPhiloxKeyStep0;
    k1 += kPhiloxKeyStep1;
  }
}

// value + j in lane j (j < 8), as its low and high 32-bit words, the carry into the high word included.
inline void plus_lane_index8(uint64_t value, __m256i* low, __m256i* high) {
  const __m256i sign = _mm256_set1_epi32(static_cast<int>(0x80000000u));  // unsigned compare by signed one
  const __m256i value_low = _mm256_set1_epi32(static_cast<int>(static_cast<uint32_t>(value)));
  *low = _mm256_add_epi32(value_low, _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  const __m256i wrapped = _mm256_cmpgt_epi32(_mm256_xor_si256(value_low, sign), _mm256_xor_si256(*low, sign));
  *high = _mm256_sub_epi32(_mm256_set1_epi32(static_cast<int>(static_cast<uint32_t>(value >> 32))), wrapped);
}

inline __m256i broadcast_low(uint64_t value) {
  return _mm256_set1_epi32(static_cast<int>(static_cast<uint32_t>(value)));
}
inline __m256i broadcast_high(uint64_t value) { return broadcast_low(value >> 32); }

// The words of the eight calls first + j, j < 8, of one subsequence, call by call (as philox_words_cpu).
inline void philox_words8_avx2(uint64_t seed, uint64_t first, uint32_t* words, uint64_t subsequence) {
  __m256i c0, c1, c2 = broadcast_low(subsequence), c3 = broadcast_high(subsequence);
  plus_lane_index8(first, &c0, &c1);
  philox8_avx2(seed, c0, c1, c2, c3);
  // Lanes (c0..c3 of call j in lane j) to calls' words in order: a 4 x 8 transpose.
  const __m256i t0 = _mm256_unpacklo_epi32(c0, c1), t1 = _mm256_unpackhi_epi32(c0, c1);
  const __m256i t2 = _mm256_unpacklo_epi32(c2, c3), t3 = _mm256_unpackhi_epi32(c2, c3);
  const __m256i calls04 = _mm256_unpacklo_epi64(t0, t2), calls15 = _mm256_unpackhi_epi64(t0, t2);
  const __m256i calls26 = _mm256_unpacklo_epi64(t1, t3), calls37 = _mm256_unpackhi_epi64(t1, t3);
  __m256i* out = reinterpret_cast<__m256i*>(words);
  _mm256_storeu_si256(out, _mm256_permute2x128_si256(calls04, calls15, 0x20));
  _mm256_storeu_si256(out + 1, _mm256_permute2x128_si256(calls26, calls37, 0x20));
  _mm256_storeu_si256(out + 2, _mm256_permute2x128_si256(calls04, calls15, 0x31));
  _mm256_storeu_si256(out + 3, _mm256_permute2x128_si256(calls26, calls37, 0x31));
}
#endif

// Call `counter` of the subsequences first + l, l < kLanes (rows side by side), word-major:
// words[k * kLanes + l] = word k of subsequence first + l. The shape the CPU chains' lanes take their draws in.
template <int64_t kLanes>
inline void philox_lanes_cpu(uint64_t seed, uint64_t counter, uint64_t first, uint32_t* words) {
#if defined(__AVX2__) && !defined(__CUDACC__)
  if constexpr (kLanes % 8 == 0) {
    for (int64_t l = 0; l < kLanes; l += 8) {
      __m256i c0 = broadcast_low(counter), c1 = broadcast_high(counter), c2, c3;
      plus_lane_index8(first + static_cast<uint64_t>(l), &c2, &c3);
      philox8_avx2(seed, c0, c1, c2, c3);
      const __m256i result[4] = {c0, c1, c2, c3};
      for (int k = 0; k < 4; ++k) _mm256_storeu_si256(reinterpret_cast<__m256i*>(words + k * kLanes + l), result[k]);
    }
    return;
  }
#endif
  for (int64_t l = 0; l < kLanes; ++l) {
    const Uint4 r = philox4x32_10(seed, counter, first + static_cast<uint64_t>(l));
    words[l] = r.x;
    words[kLanes + l] = r.y;
    words[2 * kLanes + l] = r.z;
    words[3 * kLanes + l] = r.w;
  }
}

inline void philox_words_cpu(uint64_t seed, uint64_t first, int64_t count, uint32_t* words, uint64_t subsequence = 0) {
  int64_t i = 0;
#if defined(__AVX2__) && !defined(__CUDACC__)
  for (; i + 8 <= count; i += 8) philox_words8_avx2(seed, first + static_cast<uint64_t>(i), words + 4 * i, subsequence);
#endif
  for (; i < count; ++i) {
    const Uint4 r = philox4x32_10(seed, first + static_cast<uint64_t>(i), subsequence);
    words[4 * i] = r.x;
    words[4 * i + 1] = r.y;
    words[4 * i + 2] = r.z;
    words[4 * i + 3] = r.w;
  }
}

// A Box-Muller pair from two words: radius from the first, angle from the second.
inline void normal_pair_cpu(uint32_t radius_word, uint32_t angle_word, float* z0, float* z1) {
  const float radius = std::sqrt(-2.0f * log_positive(uniform_open0(radius_word)));
  float c, s;
  cos_sin_two_pi(uniform_open0(angle_word), &c, &s);
  *z0 = radius * c;
  *z1 = radius * s;
}

// The normals of kLanes calls' words, word-major (philox_lanes_cpu's shape): z[k * kLanes + l] = lane k of
// normal4 of subsequence first + l's call.
template <int64_t kLanes>
inline void normal4_of_lane_words_cpu(const uint32_t* words, float* z) {
  for (int pair = 0; pair < 2; ++pair)
    for (int64_t l = 0; l < kLanes; ++l) {
      const int64_t k = 2 * pair * kLanes + l;
      normal_pair_cpu(words[k], words[k + kLanes], &z[k], &z[k + kLanes]);
    }
}

// z[4i + k] = lane k of normal4 of the Philox call whose words are words[4i, 4i + 4), for i < count.
inline void normal4_of_words_cpu(const uint32_t* words, int64_t count, float* z) {
  for (int64_t j = 0; j < 2 * count; ++j) normal_pair_cpu(words[2 * j], words[2 * j + 1], &z[2 * j], &z[2 * j + 1]);
}

// z[4i + k] = lane k of normal4(seed, first + i, subsequence) (up to the polynomials' rounding),
// for i < count.
inline void normal4_batch_cpu(uint64_t seed, uint64_t first, int64_t count, float* z, uint64_t subsequence = 0) {
  uint32_t bits[4 * kPhiloxBatchCpu];
  for (int64_t done = 0; done < count; done += kPhiloxBatchCpu) {
    const int64_t blocks = count - done < kPhiloxBatchCpu ? count - done : kPhiloxBatchCpu;
    philox_words_cpu(seed, first + static_cast<uint64_t>(done), blocks, bits, subsequence);
    normal4_of_words_cpu(bits, blocks, z + 4 * done);
  }
}

}  // namespace jk
