// SPDX-License-Identifier: Apache-2.0
// A C enum read as its integer. Callers of the C API may pass any value, and loading an
// out-of-range value as the enum type is undefined behaviour in C++.
#pragma once

#include <cstdint>
#include <cstring>

namespace fusednn {

template <typename Enum>
int32_t raw_enum_value(const Enum& value) {
  static_assert(sizeof(Enum) == sizeof(int32_t), "C enums are int-sized on supported targets");
  int32_t raw;
  std::memcpy(&raw, &value, sizeof raw);
  return raw;
}

}  // namespace fusednn
