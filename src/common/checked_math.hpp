// SPDX-License-Identifier: Apache-2.0
// Sizes computed from a file or an option, with overflow detected: every product and sum that
// counts elements or bytes of something a model file or a caller chose goes through these. On
// overflow they throw the library's StatusError with the given status and a message that names
// the quantity, so a huge extent or max_batch becomes a status, never a wrapped size.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "common/error.hpp"

namespace fusednn {

// a * b, or fail(status, what..., " overflows: a x b") when the product does not fit in T.
template <typename T, typename... Parts>
T checked_multiply(T a, T b, fdnn_status status, const Parts&... what) {
  static_assert(std::is_integral_v<T>, "checked_multiply: integers only");
  T product;
  if (__builtin_mul_overflow(a, b, &product)) {
    fail(status, what..., " overflows: ", a, " x ", b);
  }
  return product;
}

// a + b, or fail(status, what..., " overflows: a + b").
template <typename T, typename... Parts>
T checked_add(T a, T b, fdnn_status status, const Parts&... what) {
  static_assert(std::is_integral_v<T>, "checked_add: integers only");
  T sum;
  if (__builtin_add_overflow(a, b, &sum)) {
    fail(status, what..., " overflows: ", a, " + ", b);
  }
  return sum;
}

// A non-negative int64_t count of `element_bytes`-byte elements as a byte count in size_t.
template <typename... Parts>
size_t checked_bytes(int64_t count, size_t element_bytes, fdnn_status status,
                     const Parts&... what) {
  if (count < 0) fail(status, what..., " is negative: ", count);
  return checked_multiply(static_cast<size_t>(count), element_bytes, status, what...);
}

}  // namespace fusednn
