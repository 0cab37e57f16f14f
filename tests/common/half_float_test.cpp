// SPDX-License-Identifier: Apache-2.0
// float32 <-> binary16 / bfloat16 (common/half_float.hpp), checked against the formats'
// definitions over every 16-bit pattern: widening then narrowing is the identity, and every
// point halfway between two neighbouring values narrows to the one with the even last bit while
// its float32 neighbours on either side narrow to the nearer value.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>

#include "common/half_float.hpp"

namespace fusednn {
namespace {

bool is_nan_half(uint16_t h) { return (h & 0x7C00u) == 0x7C00u && (h & 0x3FFu) != 0; }
bool is_nan_bfloat16(uint16_t b) { return (b & 0x7F80u) == 0x7F80u && (b & 0x7Fu) != 0; }

template <typename Widen, typename Narrow, typename IsNan>
void check_format(Widen widen, Narrow narrow, IsNan is_nan, uint16_t infinity, const char* name) {
  SCOPED_TRACE(name);
  int failures = 0;
  for (uint32_t pattern = 0; pattern <= 0xFFFFu && failures < 10; ++pattern) {
    const auto h = static_cast<uint16_t>(pattern);
    const float wide = widen(h);
    if (is_nan(h)) {
      if (!std::isnan(wide) || !is_nan(narrow(wide))) {
        ADD_FAILURE() << "NaN pattern " << std::hex << pattern << " did not stay NaN";
        ++failures;
      }
      continue;
    }
    if (narrow(wide) != h) {
      ADD_FAILURE() << "round trip of " << std::hex << pattern << " gave " << narrow(wide);
      ++failures;
    }
    // The next larger magnitude (same sign); skip the largest finite value and infinity.
    const uint16_t magnitude = h & 0x7FFFu;
    if (magnitude >= infinity - 1) continue;
    const auto next = static_cast<uint16_t>(h + 1);
    const double a = widen(h), b = widen(next);
    const auto midpoint = static_cast<float>((a + b) / 2);  // exact: one more bit than the format
    const uint16_t even = (h & 1u) == 0 ? h : next;
    if (narrow(midpoint) != even) {
      ADD_FAILURE() << "tie between " << std::hex << pattern << " and " << next << " gave "
                    << narrow(midpoint);
      ++failures;
    }
    const float toward_a = std::nextafter(midpoint, static_cast<float>(a));
    const float toward_b = std::nextafter(midpoint, static_cast<float>(b));
    if (narrow(toward_a) != h || narrow(toward_b) != next) {
      ADD_FAILURE() << "neighbours of the tie after " << std::hex << pattern << " gave "
                    << narrow(toward_a) << " and " << narrow(toward_b);
      ++failures;
    }
  }
}

TEST(HalfFloat, Binary16EveryPatternAndEveryTie) {
  check_format(half_to_float, float_to_half, is_nan_half, uint16_t{0x7C00}, "binary16");
}

TEST(HalfFloat, Bfloat16EveryPatternAndEveryTie) {
  check_format(bfloat16_to_float, float_to_bfloat16, is_nan_bfloat16, uint16_t{0x7F80}, "bfloat16");
}

TEST(HalfFloat, OverflowAndUnderflow) {
  const float infinity = std::numeric_limits<float>::infinity();
  EXPECT_EQ(float_to_half(65504.0f), 0x7BFFu);
  EXPECT_EQ(float_to_half(65519.99f), 0x7BFFu);  // below the tie with 65536: the largest half
  EXPECT_EQ(float_to_half(65520.0f), 0x7C00u);   // the tie rounds to even: infinity
  EXPECT_EQ(float_to_half(1e9f), 0x7C00u);
  EXPECT_EQ(float_to_half(-1e9f), 0xFC00u);
  EXPECT_EQ(float_to_half(infinity), 0x7C00u);
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -25)), 0x0000u);  // half the smallest subnormal: even
  EXPECT_EQ(float_to_half(std::ldexp(1.5f, -25)), 0x0001u);
  EXPECT_EQ(float_to_half(-0.0f), 0x8000u);
  EXPECT_EQ(float_to_half(1e-30f), 0x0000u);
  EXPECT_EQ(float_to_bfloat16(3.4028235e38f), 0x7F80u);  // rounds up past the largest bfloat16
  EXPECT_EQ(float_to_bfloat16(-infinity), 0xFF80u);
  EXPECT_EQ(float_to_bfloat16(1.0f), 0x3F80u);
}

}  // namespace
}  // namespace fusednn
