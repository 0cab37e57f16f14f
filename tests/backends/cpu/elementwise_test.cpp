// SPDX-License-Identifier: Apache-2.0

#include "backends/cpu/elementwise.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "cpu_test_support.hpp"

namespace fusednn::cpu::testing {
namespace {

using K = ElementwiseKind;

std::vector<float> run_elementwise(const std::vector<float>& x, const Epilogue& epilogue) {
  std::vector<float> y = poisoned(x.size());
  elementwise_forward(x.data(), y.data(), static_cast<int64_t>(x.size()), epilogue);
  return y;
}

// Each kind at points whose values are known to many digits (double-precision evaluations of the
// defining formulas):
//   ReLU(-2) = 0, ReLU(3) = 3                LeakyReLU_0.1(-2) = -0.2, LeakyReLU_0.1(3) = 3
//   GELU(1) = 0.5 (1 + erf(1 / sqrt 2)) = 0.8413447460685429, GELU(-1) = -0.15865525393145707
//   GELU_tanh(1) = 0.5 (1 + tanh(sqrt(2 / pi) * 1.044715)) = 0.8411919906082768
//   SiLU(1) = 1 / (1 + e^-1) = 0.7310585786300049, SiLU(-2) = -2 / (1 + e^2) = -0.2384058440442351
//   Sigmoid(0) = 0.5, Sigmoid(2) = 0.8807970779778823   Tanh(0.5) = 0.46211715726000974
//   Scale_2.5(-2) = -5
TEST(CpuElementwise, HandComputedActivations) {
  struct Case {
    ElementwiseOp op;
    std::vector<float> x, want;
  };
  const Case cases[] = {
      {{K::ReLU}, {-2, 3}, {0, 3}},
      {{K::LeakyReLU, 0.1f}, {-2, 3}, {-0.2f, 3}},
      {{K::GeluErf}, {1, -1}, {0.8413447460685429f, -0.15865525393145707f}},
      {{K::GeluTanh}, {1}, {0.8411919906082768f}},
      {{K::SiLU}, {1, -2}, {0.7310585786300049f, -0.2384058440442351f}},
      {{K::Sigmoid}, {0, 2}, {0.5f, 0.8807970779778823f}},
      {{K::Tanh}, {0.5f}, {0.46211715726000974f}},
      {{K::Scale, 2.5f}, {-2}, {-5}},
  };
  for (const Case& c : cases) {
    EXPECT_TRUE(near_values(run_elementwise(c.x, {c.op}), c.want)) << describe({c.op});
  }
}

// Ops run in order: Scale(2) then ReLU maps [-1, 1.5] to [max(-2, 0), max(3, 0)] = [0, 3];
// Scale(-1) then ReLU gives [1, 0], while ReLU then Scale(-1) gives [0, -1.5].
TEST(CpuElementwise, HandComputedChainOrder) {
  const std::vector<float> x = {-1, 1.5f};
  EXPECT_TRUE(near_values(run_elementwise(x, {{K::Scale, 2}, {K::ReLU}}), {0, 3}));
  EXPECT_TRUE(near_values(run_elementwise(x, {{K::Scale, -1}, {K::ReLU}}), {1, 0}));
  EXPECT_TRUE(near_values(run_elementwise(x, {{K::ReLU}, {K::Scale, -1}}), {0, -1.5f}));
}

// An empty epilogue copies; the copy of x onto itself leaves it.
TEST(CpuElementwise, EmptyEpilogueCopies) {
  std::vector<float> x = {1, -2, 3.5f};
  EXPECT_TRUE(near_values(run_elementwise(x, {}), {1, -2, 3.5f}));
  elementwise_forward(x.data(), x.data(), 3, {});
  EXPECT_TRUE(near_values(x, {1, -2, 3.5f}));
}

// The kernel promises apply()'s values bit for bit (the vectorised ReLU/LeakyReLU/Scale loops
// must not differ from the scalar formulas), including at -0, infinities, NaN and subnormals.
TEST(CpuElementwise, BitIdenticalToScalarApply) {
  Random random;
  std::vector<float> x = random.uniform_vector(5000, -8.0f, 8.0f);
  const float specials[] = {0.0f,
                            -0.0f,
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            quiet_nan(),
                            std::numeric_limits<float>::denorm_min(),
                            -std::numeric_limits<float>::denorm_min(),
                            std::numeric_limits<float>::max(),
                            -std::numeric_limits<float>::max(),
                            1e-30f,
                            -1e-30f};
  for (size_t i = 0; i < std::size(specials); ++i) x[i * 37] = specials[i];
  for (const Epilogue& epilogue : test_epilogues()) {
    const std::vector<float> y = run_elementwise(x, epilogue);
    size_t mismatches = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      const float want = apply(epilogue, x[i]);
      mismatches += std::memcmp(&y[i], &want, sizeof want) != 0;
    }
    EXPECT_EQ(mismatches, 0u) << describe(epilogue);
  }
}

// Counts around the 2048-element chunk and off the power-of-two grid.
const int64_t kCounts[] = {1, 3, 7, 32, 257, 2047, 2048, 2049, 10007};

TEST(CpuElementwise, MatchesReferenceOnRandomData) {
  Random random;
  const std::vector<Epilogue> epilogues = test_epilogues();
  for (int64_t count : kCounts) {
    for (const Epilogue& epilogue : epilogues) {
      const std::vector<float> x = random.uniform_vector(static_cast<size_t>(count), -4.0f, 4.0f);
      Expected want;
      for (float v : x) want.add(v, epilogue);
      EXPECT_TRUE(near_expected(run_elementwise(x, epilogue), want))
          << "count " << count << ", epilogue " << describe(epilogue);

      std::vector<float> in_place = x;
      elementwise_forward(in_place.data(), in_place.data(), count, epilogue);
      EXPECT_TRUE(near_expected(in_place, want))
          << "in place, count " << count << ", epilogue " << describe(epilogue);
    }
  }
}

// a + b = [1 + 0.5, -2 + 4, 3 - 5] = [1.5, 2, -2]; with ReLU [1.5, 2, 0].
TEST(CpuAdd, HandComputed) {
  const std::vector<float> a = {1, -2, 3}, b = {0.5f, 4, -5};
  std::vector<float> y = poisoned(3);
  add_forward(a.data(), b.data(), y.data(), 3, {});
  EXPECT_TRUE(near_values(y, {1.5f, 2, -2}));
  y = poisoned(3);
  add_forward(a.data(), b.data(), y.data(), 3, {{K::ReLU}});
  EXPECT_TRUE(near_values(y, {1.5f, 2, 0}));
}

// Fresh data per check; the output separate, aliasing a, aliasing b, and a == b == y (x + x).
TEST(CpuAdd, MatchesReferenceOnRandomDataAndAliases) {
  Random random;
  const std::vector<Epilogue> epilogues = test_epilogues();
  int check = 0;
  for (int64_t count : kCounts) {
    const Epilogue& epilogue = epilogues[check++ % epilogues.size()];
    const std::vector<float> a = random.uniform_vector(static_cast<size_t>(count), -3.0f, 3.0f);
    const std::vector<float> b = random.uniform_vector(static_cast<size_t>(count), -3.0f, 3.0f);
    Expected want, want_doubled;
    for (size_t i = 0; i < a.size(); ++i) {
      want.add(double(a[i]) + double(b[i]), epilogue);
      want_doubled.add(2.0 * double(a[i]), epilogue);
    }
    const std::string context =
        "count " + std::to_string(count) + ", epilogue " + describe(epilogue);

    std::vector<float> y = poisoned(a.size());
    add_forward(a.data(), b.data(), y.data(), count, epilogue);
    EXPECT_TRUE(near_expected(y, want)) << "separate output, " << context;

    std::vector<float> into_a = a;
    add_forward(into_a.data(), b.data(), into_a.data(), count, epilogue);
    EXPECT_TRUE(near_expected(into_a, want)) << "y == a, " << context;

    std::vector<float> into_b = b;
    add_forward(a.data(), into_b.data(), into_b.data(), count, epilogue);
    EXPECT_TRUE(near_expected(into_b, want)) << "y == b, " << context;

    std::vector<float> doubled = a;
    add_forward(doubled.data(), doubled.data(), doubled.data(), count, epilogue);
    EXPECT_TRUE(near_expected(doubled, want_doubled)) << "y == a == b, " << context;
  }
}

}  // namespace
}  // namespace fusednn::cpu::testing
