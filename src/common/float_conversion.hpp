// binary16 and bfloat16 to binary32, exact for every input (subnormals, infinities, NaN).
#pragma once

#include <cstdint>
#include <cstring>

namespace fusednn {

inline float float_from_bits(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

inline float bfloat16_to_float(uint16_t bits) { return float_from_bits(uint32_t(bits) << 16); }

inline float half_to_float(uint16_t bits) {
  const uint32_t sign = uint32_t(bits & 0x8000u) << 16;
  const uint32_t exponent = (bits >> 10) & 0x1fu;
  const uint32_t mantissa = bits & 0x3ffu;
  if (exponent == 0x1f) return float_from_bits(sign | 0x7f800000u | (mantissa << 13));
  if (exponent != 0) return float_from_bits(sign | ((exponent + 112) << 23) | (mantissa << 13));
  // Zero or subnormal: mantissa * 2^-24, exact in binary32.
  const float magnitude = float(mantissa) * (1.0f / 16777216.0f);
  return sign ? -magnitude : magnitude;
}

}  // namespace fusednn
