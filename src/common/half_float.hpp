// SPDX-License-Identifier: Apache-2.0
// The 16-bit float formats the API accepts (IEEE binary16 and bfloat16) and float32, both ways.
// Widening is exact: every half and bfloat16 value, subnormals, infinities and NaN payloads
// included, has a float32 equal to it. Narrowing rounds to nearest, ties to even (as CUDA's
// __float2half_rn / __float2bfloat16_rn do), overflows to infinity and keeps NaN a NaN.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace fusednn {

inline float float_from_bits(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

inline uint32_t bits_of_float(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

// IEEE 754 binary16: 1 sign bit, 5 exponent bits (bias 15), 10 mantissa bits.
inline float half_to_float(uint16_t half) {
  const uint32_t sign = static_cast<uint32_t>(half & 0x8000u) << 16;
  const uint32_t exponent = (half >> 10) & 0x1Fu;
  const uint32_t mantissa = half & 0x3FFu;
  if (exponent == 0x1F) return float_from_bits(sign | 0x7F800000u | (mantissa << 13));  // Inf, NaN
  if (exponent != 0) {
    // Normal: rebias the exponent from 15 to 127.
    return float_from_bits(sign | ((exponent + 112u) << 23) | (mantissa << 13));
  }
  // Zero or subnormal: mantissa * 2^-24, exact in float32.
  const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
  return sign ? -magnitude : magnitude;
}

inline uint16_t float_to_half(float value) {
  const uint32_t bits = bits_of_float(value);
  const auto sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t magnitude = bits & 0x7FFFFFFFu;
  if (magnitude >= 0x7F800000u) {  // Inf stays Inf; NaN keeps its top payload bits, made quiet
    const uint32_t payload = magnitude > 0x7F800000u ? (0x200u | ((magnitude >> 13) & 0x3FFu)) : 0u;
    return static_cast<uint16_t>(sign | 0x7C00u | payload);
  }
  // From halfway between the largest half (65504) and 65536 on, ties to even included, it is Inf.
  if (magnitude >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);
  if (magnitude < 0x38800000u) {
    // Below the smallest normal half (2^-14): a multiple of 2^-24, found by scaling (exact) and
    // rounding to the nearest integer, ties to even; 1024 lands on the smallest normal.
    const float scaled = std::ldexp(float_from_bits(magnitude), 24);
    const float floor_value = std::floor(scaled);
    auto units = static_cast<uint32_t>(floor_value);
    const float rest = scaled - floor_value;
    if (rest > 0.5f || (rest == 0.5f && (units & 1u) != 0)) ++units;
    return static_cast<uint16_t>(sign | units);
  }
  uint32_t half = (((magnitude >> 23) - 112u) << 10) | ((magnitude >> 13) & 0x3FFu);
  const uint32_t rest = magnitude & 0x1FFFu;
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1u) != 0))
    ++half;  // may carry into the exponent
  return static_cast<uint16_t>(sign | half);
}

// bfloat16 is the upper half of a float32.
inline float bfloat16_to_float(uint16_t value) {
  return float_from_bits(static_cast<uint32_t>(value) << 16);
}

inline uint16_t float_to_bfloat16(float value) {
  const uint32_t bits = bits_of_float(value);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  const uint32_t rounding = 0x7FFFu + ((bits >> 16) & 1u);  // ties to even
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

}  // namespace fusednn
