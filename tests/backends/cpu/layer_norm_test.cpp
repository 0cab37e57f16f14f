// SPDX-License-Identifier: Apache-2.0

#include "backends/cpu/layer_norm.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "cpu_test_support.hpp"

namespace fusednn::cpu::testing {
namespace {

using K = ElementwiseKind;

// mean = sum x / n; var = sum (x - mean)^2 / n (biased); y = (x - mean) / sqrt(var + eps)
// [* gamma + beta], then the epilogue, in double.
Expected reference_layer_norm(const std::vector<float>& x, const float* gamma, const float* beta,
                              int64_t rows, int64_t size, float eps, const Epilogue& epilogue) {
  Expected y;
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = x.data() + r * size;
    double mean = 0, var = 0;
    for (int64_t i = 0; i < size; ++i) mean += row[i];
    mean /= double(size);
    for (int64_t i = 0; i < size; ++i) var += (row[i] - mean) * (row[i] - mean);
    var /= double(size);
    for (int64_t i = 0; i < size; ++i) {
      double v = (row[i] - mean) / std::sqrt(var + double(eps));
      if (gamma) v = v * gamma[i] + beta[i];
      y.add(v, epilogue);
    }
  }
  return y;
}

// Row [1, 2, 3, 4]: mean 2.5, deviations [-1.5, -0.5, 0.5, 1.5], biased variance
// (2.25 + 0.25 + 0.25 + 2.25) / 4 = 1.25.
//   eps = 0: y = deviation / sqrt(1.25) = [-1.3416407865, -0.4472135955,
//   0.4472135955, 1.3416407865] eps = 1: sqrt(2.25) = 1.5, y = [-1, -1/3, 1/3, 1] (eps inside the
//   square root) eps = 0, gamma [1, 2, 1, 1], beta [0, 0, 1, -1]: [-1.3416407865,
//   -0.894427191, 1.4472135955, 0.3416407865]
TEST(CpuLayerNorm, HandComputed) {
  const std::vector<float> x = {1, 2, 3, 4};
  std::vector<float> y = poisoned(4);
  layer_norm_forward(x.data(), nullptr, nullptr, y.data(), 1, 4, 0.0f, {});
  EXPECT_TRUE(near_values(y, {-1.3416407865f, -0.4472135955f, 0.4472135955f, 1.3416407865f}));

  y = poisoned(4);
  layer_norm_forward(x.data(), nullptr, nullptr, y.data(), 1, 4, 1.0f, {});
  EXPECT_TRUE(near_values(y, {-1, -1.0f / 3, 1.0f / 3, 1}));

  const std::vector<float> gamma = {1, 2, 1, 1}, beta = {0, 0, 1, -1};
  y = poisoned(4);
  layer_norm_forward(x.data(), gamma.data(), beta.data(), y.data(), 1, 4, 0.0f, {});
  EXPECT_TRUE(near_values(y, {-1.3416407865f, -0.894427191f, 1.4472135955f, 0.3416407865f}));

  // In place, with ReLU on top: [0, 0, 0.4472135955, 1.3416407865].
  std::vector<float> in_place = x;
  layer_norm_forward(in_place.data(), nullptr, nullptr, in_place.data(), 1, 4, 0.0f, {{K::ReLU}});
  EXPECT_TRUE(near_values(in_place, {0, 0, 0.4472135955f, 1.3416407865f}));
}

// A constant row has zero variance: y = 0 / sqrt(eps) = 0, plus beta. Rows [5, 5, 5] with
// beta [1, 2, 3] (gamma any) -> [1, 2, 3].
TEST(CpuLayerNorm, ConstantRowGivesBeta) {
  const std::vector<float> x = {5, 5, 5}, gamma = {7, 8, 9}, beta = {1, 2, 3};
  std::vector<float> y = poisoned(3);
  layer_norm_forward(x.data(), gamma.data(), beta.data(), y.data(), 1, 3, 1e-5f, {});
  EXPECT_TRUE(near_values(y, {1, 2, 3}));
}

TEST(CpuLayerNorm, MatchesReferenceOnRandomData) {
  Random random;
  const std::vector<Epilogue> epilogues = test_epilogues();
  int check = 0;
  for (int64_t size : {1, 7, 8, 9, 33, 768, 1000, 4097}) {
    for (int64_t rows : {1, 3, 32, 257}) {
      const Epilogue& epilogue = epilogues[check % epilogues.size()];
      const bool affine = check % 2 == 0;
      ++check;
      // Rows centred away from zero (mean about 3) so that a one-pass variance would lose digits.
      const std::vector<float> x =
          random.uniform_vector(static_cast<size_t>(rows * size), 2.0f, 4.0f);
      const std::vector<float> gamma = random.uniform_vector(static_cast<size_t>(size), 0.5f, 1.5f);
      const std::vector<float> beta = random.uniform_vector(static_cast<size_t>(size));
      const float* g = affine ? gamma.data() : nullptr;
      const float* b = affine ? beta.data() : nullptr;
      const float eps = 1e-5f;
      const Expected want = reference_layer_norm(x, g, b, rows, size, eps, epilogue);
      const std::string context = "rows " + std::to_string(rows) + ", size " +
                                  std::to_string(size) + ", affine " + std::to_string(affine) +
                                  ", epilogue " + describe(epilogue);

      std::vector<float> y = poisoned(x.size());
      layer_norm_forward(x.data(), g, b, y.data(), rows, size, eps, epilogue);
      EXPECT_TRUE(near_expected(y, want)) << context;

      std::vector<float> in_place = x;
      layer_norm_forward(in_place.data(), g, b, in_place.data(), rows, size, eps, epilogue);
      EXPECT_TRUE(near_expected(in_place, want)) << "in place, " << context;
    }
  }
}

}  // namespace
}  // namespace fusednn::cpu::testing
