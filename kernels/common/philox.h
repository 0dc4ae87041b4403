// Counter-based random numbers (Philox4x32-10) usable on host and device, so CPU
// and CUDA kernels share one generator design. Seeds come from PyTorch's
// generators (see cpu_philox_seed here and philox_cuda.cuh), so torch.manual_seed
// reproduces every draw.
#pragma once
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Generator.h>
#include <c10/macros/Macros.h>

#include <cmath>
#include <cstdint>
#include <mutex>
#include <optional>

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

// Four independent standard normals (Box-Muller on two pairs of uniforms).
C10_HOST_DEVICE inline Float4 normal4(uint64_t seed, uint64_t counter, uint64_t subsequence = 0) {
  const Uint4 r = philox4x32_10(seed, counter, subsequence);
  constexpr float kTwoPi = 6.283185307179586f;
#ifdef __CUDA_ARCH__
  const float radius0 = sqrtf(-2.0f * __logf(uniform_open0(r.x)));
  const float radius1 = sqrtf(-2.0f * __logf(uniform_open0(r.z)));
  float s0, c0, s1, c1;
  __sincosf(kTwoPi * uniform_open0(r.y), &s0, &c0);
  __sincosf(kTwoPi * uniform_open0(r.w), &s1, &c1);
#else
  const float radius0 = std::sqrt(-2.0f * std::log(uniform_open0(r.x)));
  const float radius1 = std::sqrt(-2.0f * std::log(uniform_open0(r.z)));
  const float a0 = kTwoPi * uniform_open0(r.y), a1 = kTwoPi * uniform_open0(r.w);
  const float s0 = std::sin(a0), c0 = std::cos(a0), s1 = std::sin(a1), c1 = std::cos(a1);
#endif
  return Float4{radius0 * c0, radius0 * s0, radius1 * c1, radius1 * s1};
}

// A fresh seed for a CPU op from the (default or given) CPU generator.
inline PhiloxSeed cpu_philox_seed(const std::optional<at::Generator>& generator = std::nullopt) {
  auto* gen = at::get_generator_or_default<at::CPUGeneratorImpl>(generator, at::detail::getDefaultCPUGenerator());
  std::lock_guard<std::mutex> lock(gen->mutex_);
  return PhiloxSeed{gen->random64(), 0};
}

}  // namespace jk
