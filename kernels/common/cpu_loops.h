// The CPU elementwise loop, written once: at::parallel_for over contiguous data.
#pragma once
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <utility>

// x86-64 with GCC or Clang: the 16-bit loop has an AVX-512 form, chosen at run time (cpu_loop).
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(__CUDACC__)
#define JK_CPU_AVX512 1
#endif

#if defined(__AVX__) || defined(JK_CPU_AVX512)
#include <immintrin.h>
#endif

#include "bits.h"
#include "env_flag.h"

namespace jk {

constexpr int64_t kCpuGrain = 32768;  // elements per task: small tensors stay on one thread

// op(wide[0][j], wide[1][j], ...)
template <typename Op, size_t kInputs, size_t kChunk, size_t... I>
float apply_to_column(const Op& op, const float (&wide)[kInputs][kChunk], int64_t j, std::index_sequence<I...>) {
  return static_cast<float>(op(wide[I][j]...));
}

template <typename T>
constexpr bool kReducedFloat = std::is_same_v<T, c10::Half> || std::is_same_v<T, c10::BFloat16>;

// float16 <-> float without branches (c10::Half's own conversions branch where the build lacks F16C).
// Same results as c10's: exact widening, narrowing rounded to nearest even, infinities kept, NaN to
// a quiet NaN with its sign. jk::widen / jk::narrow below convert chunks faster with F16C.
inline float widen_half(uint16_t h) {
  const uint32_t magnitude = h & 0x7fffu;
  // normal: exponent and mantissa moved to float's places, the exponent rebiased by 112 (an integer add).
  // subnormal (m 2^-24): 2^-14 (1 + m 2^-10) - 2^-14, exact, through normal floats only: rebiasing by a
  // multiply went through a float32 subnormal, which the CPU's denormals-are-zero mode
  // (torch.set_flush_denormal(True)) read as 0.
  const uint32_t normal = (magnitude << 13) + 0x38000000u;
  const float subnormal = same_bits<float>((magnitude << 13) + 0x38800000u) - same_bits<float>(0x38800000u);
  const uint32_t value = magnitude < 0x0400u ? same_bits<uint32_t>(subnormal) : normal;
  const uint32_t special = magnitude >= 0x7c00u ? 0x7f800000u : 0u;  // infinity or NaN: exponent all ones
  return same_bits<float>(value | special | (static_cast<uint32_t>(h & 0x8000u) << 16));
}

inline uint16_t narrow_half(float f) {
  const uint32_t bits = same_bits<uint32_t>(f), sign = (bits >> 16) & 0x8000u, magnitude = bits & 0x7fffffffu;
  // below 2^-14 (subnormal or zero): adding 0.5 lines the 10 kept bits up at the bottom of the float and
  // rounds them to nearest even in the FPU
  const uint32_t subnormal = same_bits<uint32_t>(same_bits<float>(magnitude) + 0.5f) - 0x3f000000u;
  // normal: rebias the exponent, round to nearest even by adding 0xfff plus the kept mantissa's lowest bit
  const uint32_t normal = (magnitude + 0xc8000fffu + ((magnitude >> 13) & 1u)) >> 13;
  const uint32_t huge = magnitude > 0x7f800000u ? 0x7e00u : 0x7c00u;  // NaN or (rounded to) infinity
  const uint32_t out = magnitude >= 0x477ff000u ? huge : magnitude < 0x38800000u ? subnormal : normal;
  return static_cast<uint16_t>(out | sign);
}

inline float to_float(c10::Half v) { return widen_half(v.x); }
inline float to_float(c10::BFloat16 v) { return static_cast<float>(v); }
// A value of T as its opmath type A (the 16-bit types through to_float), the inverse of from_opmath.
template <typename A, typename T>
inline A to_opmath(T v) {
  if constexpr (kReducedFloat<T>) {
    return to_float(v);
  } else {
    return static_cast<A>(v);
  }
}
// An opmath value (float; double for double) stored as T: float16 by narrow_half (so the loop
// vectorizes), the other types by a cast.
template <typename T, typename A>
inline T from_opmath(A v) {
  if constexpr (std::is_same_v<T, c10::Half>) {
    return c10::Half(narrow_half(static_cast<float>(v)), c10::Half::from_bits());
  } else {
    return static_cast<T>(v);
  }
}

#if defined(__AVX__)
// 8 values of T as floats (exact), and back (rounded to nearest even: c10's results, with bfloat16 NaN
// to 0x7fc0): float32 as is, bfloat16 by shifts (AVX2), float16 by F16C's conversions (the loader adds
// -mavx2 -mfma -mf16c on hosts with them). kVector8<T>: whether T has both here.
inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
inline void store8(float* p, __m256 v) { _mm256_storeu_ps(p, v); }
#if defined(__AVX2__)
inline __m256 load8(const c10::BFloat16* p) {
  const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
}
// 8 floats rounded to bfloat16, each in the low half of its 32-bit lane.
inline __m256i bfloat16_bits8(__m256 v) {
  const __m256i bits = _mm256_castps_si256(v);
  const __m256i bias = _mm256_add_epi32(_mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(1)),
                                        _mm256_set1_epi32(0x7fff));
  const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(bits, bias), 16);
  const __m256 nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
  return _mm256_blendv_epi8(rounded, _mm256_set1_epi32(0x7fc0), _mm256_castps_si256(nan));
}
inline void store8(c10::BFloat16* p, __m256 v) {
  const __m256i rounded = bfloat16_bits8(v);
  const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(rounded, rounded), 0x08);  // 8 words, in order
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_castsi256_si128(packed));
}
#endif
#if defined(__F16C__)
inline __m256 load8(const c10::Half* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline void store8(c10::Half* p, __m256 v) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
}
#endif
template <typename T>
constexpr bool kVector8 = std::is_same_v<T, float>
#if defined(__AVX2__)
                          || std::is_same_v<T, c10::BFloat16>
