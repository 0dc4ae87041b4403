// The type the math runs in: float for the 16-bit types, the type itself otherwise (what
// at::opmath_type gives for our dtypes; ATen/OpMathType.h costs nvcc ~3 s a file, so .cu files and
// the headers they share with the .cpp use this).
#pragma once
#include <type_traits>

namespace jk {

template <typename T>
using opmath_t = std::conditional_t<(sizeof(T) < sizeof(float)), float, T>;

}  // namespace jk
