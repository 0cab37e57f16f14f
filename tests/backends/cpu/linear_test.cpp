// SPDX-License-Identifier: Apache-2.0

#include "backends/cpu/linear.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "cpu_test_support.hpp"

namespace fusednn::cpu::testing {
namespace {

using K = ElementwiseKind;

// y[r][o] = sum_i x[r][i] * w[o][i] (+ bias[o]), then the epilogue, all in double.
Expected reference_linear(const std::vector<float>& x, const std::vector<float>& w,
                          const float* bias, int64_t rows, int64_t in, int64_t out,
                          const Epilogue& epilogue) {
  Expected y;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t o = 0; o < out; ++o) {
      double sum = bias ? bias[o] : 0.0;
      for (int64_t i = 0; i < in; ++i) sum += double(x[r * in + i]) * double(w[o * in + i]);
      y.add(sum, epilogue);
    }
  }
  return y;
}

class CpuLinear : public GemmIsaTest {};

// x row A = [1, 2, 3], row B = [-1, 0.5, 2]; w = [[1, 0, -1], [2, 1, 0.5], [0, 0, 1], [-2, 1, 1]];
// bias = [0.5, -1, 0, 2].
//   row A: o0 = 1 - 3 + 0.5 = -1.5       o1 = 2 + 2 + 1.5 - 1 = 4.5
//          o2 = 3 + 0 = 3                o3 = -2 + 2 + 3 + 2 = 5
//   row B: o0 = -1 - 2 + 0.5 = -2.5      o1 = -2 + 0.5 + 1 - 1 = -1.5
//          o2 = 2                        o3 = 2 + 0.5 + 2 + 2 = 6.5
// ReLU: A -> [0, 4.5, 3, 5], B -> [0, 0, 2, 6.5]. Rows alternate A, B; 1 and 2 rows take the
// dot-product path, 7 rows the packed multiply (a full 6-row tile and a 1-row edge tile).
TEST_P(CpuLinear, HandComputedWithBiasAndReLU) {
  const std::vector<float> w = {1, 0, -1, 2, 1, 0.5f, 0, 0, 1, -2, 1, 1};
  const std::vector<float> bias = {0.5f, -1, 0, 2};
  const std::vector<float> row_a = {1, 2, 3}, row_b = {-1, 0.5f, 2};
  const std::vector<float> out_a = {0, 4.5f, 3, 5}, out_b = {0, 0, 2, 6.5f};
  for (int64_t rows : {1, 2, 7}) {
    std::vector<float> x, want;
    for (int64_t r = 0; r < rows; ++r) {
      const bool a = r % 2 == 0;
      x.insert(x.end(), (a ? row_a : row_b).begin(), (a ? row_a : row_b).end());
      want.insert(want.end(), (a ? out_a : out_b).begin(), (a ? out_a : out_b).end());
    }
    std::vector<float> y = poisoned(want.size());
    linear_forward(x.data(), w.data(), bias.data(), y.data(), rows, 3, 4, {{K::ReLU}});
    EXPECT_TRUE(near_values(y, want)) << "rows " << rows;
  }
}

// Same x and w, no bias, no epilogue: row A = [-2, 5.5, 3, 3], row B = [-3, -0.5, 2, 4.5].
TEST_P(CpuLinear, HandComputedWithoutBias) {
  const std::vector<float> w = {1, 0, -1, 2, 1, 0.5f, 0, 0, 1, -2, 1, 1};
  const std::vector<float> x = {1, 2, 3, -1, 0.5f, 2, 1, 2, 3, -1, 0.5f, 2, 1, 2, 3};
  const std::vector<float> want = {-2, 5.5f, 3,  3,     -3, -0.5f, 2,  4.5f, -2, 5.5f,
                                   3,  3,    -3, -0.5f, 2,  4.5f,  -2, 5.5f, 3,  3};
  std::vector<float> y = poisoned(want.size());
  linear_forward(x.data(), w.data(), nullptr, y.data(), 5, 3, 4, {});
  EXPECT_TRUE(near_values(y, want));
}

// in_features = 0: every output is its bias, through the epilogue. bias = [-1, 2, 3],
// epilogue Scale(2) then ReLU: [0, 4, 6] per row.
TEST_P(CpuLinear, NoInputFeaturesGivesBias) {
  const std::vector<float> bias = {-1, 2, 3};
  const float unused = 0;
  for (int64_t rows : {1, 6}) {
    std::vector<float> y = poisoned(static_cast<size_t>(rows * 3));
    linear_forward(&unused, &unused, bias.data(), y.data(), rows, 0, 3,
                   {{K::Scale, 2.0f}, {K::ReLU}});
    std::vector<float> want;
    for (int64_t r = 0; r < rows; ++r) want.insert(want.end(), {0, 4, 6});
    EXPECT_TRUE(near_values(y, want)) << "rows " << rows;
  }
}

struct LinearShape {
  int64_t in, out;
};

