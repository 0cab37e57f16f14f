// SPDX-License-Identifier: Apache-2.0

#include "backends/cpu/softmax.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "cpu_test_support.hpp"

namespace fusednn::cpu::testing {
namespace {

// y = exp(x - max) / sum exp(x - max) per row, in double.
std::vector<double> reference_softmax(const std::vector<float>& x, int64_t rows, int64_t size) {
  std::vector<double> y(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = x.data() + r * size;
    const double max = *std::max_element(row, row + size);
    double sum = 0;
    for (int64_t i = 0; i < size; ++i) sum += std::exp(row[i] - max);
    for (int64_t i = 0; i < size; ++i) y[r * size + i] = std::exp(row[i] - max) / sum;
  }
  return y;
}

// [1, 2, 3]: exp(x - 3) = [e^-2, e^-1, 1] = [0.1353352832, 0.3678794412, 1], sum 1.5032147244,
// so y = [0.0900305732, 0.2447284711, 0.6652409558].
// [1000, 1000]: [0.5, 0.5] (without subtracting the max, exp(1000) overflows to inf and inf / inf
// is NaN). [-inf, 0]: [0, 1]. One element: [1].
TEST(CpuSoftmax, HandComputed) {
  const float inf = std::numeric_limits<float>::infinity();
  struct Case {
    std::vector<float> x, want;
  };
  const Case cases[] = {
      {{1, 2, 3}, {0.0900305732f, 0.2447284711f, 0.6652409558f}},
      {{1000, 1000}, {0.5f, 0.5f}},
      {{-inf, 0}, {0, 1}},
      {{-7}, {1}},
  };
  for (const Case& c : cases) {
    std::vector<float> y = poisoned(c.x.size());
    softmax_forward(c.x.data(), y.data(), 1, static_cast<int64_t>(c.x.size()));
    EXPECT_TRUE(near_values(y, c.want)) << "first input " << c.x[0];
    std::vector<float> in_place = c.x;
    softmax_forward(in_place.data(), in_place.data(), 1, static_cast<int64_t>(c.x.size()));
    EXPECT_TRUE(near_values(in_place, c.want)) << "in place, first input " << c.x[0];
  }
}

TEST(CpuSoftmax, MatchesReferenceOnRandomData) {
  Random random;
  for (int64_t size : {1, 5, 8, 9, 10, 1000, 4099}) {
    for (int64_t rows : {1, 3, 32, 257}) {
      // Logits up to +-30: wide enough that the max subtraction matters for the small terms.
      const std::vector<float> x =
          random.uniform_vector(static_cast<size_t>(rows * size), -30.0f, 30.0f);
      const std::vector<double> want = reference_softmax(x, rows, size);
      std::vector<float> y = poisoned(x.size());
      softmax_forward(x.data(), y.data(), rows, size);
      EXPECT_TRUE(near_reference(y, want)) << "rows " << rows << ", size " << size;

      std::vector<float> in_place = x;
      softmax_forward(in_place.data(), in_place.data(), rows, size);
      EXPECT_TRUE(near_reference(in_place, want)) << "in place, rows " << rows << ", size " << size;
    }
  }
}

}  // namespace
}  // namespace fusednn::cpu::testing