#endif
#if defined(__F16C__)
                          || std::is_same_v<T, c10::Half>
#endif
    ;
#endif

// m values of T in their opmath type A (float for the 16-bit types), and back (rounded to nearest
// even). float16 goes 8 at a time through F16C (load8 / store8) where the build has it: ~8x faster than
// the scalar forms, c10's included (0.05 against 0.4 ns a value, session 21). bfloat16's plain loops
// vectorize by themselves, and 8 at a time by hand was 3-8% slower on long runs (session 35).
template <typename T, typename A>
inline void widen(const T* in, A* out, int64_t m) {
  int64_t j = 0;
#if defined(__F16C__)
  if constexpr (std::is_same_v<T, c10::Half> && std::is_same_v<A, float>) {
    for (; j + 8 <= m; j += 8) _mm256_storeu_ps(out + j, load8(in + j));
  }
#endif
  for (; j < m; ++j) out[j] = to_opmath<A>(in[j]);
}

template <typename T, typename A>
inline void narrow(const A* in, T* out, int64_t m) {
  int64_t j = 0;
#if defined(__F16C__)
  if constexpr (std::is_same_v<T, c10::Half> && std::is_same_v<A, float>) {
    for (; j + 8 <= m; j += 8) store8(out + j, _mm256_loadu_ps(in + j));
  }
#endif
  for (; j < m; ++j) out[j] = from_opmath<T>(in[j]);
}

// A segment of up to kMax values of T seen as opmath values (float for the 16-bit types): for the
// 16-bit types a buffer, widened from memory by read() or narrowed into it by store(); for float and
// double the memory itself, with no copy. Lets a segment loop run on plain float arrays, which the
// compiler vectorizes, instead of converting element by element.
template <typename T, int64_t kMax>
struct OpmathSegment {
  using A = at::opmath_type<T>;
  A buffer[kReducedFloat<T> ? kMax : 1];

  const A* read(const T* p, int64_t m) {
    if constexpr (kReducedFloat<T>) {
      widen(p, buffer, m);
      return buffer;
    } else {
      return p;
    }
  }
  // Where to write the values that store(p, m) then puts at p.
  A* target(T* p) {
    if constexpr (kReducedFloat<T>) {
      return buffer;
    } else {
      return p;
    }
  }
  void store(T* p, int64_t m) {
    if constexpr (kReducedFloat<T>) narrow(buffer, p, m);
  }
};

#if defined(JK_CPU_AVX512)
// Whether to run the AVX-512F loop: this CPU and its OS run AVX-512F code, and JITKERNELS_CPU_AVX512
// is not off (0/false/no/off; asked once; the tests set it to run the AVX2 loop on an AVX-512 machine). The build's flags
// stay the host's AVX2 set (loader.py): AVX-512 flags for every CPU loop made some slower (session 34),
// so only the 16-bit elementwise loop below is built for it, through a target attribute.
inline bool use_cpu_avx512() {
  static const bool use = [] {
    // The variable first: a misspelt value is an error on every x86 machine, not only on AVX-512 ones.
    return jk::env_flag("JITKERNELS_CPU_AVX512", true) && __builtin_cpu_supports("avx512f");
  }();
  return use;
}

