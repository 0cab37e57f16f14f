// SPDX-License-Identifier: Apache-2.0

#include "backends/cpu/concat.hpp"

#include <gtest/gtest.h>

#include <vector>

#include "cpu_test_support.hpp"

namespace fusednn::cpu::testing {
namespace {

// Outer 2; a = [[1, 2], [3, 4]] (inner 2), b = [[5], [6]] (inner 1), an empty input (inner 0),
// c = [[7, 8, 9], [10, 11, 12]] (inner 3): each outer row is a's row, b's, c's:
// [1, 2, 5, 7, 8, 9, 3, 4, 6, 10, 11, 12].
TEST(CpuConcat, HandComputed) {
  const std::vector<float> a = {1, 2, 3, 4}, b = {5, 6}, c = {7, 8, 9, 10, 11, 12};
  const float* inputs[] = {a.data(), b.data(), nullptr, c.data()};
  const int64_t inner[] = {2, 1, 0, 3};
  std::vector<float> y = poisoned(12);
  concat_forward(inputs, inner, 4, y.data(), 2);
  EXPECT_TRUE(near_values(y, {1, 2, 5, 7, 8, 9, 3, 4, 6, 10, 11, 12}));
}

TEST(CpuConcat, MatchesReferenceOnRandomData) {
  Random random;
  const std::vector<std::vector<int64_t>> layouts = {{1}, {3, 5}, {17, 1, 64}, {100, 28, 0, 9}};
  for (const std::vector<int64_t>& inner : layouts) {
    for (int64_t outer : {1, 3, 32, 257}) {
      std::vector<std::vector<float>> inputs;
      std::vector<const float*> pointers;
      int64_t total = 0;
      for (int64_t size : inner) {
        inputs.push_back(random.uniform_vector(static_cast<size_t>(outer * size)));
        total += size;
      }
      for (const std::vector<float>& input : inputs) pointers.push_back(input.data());
      // y[o][offset_k + i] = inputs[k][o][i].
      std::vector<double> want;
      for (int64_t o = 0; o < outer; ++o) {
        for (size_t k = 0; k < inner.size(); ++k) {
          for (int64_t i = 0; i < inner[k]; ++i) want.push_back(inputs[k][o * inner[k] + i]);
        }
      }
      std::vector<float> y = poisoned(static_cast<size_t>(outer * total));
      concat_forward(pointers.data(), inner.data(), static_cast<int>(inner.size()), y.data(),
                     outer);
      // Copies are exact: tolerance 0.
      EXPECT_TRUE(near_reference(y, want, 0.0)) << "outer " << outer << ", inputs " << inner.size();
    }
  }
}

}  // namespace
}  // namespace fusednn::cpu::testing
