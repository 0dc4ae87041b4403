// Reading a value's bits as another type of the same width, on host and device.
#pragma once
#include <c10/macros/Macros.h>

#include <cstring>

namespace jk {

// memcpy is the defined way to reinterpret; host and device compilers make it a register move.
template <typename To, typename From>
C10_HOST_DEVICE inline To same_bits(From v) {
  static_assert(sizeof(To) == sizeof(From), "same_bits: the widths differ");
  To out;
  ::memcpy(&out, &v, sizeof(To));
  return out;
}

}  // namespace jk