// 16 values of T to floats (exact) and back, rounded to nearest even: float16 by the conversion
// instructions (as the F16C path of widen / narrow), bfloat16 by c10's rounding, NaN to 0x7fc0.
__attribute__((target("avx512f"))) inline void widen16(const c10::Half* in, float* out) {
  _mm512_storeu_ps(out, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(in))));
}
__attribute__((target("avx512f"))) inline void widen16(const c10::BFloat16* in, float* out) {
  const __m512i wide = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(in)));
  _mm512_storeu_si512(out, _mm512_slli_epi32(wide, 16));
}
__attribute__((target("avx512f"))) inline void narrow16(const float* in, c10::Half* out) {
  const __m256i half = _mm512_cvtps_ph(_mm512_loadu_ps(in), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), half);
}
__attribute__((target("avx512f"))) inline void narrow16(const float* in, c10::BFloat16* out) {
  const __m512 v = _mm512_loadu_ps(in);
  const __m512i bits = _mm512_castps_si512(v);
  const __m512i bias = _mm512_add_epi32(_mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1)),
                                        _mm512_set1_epi32(0x7fff));
  __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(bits, bias), 16);
  rounded = _mm512_mask_mov_epi32(rounded, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), _mm512_set1_epi32(0x7fc0));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), _mm512_cvtepi32_epi16(rounded));
}

// 16 values of T as floats and back, for the one-pass loop below.
struct Lanes16 {
  static constexpr int64_t kLanes = 16;
  template <typename T>
  __attribute__((target("avx512f"))) static void widen(const T* in, float* out) { widen16(in, out); }
  template <typename T>
  __attribute__((target("avx512f"))) static void narrow(const float* in, T* out) { narrow16(in, out); }
};
#endif

#if defined(__AVX2__) && defined(__F16C__)
// 8 float16 values as floats and back (F16C), for the one-pass loop below.
struct HalfLanes8 {
  static constexpr int64_t kLanes = 8;
  static void widen(const c10::Half* in, float* out) { store8(out, load8(in)); }
  static void narrow(const float* in, c10::Half* out) { store8(out, load8(in)); }
};

// 16 bfloat16 values as floats and back (AVX2), for the one-pass loop below, in the order the 16-bit
// unpacks leave them (each 128-bit half's low four values, then its high four): an elementwise op does
// not mind the order, and the pack in narrow puts the values back in theirs. Narrowing 8 at a time
// instead (store8: a pack and a lane permute per 8) made the one-pass loop slower than the chunked one.
struct BFloat16Lanes16 {
  static constexpr int64_t kLanes = 16;
  static void widen(const c10::BFloat16* in, float* out) {
    const __m256i values = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in)), zero = _mm256_setzero_si256();
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), _mm256_unpacklo_epi16(zero, values));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 8), _mm256_unpackhi_epi16(zero, values));
  }
  static void narrow(const float* in, c10::BFloat16* out) {
    const __m256i low = bfloat16_bits8(_mm256_loadu_ps(in)), high = bfloat16_bits8(_mm256_loadu_ps(in + 8));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), _mm256_packus_epi32(low, high));
  }
};
#endif

// The 16-bit loop in one pass over vectors of Lanes::kLanes values: widen each input's vector, op on
// floats, narrow. One pass keeps the values in registers where the chunked loop stores and reloads them
// (relu_add at 2^21, one thread, chunked -> one pass: with AVX-512, bfloat16 542 -> 409 us and float16
// 462 -> 285 on an AMD EPYC, 907 -> 502 and 752 -> 519 on an H200 host's Xeon, results/session35; with
// AVX2, 1.4-1.7x for both types on the EPYC, 1.8x for float16 on the Xeon, results/session36; the same
// bits).
// `op` by value: a reference's fields were reloaded every vector (the stores to out might have changed them).
template <typename Lanes, typename T, typename Op, typename... In>
inline void cpu_loop16_one_pass(T* out, int64_t n, Op op, const In*... in) {
  constexpr int64_t kLanes = Lanes::kLanes;
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes) {
    float wide[sizeof...(In)][kLanes], result[kLanes];
    int k = 0;
    (Lanes::widen(in + j, wide[k++]), ...);
    for (int64_t e = 0; e < kLanes; ++e) result[e] = apply_to_column(op, wide, e, std::index_sequence_for<In...>{});
    Lanes::narrow(result, out + j);
  }
  for (; j < n; ++j) out[j] = from_opmath<T>(static_cast<float>(op(to_float(in[j])...)));
}

