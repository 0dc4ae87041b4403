// The math of the fused ops, shared by the CPU (fused.cpp) and CUDA (fused.cu) kernels.
#pragma once
#include <c10/macros/Macros.h>

#include "opmath.h"

namespace fused {

// relu(x) + y + bias, accumulated in float for half types; relu keeps NaN like torch.relu.
struct ReluAdd {
  double bias;

  template <typename T>
  C10_HOST_DEVICE T operator()(T x, T y) const {
    using acc_t = jk::opmath_t<T>;
    const acc_t xv = static_cast<acc_t>(x);
    const acc_t relu = (xv > acc_t(0) || xv != xv) ? xv : acc_t(0);
    return static_cast<T>(relu + static_cast<acc_t>(y) + static_cast<acc_t>(bias));
  }
};

}  // namespace fused
