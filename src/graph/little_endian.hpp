// Values stored little-endian in weight files, read independently of the host's byte order, and
// the 16-bit float formats widened to float32 (exactly: every half and bfloat16 value, subnormals,
// infinities and NaN payloads included, has a float32 equal to it).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace fusednn {

inline uint16_t load_le_u16(const unsigned char* p) {
  return static_cast<uint16_t>(p[0] | (p[1] << 8));
}

inline uint32_t load_le_u32(const unsigned char* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
         (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
}

inline uint64_t load_le_u64(const unsigned char* p) {
  return static_cast<uint64_t>(load_le_u32(p)) | (static_cast<uint64_t>(load_le_u32(p + 4)) << 32);
}

inline float float_from_bits(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

inline float load_le_float32(const unsigned char* p) { return float_from_bits(load_le_u32(p)); }

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

// bfloat16 is the upper half of a float32.
inline float bfloat16_to_float(uint16_t value) {
  return float_from_bits(static_cast<uint32_t>(value) << 16);
}

}  // namespace fusednn