// The one-pass loop's entries, each a function of its own: `flatten` inlines the loop, its conversions
// and the op into it, so all of it is compiled for the entry's target, and the op's loop over the lanes
// vectorizes (inlined into the parallel_for body, relu_add's ran in scalar code with a branch a value:
// 20x slower).
#if defined(JK_CPU_AVX512)
template <typename T, typename Op, typename... In>
__attribute__((target("avx512f"), flatten)) void cpu_loop16_avx512(T* out, int64_t n, Op op, const In*... in) {
  cpu_loop16_one_pass<Lanes16>(out, n, op, in...);
}
#endif
#if defined(__AVX2__) && defined(__F16C__)
template <typename T, typename Op, typename... In>
__attribute__((flatten)) void cpu_loop16_avx2(T* out, int64_t n, Op op, const In*... in) {
  using Lanes = std::conditional_t<std::is_same_v<T, c10::Half>, HalfLanes8, BFloat16Lanes16>;
  cpu_loop16_one_pass<Lanes>(out, n, op, in...);
}
#endif

// Whether PyTorch's CPU convolution and matrix product are fast in `dtype`. For float16 and bfloat16
// they are only through oneDNN: bfloat16 where the CPU has AVX-512 BW, VL and DQ (PyTorch's own test
// for it), float16 with AVX512-FP16, not counted on here. Without it they ran 24-130x slower than in
// float32 (session 35, results/session35: float16 on an AMD EPYC; bfloat16 with oneDNN held to AVX2),
// so the ops that call them (conv1d_gn_mish, the wide Gaussian) convert such inputs to float32.
inline bool cpu_products_fast(at::ScalarType dtype) {
  if (dtype == at::kHalf) return false;
  if (dtype != at::kBFloat16) return true;
#if defined(JK_CPU_AVX512)
  static const bool fast = __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
                           __builtin_cpu_supports("avx512dq");
  return fast;
#else
  return true;  // elsewhere (ARM), PyTorch's bfloat16 products have their own fast paths
#endif
}

// float16 / bfloat16: one pass with AVX-512 where the CPU has it (cpu_loop16_avx512), else with AVX2
// and F16C where the build has them (cpu_loop16_avx2); otherwise (ARM, old x86) a chunk of each input is
// widened to float, the op runs on floats, and the results are narrowed once.
// Each of the three is a plain vectorized loop; op(T...) element by element converted in scalar code
// (float16: 15x slower than torch.compile's loop).
// The same result: an op computes in its opmath type (float) and rounds to T once either way.
template <typename T, typename Op, typename... In>
void cpu_loop(T* out, int64_t n, Op op, const In*... in) {
  at::parallel_for(0, n, kCpuGrain, [&](int64_t begin, int64_t end) {
    if constexpr (kReducedFloat<T>) {
#if defined(JK_CPU_AVX512)
      if (use_cpu_avx512()) return cpu_loop16_avx512(out + begin, end - begin, op, (in + begin)...);
#endif
#if defined(__AVX2__) && defined(__F16C__)
      return cpu_loop16_avx2(out + begin, end - begin, op, (in + begin)...);
#endif
      constexpr int64_t kChunk = 512;
      float wide[sizeof...(In)][kChunk], result[kChunk];
      for (int64_t c = begin; c < end; c += kChunk) {
        const int64_t m = std::min(kChunk, end - c);
        int k = 0;
        (widen(in + c, wide[k++], m), ...);
        for (int64_t j = 0; j < m; ++j) result[j] = apply_to_column(op, wide, j, std::index_sequence_for<In...>{});
        narrow(result, out + c, m);
      }
    } else {
      for (int64_t i = begin; i < end; ++i) out[i] = op(in[i]...);
    }
  });
}

// out[i] = op(inputs[i]...) for contiguous tensors of one dtype T and equal numel.
template <typename T, typename Op, typename... Tensors>
void cpu_elementwise(const at::Tensor& out, Op op, const Tensors&... inputs) {
  cpu_loop<T>(out.mutable_data_ptr<T>(), out.numel(), op, inputs.template const_data_ptr<T>()...);
}

}  // namespace jk