// Off the power-of-two grid, plus the sizes that cross the blocking: in > 256 (several depth
// blocks, the last partial), out > 32 and not a multiple of 16 (several column blocks, a partial
// panel), out < 16, out = 1.
const LinearShape kShapes[] = {{1, 1},    {3, 5},    {17, 10},  {64, 10},  {100, 128},
                               {129, 70}, {300, 37}, {513, 33}, {257, 16}, {31, 1}};

TEST_P(CpuLinear, MatchesNaiveReferenceOnRandomData) {
  Random random;
  const std::vector<Epilogue> epilogues = test_epilogues();
  int check = 0;
  for (const LinearShape& shape : kShapes) {
    for (int64_t rows : {1, 3, 32, 257}) {
      const Epilogue& epilogue = epilogues[check % epilogues.size()];
      const bool with_bias = check % 3 != 2;
      ++check;
      const std::vector<float> x = random.uniform_vector(static_cast<size_t>(rows * shape.in));
      const std::vector<float> w = random.uniform_vector(static_cast<size_t>(shape.out * shape.in));
      const std::vector<float> bias = random.uniform_vector(static_cast<size_t>(shape.out));
      const float* b = with_bias ? bias.data() : nullptr;
      std::vector<float> y = poisoned(static_cast<size_t>(rows * shape.out));
      linear_forward(x.data(), w.data(), b, y.data(), rows, shape.in, shape.out, epilogue);
      EXPECT_TRUE(near_expected(y, reference_linear(x, w, b, rows, shape.in, shape.out, epilogue)))
          << "rows " << rows << ", " << shape.in << " -> " << shape.out << ", bias " << with_bias
          << ", epilogue " << describe(epilogue);
    }
  }
}

// A caller splits the batch across threads: each slice of rows, run on its own with pointers
// offset into the full buffers, must give the full batch's answer, and no element outside the
// slice may change.
TEST_P(CpuLinear, SlicesOfTheBatchMatchTheWholeBatch) {
  Random random;
  const int64_t rows = 257, in = 300, out = 45;
  const Epilogue epilogue = {{K::GeluTanh}};
  const std::vector<float> x = random.uniform_vector(static_cast<size_t>(rows * in));
  const std::vector<float> w = random.uniform_vector(static_cast<size_t>(out * in));
  const std::vector<float> bias = random.uniform_vector(static_cast<size_t>(out));
  const Expected want = reference_linear(x, w, bias.data(), rows, in, out, epilogue);

  const int64_t cuts[] = {0, 1, 4, 5, 37, 128, 257};
  std::vector<float> y = poisoned(static_cast<size_t>(rows * out));
  for (size_t s = 0; s + 1 < std::size(cuts); ++s) {
    const int64_t first = cuts[s], count = cuts[s + 1] - cuts[s];
    linear_forward(x.data() + first * in, w.data(), bias.data(), y.data() + first * out, count, in,
                   out, epilogue);
    for (int64_t i = cuts[s + 1] * out; i < rows * out; ++i) {
      ASSERT_TRUE(std::isnan(y[i]))
          << "slice [" << first << ", " << cuts[s + 1] << ") wrote element " << i;
    }
  }
  EXPECT_TRUE(near_expected(y, want));
}

// Slices of at least 4 rows take the packed multiply, which sums every output in the same order
// wherever its row falls in a tile (full 6-row tiles, remainder tiles of 1 to 5 rows): the
// results are bit for bit those of the whole batch, so the number of threads a caller splits a
// batch over cannot change them.
TEST_P(CpuLinear, PackedPathIsBitIdenticalAcrossSplits) {
  Random random;
  const int64_t rows = 257, in = 300, out = 45;
  const Epilogue epilogue = {{K::ReLU}};
  const std::vector<float> x = random.uniform_vector(static_cast<size_t>(rows * in));
  const std::vector<float> w = random.uniform_vector(static_cast<size_t>(out * in));
  const std::vector<float> bias = random.uniform_vector(static_cast<size_t>(out));
  std::vector<float> whole = poisoned(static_cast<size_t>(rows * out));
  linear_forward(x.data(), w.data(), bias.data(), whole.data(), rows, in, out, epilogue);

  const int64_t cuts[] = {0, 4, 11, 19, 100, 257};
  std::vector<float> split = poisoned(static_cast<size_t>(rows * out));
  for (size_t s = 0; s + 1 < std::size(cuts); ++s) {
    const int64_t first = cuts[s], count = cuts[s + 1] - cuts[s];
    linear_forward(x.data() + first * in, w.data(), bias.data(), split.data() + first * out, count,
                   in, out, epilogue);
  }
  EXPECT_EQ(std::memcmp(whole.data(), split.data(), whole.size() * sizeof(float)), 0);
}

INSTANTIATE_TEST_SUITE_P(Isa, CpuLinear, ::testing::ValuesIn(kEveryGemmIsa), isa_test_name);

}  // namespace
}  // namespace fusednn::cpu::testing
