// Family `ebm`, C++ half: the CPU loops of the energy and score ops (ebm.cpp's local_rows and gaussian_op
// call local_rows_cpu and gaussian_rows_cpu, declared in ebm_cpu.h), a row object's rows 16 or 8 at a time.
// A file of its own, without jk.h (torch/library.h), so that g++ compiles these instantiations, most of
// ebm.o's code, beside ebm.cpp: on the 2-core dev machine (user+sys) ebm.cpp took 17.0 s with them, 8.9 s
// without, and this file 9.6 s, 2.4 of them its headers (jk.h would add 2.7).
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <type_traits>
#include <vector>

#if defined(__AVX__)
#include <immintrin.h>
#endif

#include "cpu_loops.h"
#include "ebm_cpu.h"

namespace ebm {

#if defined(__AVX__)
// r[i] = column i of the 8 x 8 floats held in rows r[0..8) (an involution): 24 shuffles.
inline void transpose8x8(__m256 (&r)[8]) {
  __m256 t[8], s[8];
  for (int k = 0; k < 4; ++k) {
    t[2 * k] = _mm256_unpacklo_ps(r[2 * k], r[2 * k + 1]);
    t[2 * k + 1] = _mm256_unpackhi_ps(r[2 * k], r[2 * k + 1]);
  }
  for (int k = 0; k < 2; ++k) {
    s[4 * k] = _mm256_shuffle_ps(t[4 * k], t[4 * k + 2], _MM_SHUFFLE(1, 0, 1, 0));
    s[4 * k + 1] = _mm256_shuffle_ps(t[4 * k], t[4 * k + 2], _MM_SHUFFLE(3, 2, 3, 2));
    s[4 * k + 2] = _mm256_shuffle_ps(t[4 * k + 1], t[4 * k + 3], _MM_SHUFFLE(1, 0, 1, 0));
    s[4 * k + 3] = _mm256_shuffle_ps(t[4 * k + 1], t[4 * k + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int k = 0; k < 4; ++k) {
    r[k] = _mm256_permute2f128_ps(s[k], s[k + 4], 0x20);
    r[k + 4] = _mm256_permute2f128_ps(s[k], s[k + 4], 0x31);
  }
}
#endif

// kLanes rows of D elements (row stride D) to lanes and back: lanes[i * kLanes + l] = rows[l * D + i],
// with scale applied (the scores' sign) on the way back. float32 rows, and 16-bit ones converted on the
// way (jk::load8 / jk::store8), go 8 x 8 at a time through AVX registers: element by element, the
// transposition cost more than the energies themselves, and 16-bit rows widened into a buffer first
// were slower (session 35).
template <int64_t kLanes, typename T, typename A>
void rows_to_lanes(const T* rows, int64_t D, A* lanes) {
  int64_t c = 0;
#if defined(__AVX__)
  if constexpr (jk::kVector8<T> && std::is_same_v<A, float> && kLanes % 8 == 0) {
    for (; c + 8 <= D; c += 8)
      for (int64_t l0 = 0; l0 < kLanes; l0 += 8) {
        __m256 r[8];
        for (int l = 0; l < 8; ++l) r[l] = jk::load8(rows + (l0 + l) * D + c);
        transpose8x8(r);
        for (int i = 0; i < 8; ++i) _mm256_storeu_ps(lanes + (c + i) * kLanes + l0, r[i]);
      }
  }
#endif
  for (int64_t i = c; i < D; ++i)  // (i outer, here and below: measured fastest)
    for (int64_t l = 0; l < kLanes; ++l) lanes[i * kLanes + l] = jk::to_opmath<A>(rows[l * D + i]);
}

template <int64_t kLanes, typename T, typename A>
void lanes_to_rows(const A* lanes, int64_t D, A scale, T* rows) {
  int64_t c = 0;
#if defined(__AVX__)
  if constexpr (jk::kVector8<T> && std::is_same_v<A, float> && kLanes % 8 == 0) {
    const __m256 factor = _mm256_set1_ps(scale);
    for (; c + 8 <= D; c += 8)
      for (int64_t l0 = 0; l0 < kLanes; l0 += 8) {
        __m256 r[8];
        for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(lanes + (c + i) * kLanes + l0);
        transpose8x8(r);
        for (int l = 0; l < 8; ++l) jk::store8(rows + (l0 + l) * D + c, _mm256_mul_ps(r[l], factor));
      }
  }
#endif
  for (int64_t i = c; i < D; ++i)
    for (int64_t l = 0; l < kLanes; ++l) rows[l * D + i] = jk::from_opmath<T>(scale * lanes[i * kLanes + l]);
}

// kLanes values to T, 8 at a time through jk::store8 where it has T: a run this short of bfloat16 casts
// stayed scalar (the double-well energy took ~2x float32's time, session 35).
template <int64_t kLanes, typename T, typename A>
void store_lanes(const A* v, T* out) {
#if defined(__AVX__)
  if constexpr (jk::kVector8<T> && std::is_same_v<A, float> && kLanes % 8 == 0) {
    for (int64_t l = 0; l < kLanes; l += 8) jk::store8(out + l, _mm256_loadu_ps(v + l));
    return;
  }
#endif
  for (int64_t l = 0; l < kLanes; ++l) out[l] = jk::from_opmath<T>(v[l]);
}

inline int64_t row_grain(int64_t D) { return std::max<int64_t>(1, jk::kCpuGrain / std::max<int64_t>(D, 1)); }

// Energy (out: (B,)) or score (out: (B, D)) of every row.
template <typename T, typename Rows>
void rows_cpu(const at::Tensor& x, const at::Tensor& out, const Rows& rows, bool score) {
  using A = at::opmath_type<T>;
  const int64_t B = x.size(0), D = x.size(1);
  const T* xp = x.const_data_ptr<T>();
  T* op = out.mutable_data_ptr<T>();
  // The lane-wise loops and the row-by-row one round differently (the former contract a product and a sum into
  // one FMA), so a row's bits depend on its path. Blocks of lanes that started where at::parallel_for cut the
  // batch made them depend on the thread count; the tasks now split the batch at whole blocks, and only its last
  // B % kRowLanes rows go row by row, whatever the thread count. Until session 48 rows wider than 2048 (tasks of
  // fewer than kRowLanes rows) kept the row split, and their energies and scores moved by an ulp with
  // torch.set_num_threads; whole blocks cost nothing measurable there (B = 4096, D = 4096, 1 and 2 threads), and
  // a batch of fewer rows than the threads' blocks leaves threads idle.
  int64_t unit = 1;
  if constexpr (HasLaneRows<Rows, A>::value) unit = Rows::kRowLanes;
  const int64_t grain = std::max<int64_t>(1, row_grain(D) / unit);
  at::parallel_for(0, (B + unit - 1) / unit, grain, [&](int64_t u0, int64_t u1) {
    int64_t begin = u0 * unit;
    const int64_t end = std::min(B, u1 * unit);
    std::vector<A> row(D), g(D);
    if constexpr (HasLaneRows<Rows, A>::value) {  // whole blocks of kLanes rows at once
      constexpr int64_t kLanes = Rows::kRowLanes;
      std::vector<A> x_t(D * kLanes), g_t(score ? D * kLanes : 0);
      A energy[kLanes];
      for (; begin + kLanes <= end; begin += kLanes) {
        rows_to_lanes<kLanes>(xp + begin * D, D, x_t.data());
        if (!score) {
          rows.energies(x_t.data(), D, energy);
          store_lanes<kLanes>(energy, op + begin);
          continue;
        }
        rows.grads(x_t.data(), g_t.data(), D);
        lanes_to_rows<kLanes>(g_t.data(), D, A(-1), op + begin * D);
      }
    }
    for (int64_t r = begin; r < end; ++r) {  // (the rows left after whole blocks)
      jk::widen(xp + r * D, row.data(), D);
      if (!score) {
        op[r] = jk::from_opmath<T>(rows.energy(row.data(), D));
        continue;
      }
      rows.grad(row.data(), g.data(), D);
      for (int64_t i = 0; i < D; ++i) g[i] = -g[i];
      jk::narrow(g.data(), op + r * D, D);
    }
  });
}

void local_rows_cpu(const at::Tensor& x, const at::Tensor& out, const ModelSpec& spec, bool score) {
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "ebm_local_cpu", [&] {
    using A = at::opmath_type<scalar_t>;
    with_local_model<A>(spec.kind, spec.p, [&](auto m) {
      using M = decltype(m);
      if constexpr (!M::kStats && !M::kNeighbours) {
        if (score) {  // separable: each element's score alone, one flat loop the compiler vectorizes
          jk::cpu_elementwise<scalar_t>(out, SeparableScore<M>{m}, x);
          return;
        }
      }
      rows_cpu<scalar_t>(x, out, LocalRows<A, M>{m}, score);
    });
  });
}

void gaussian_rows_cpu(const at::Tensor& x, const at::Tensor& mean, const at::Tensor& precision, const at::Tensor& out,
                       bool score) {
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "ebm_gaussian_cpu", [&] {
    using A = at::opmath_type<scalar_t>;
    rows_cpu<scalar_t>(x, out, GaussRows<A>(mean, precision, x.size(1), static_cast<scalar_t*>(nullptr)), score);
  });
}

}  // namespace ebm
