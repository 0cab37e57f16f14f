// SPDX-License-Identifier: Apache-2.0
// FastDivisor (src/backends/cuda/device/fast_divisor.hpp) against the division operator, on the
// host (the device form differs only in computing the high word with __umulhi).
#include "backends/cuda/device/fast_divisor.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace fusednn::cuda {
namespace {

std::vector<int32_t> dividends() {
  std::vector<int32_t> values;
  for (int32_t n = 0; n < 5000; ++n) values.push_back(n);
  for (int64_t n = 5000; n < INT32_MAX; n = n * 3 / 2 + 7) {
    values.push_back(static_cast<int32_t>(n));
  }
  for (int32_t k = 0; k < 64; ++k) values.push_back(INT32_MAX - k);
  return values;
}

TEST(FastDivisor, MatchesDivisionForSmallDivisors) {
  const std::vector<int32_t> values = dividends();
  for (int32_t d = 1; d <= 2048; ++d) {
    const FastDivisor divisor = make_fast_divisor(d);
    for (int32_t n : values) ASSERT_EQ(divisor.divide(n), n / d) << n << " / " << d;
  }
}

TEST(FastDivisor, MatchesDivisionForLargeDivisorsAndMultiplesOfThem) {
  const std::vector<int32_t> divisors = {
      4095,          4096,      4097,    65535,         65536,         65537,    1 << 20,
      (1 << 20) + 1, 999999937, 1 << 30, (1 << 30) + 1, INT32_MAX - 1, INT32_MAX};
  for (int32_t d : divisors) {
    const FastDivisor divisor = make_fast_divisor(d);
    for (int64_t q = 0; q * d <= INT32_MAX && q < 5000; ++q) {
      for (int64_t r : {int64_t{0}, int64_t{1}, int64_t{d} - 1}) {
        const int64_t n = q * d + r;
        if (n > INT32_MAX) continue;
        ASSERT_EQ(divisor.divide(static_cast<int32_t>(n)), n / d) << n << " / " << d;
      }
    }
    for (int32_t n : dividends()) ASSERT_EQ(divisor.divide(n), n / d) << n << " / " << d;
  }
}

}  // namespace
}  // namespace fusednn::cuda
