#include <cstdint>
#include <cstring>
#include <cstdio>
#include <chrono>
#include <vector>
#include <cmath>
#include <algorithm>
static inline float widen(uint16_t h) { uint32_t b = uint32_t(h) << 16; float f; memcpy(&f, &b, 4); return f; }
static inline uint16_t narrow(float f) {
  if (std::isnan(f)) return 0x7fc0;
  uint32_t u; memcpy(&u, &f, 4);
  return uint16_t((u + ((u >> 16) & 1) + 0x7fff) >> 16);
}
static inline uint16_t narrow_nobranch(float f) {
  uint32_t u; memcpy(&u, &f, 4);
  uint16_t r = uint16_t((u + ((u >> 16) & 1) + 0x7fff) >> 16);
  return f != f ? uint16_t(0x7fc0) : r;
}
__attribute__((noinline)) void chunked(const uint16_t* x, const uint16_t* y, uint16_t* out, int64_t n, float bias) {
  constexpr int64_t K = 512;
  float wx[K], wy[K], r[K];
  for (int64_t c = 0; c < n; c += K) {
    int64_t m = std::min(K, n - c);
    for (int64_t j = 0; j < m; ++j) wx[j] = widen(x[c + j]);
    for (int64_t j = 0; j < m; ++j) wy[j] = widen(y[c + j]);
    for (int64_t j = 0; j < m; ++j) r[j] = std::max(wx[j], 0.f) + wy[j] + bias;
    for (int64_t j = 0; j < m; ++j) out[c + j] = narrow(r[j]);
  }
}
__attribute__((noinline)) void fused(const uint16_t* x, const uint16_t* y, uint16_t* out, int64_t n, float bias) {
  for (int64_t j = 0; j < n; ++j) out[j] = narrow(std::max(widen(x[j]), 0.f) + widen(y[j]) + bias);
}
__attribute__((noinline)) void fused_nb(const uint16_t* x, const uint16_t* y, uint16_t* out, int64_t n, float bias) {
  for (int64_t j = 0; j < n; ++j) out[j] = narrow_nobranch(std::max(widen(x[j]), 0.f) + widen(y[j]) + bias);
}
__attribute__((noinline)) void f32(const float* x, const float* y, float* out, int64_t n, float bias) {
  for (int64_t j = 0; j < n; ++j) out[j] = std::max(x[j], 0.f) + y[j] + bias;
}
template <class F> double timeit(F f) { auto t0 = std::chrono::steady_clock::now(); for (int k = 0; k < 10; ++k) f(); return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / 10; }
int main() {
  const int64_t n = 1 << 21;
  std::vector<uint16_t> x(n), y(n), o1(n), o2(n), o3(n);
  std::vector<float> xf(n), yf(n), of(n);
  for (int64_t i = 0; i < n; ++i) { x[i] = uint16_t(i * 2654435761u >> 16); y[i] = uint16_t(i * 40503u); xf[i] = widen(x[i]); yf[i] = widen(y[i]); }
  for (int rep = 0; rep < 3; ++rep) {
    double a = timeit([&] { chunked(x.data(), y.data(), o1.data(), n, 0.5f); });
    double b = timeit([&] { fused(x.data(), y.data(), o2.data(), n, 0.5f); });
    double c = timeit([&] { fused_nb(x.data(), y.data(), o3.data(), n, 0.5f); });
    double d = timeit([&] { f32(xf.data(), yf.data(), of.data(), n, 0.5f); });
    printf("chunked %.0f fused %.0f fused_nobranch %.0f f32 %.0f us; same %d %d\n", a, b, c, d, (int)(o1 == o2), (int)(o1 == o3));
  }
}
