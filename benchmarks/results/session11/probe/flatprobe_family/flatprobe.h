#pragma once
#include <ATen/OpMathType.h>
#include <c10/macros/Macros.h>
namespace flatprobe {
struct Neg {
  float k;
  template <typename T>
  C10_HOST_DEVICE T operator()(T x) const { return static_cast<T>(-k * static_cast<at::opmath_type<T>>(x)); }
};
struct Add {
  template <typename T>
  C10_HOST_DEVICE T operator()(T x, T y) const { return static_cast<T>(static_cast<float>(x) + static_cast<float>(y)); }
};
template <typename M>
struct Wrap {
  M m;
  template <typename T>
  C10_HOST_DEVICE T operator()(T x) const { return m(x); }
};
}
