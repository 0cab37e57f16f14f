// SPDX-License-Identifier: Apache-2.0
// The element types a caller may pass run inputs and outputs in (fdnn_dtype), on the host: the
// checks of a raw value and the conversions to and from the float32 every backend runs on.
// Widening is exact; narrowing rounds to nearest even (common/half_float.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "common/error.hpp"
#include "common/half_float.hpp"
#include "common/raw_enum.hpp"
#include "fusednn/fusednn.h"

namespace fusednn {

// The caller's value as an fdnn_dtype; INVALID_ARGUMENT naming `argument` when it is not one.
inline fdnn_dtype checked_dtype(const fdnn_dtype& value, const char* argument) {
  const int32_t raw = raw_enum_value(value);
  switch (raw) {
    case FDNN_DTYPE_FLOAT32:
    case FDNN_DTYPE_FLOAT16:
    case FDNN_DTYPE_BFLOAT16: return static_cast<fdnn_dtype>(raw);
    default:
      fail(FDNN_STATUS_INVALID_ARGUMENT, argument, " has unknown value ", raw,
           "; use FDNN_DTYPE_FLOAT32, FDNN_DTYPE_FLOAT16 or FDNN_DTYPE_BFLOAT16");
  }
}

inline const char* dtype_name(fdnn_dtype dtype) {
  switch (dtype) {
    case FDNN_DTYPE_FLOAT16: return "float16";
    case FDNN_DTYPE_BFLOAT16: return "bfloat16";
    default: return "float32";
  }
}

// Bytes per element of a checked dtype.
inline size_t dtype_bytes(fdnn_dtype dtype) {
  return dtype == FDNN_DTYPE_FLOAT32 ? sizeof(float) : sizeof(uint16_t);
}

// count elements of `dtype` at x into float32 at y (exact).
inline void widen_to_float(const void* x, fdnn_dtype dtype, float* y, size_t count) {
  if (dtype == FDNN_DTYPE_FLOAT32) {
    std::memcpy(y, x, count * sizeof(float));
    return;
  }
  const auto* bits = static_cast<const uint16_t*>(x);
  if (dtype == FDNN_DTYPE_FLOAT16) {
    for (size_t i = 0; i < count; ++i) y[i] = half_to_float(bits[i]);
  } else {
    for (size_t i = 0; i < count; ++i) y[i] = bfloat16_to_float(bits[i]);
  }
}

// count float32 values at x into `dtype` at y (round to nearest even; overflow to infinity).
inline void narrow_from_float(const float* x, void* y, fdnn_dtype dtype, size_t count) {
  if (dtype == FDNN_DTYPE_FLOAT32) {
    std::memcpy(y, x, count * sizeof(float));
    return;
  }
  auto* bits = static_cast<uint16_t*>(y);
  if (dtype == FDNN_DTYPE_FLOAT16) {
    for (size_t i = 0; i < count; ++i) bits[i] = float_to_half(x[i]);
  } else {
    for (size_t i = 0; i < count; ++i) bits[i] = float_to_bfloat16(x[i]);
  }
}

}  // namespace fusednn
