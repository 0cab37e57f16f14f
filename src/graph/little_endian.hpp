// SPDX-License-Identifier: Apache-2.0
// Values stored little-endian in weight files, read independently of the host's byte order. The
// 16-bit float formats' conversions live in common/half_float.hpp.
#pragma once

#include <cstdint>
#include <cstring>

#include "common/half_float.hpp"

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

inline float load_le_float32(const unsigned char* p) { return float_from_bits(load_le_u32(p)); }

}  // namespace fusednn
