// SPDX-License-Identifier: Apache-2.0
// The NEON path of the matrix-multiply core against a scalar model of the order gemm_neon.hpp
// promises, written here with std::fma: the results must agree bit for bit (every multiply-add is
// fused in both, one rounding each). The tests skip where the NEON path is not compiled (builds
// for other CPUs); tools/test_aarch64.sh runs them under qemu-aarch64.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <sstream>
#include <vector>

#include "backends/cpu/gemm.hpp"
#include "backends/cpu/linear.hpp"
#include "cpu_test_support.hpp"

namespace fusednn::cpu::testing {
namespace {

uint32_t bits_of(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

// Element indices where got and want differ in any bit, described for a failure message.
::testing::AssertionResult same_bits(const std::vector<float>& got,
                                     const std::vector<float>& want) {
  if (got.size() != want.size()) {
    return ::testing::AssertionFailure() << "size " << got.size() << " != " << want.size();
  }
  size_t mismatches = 0;
  std::ostringstream message;
  for (size_t i = 0; i < got.size(); ++i) {
    if (bits_of(got[i]) != bits_of(want[i])) {
      if (mismatches < 5) message << "\n  [" << i << "] got " << got[i] << ", want " << want[i];
      ++mismatches;
    }
  }
  if (mismatches == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << mismatches << " of " << got.size() << " differ" << message.str();
}

class NeonExactness : public ::testing::Test {
 protected:
  void SetUp() override {
    previous_ = gemm_isa();
    if (!force_gemm_isa(GemmIsa::Neon)) GTEST_SKIP() << "the NEON path is not compiled here";
  }
  void TearDown() override { force_gemm_isa(previous_); }

 private:
  GemmIsa previous_ = GemmIsa::Baseline;
};

enum class BLayout { PackedPanels, RowMajor, RowOffsets };
enum class Start { Zero, RowBias, ColumnBias, Accumulate };

// One gemm_block call for every layout of B, every start value, every row count up to 13 (full
// tiles and each remainder tile, whatever the tile's height), full and partial 16-column panels,
// and depth 0.
TEST_F(NeonExactness, GemmBlockIsAFusedChainInDepthOrder) {
  Random random;
  int checks = 0;
  for (BLayout layout : {BLayout::PackedPanels, BLayout::RowMajor, BLayout::RowOffsets}) {
    for (Start start : {Start::Zero, Start::RowBias, Start::ColumnBias, Start::Accumulate}) {
      for (int64_t m = 1; m <= 13; ++m) {
        for (int64_t n : {1, 15, 16, 17, 40}) {
          for (int64_t depth : {0, 1, 4, 9, 70}) {
            const int64_t lda = depth + 3, ldc = n + 5;
            const int64_t padded_n = (n + kGemmPanelWidth - 1) / kGemmPanelWidth * kGemmPanelWidth;
            const std::vector<float> a = random.uniform_vector(static_cast<size_t>(m * lda));
            const std::vector<float> row_bias = random.uniform_vector(static_cast<size_t>(m));
            const std::vector<float> column_bias = random.uniform_vector(static_cast<size_t>(n));

            // B as the layout stores it, and b_at(k, j) reading the same element back.
            std::vector<float> b_storage;
            std::vector<int64_t> offsets;
            GemmBlock block{};
            std::vector<float> source;  // PackedPanels: n rows of depth values (W)
            if (layout == BLayout::PackedPanels) {
              source = random.uniform_vector(static_cast<size_t>(n * depth));
              b_storage.assign(static_cast<size_t>(padded_n * std::max<int64_t>(depth, 1)), 0.0f);
              pack_transposed_panels(source.data(), depth, n, depth, b_storage.data());
              block.b_row_stride = kGemmPanelWidth;
              block.b_panel_stride = depth * kGemmPanelWidth;
            } else {
              // Rows of padded_n values (the padding finite, as gemm.hpp asks), one spare row.
              b_storage = random.uniform_vector(static_cast<size_t>((depth + 1) * padded_n + 3));
              block.b_row_stride = padded_n;
              block.b_panel_stride = kGemmPanelWidth;
              if (layout == BLayout::RowOffsets) {
                // Rows out of order and shifted, as Conv2d's windows are.
                for (int64_t k = 0; k < depth; ++k)
                  offsets.push_back(((k * 7) % (depth + 1)) * padded_n + k % 3);
              }
            }
            auto b_at = [&](int64_t k, int64_t j) -> float {
              switch (layout) {
                case BLayout::PackedPanels: return source[j * depth + k];
                case BLayout::RowMajor: return b_storage[k * padded_n + j];
                case BLayout::RowOffsets: return b_storage[offsets[k] + j];
              }
              return 0.0f;
            };

            std::vector<float> c = random.uniform_vector(static_cast<size_t>(m * ldc));
            const std::vector<float> c_before = c;
            block.a = a.data();
            block.lda = lda;
            block.b = b_storage.data();
            block.b_row_offsets = offsets.empty() ? nullptr : offsets.data();
            block.c = c.data();
            block.ldc = ldc;
            block.m = m;
            block.n = n;
            block.depth = depth;
            block.accumulate = start == Start::Accumulate;
            block.finish = true;
            block.row_bias = start == Start::RowBias ? row_bias.data() : nullptr;
            block.column_bias = start == Start::ColumnBias ? column_bias.data() : nullptr;
            gemm_block(block);

            std::vector<float> want = c_before;  // columns past n stay as they were
            for (int64_t i = 0; i < m; ++i) {
              for (int64_t j = 0; j < n; ++j) {
                float sum = 0.0f;
                if (start == Start::RowBias) sum = row_bias[i];
                if (start == Start::ColumnBias) sum = column_bias[j];
                if (start == Start::Accumulate) sum = c_before[i * ldc + j];
                for (int64_t k = 0; k < depth; ++k) sum = std::fma(a[i * lda + k], b_at(k, j), sum);
                want[i * ldc + j] = sum;
              }
            }
            ASSERT_TRUE(same_bits(c, want))
                << "layout " << static_cast<int>(layout) << ", start " << static_cast<int>(start)
                << ", m " << m << ", n " << n << ", depth " << depth;
            ++checks;
          }
        }
      }
    }
  }
  EXPECT_EQ(checks, 3 * 4 * 13 * 5 * 5);
}

// The few-row dot products: four interleaved fused partial sums, added left to right, the
// leftover depth fused onto that, then the bias.
TEST_F(NeonExactness, DotRowsFollowTheDocumentedOrder) {
  Random random;
  for (int64_t rows : {1, 2, 3}) {
    for (int64_t in : {0, 1, 3, 4, 5, 17, 64, 301}) {
      for (int64_t out : {1, 5, 6, 7, 8, 13, 45}) {
        for (bool with_bias : {false, true}) {
          const std::vector<float> x = random.uniform_vector(static_cast<size_t>(rows * in));
          const std::vector<float> w = random.uniform_vector(static_cast<size_t>(out * in));
          const std::vector<float> bias = random.uniform_vector(static_cast<size_t>(out));
          std::vector<float> y = poisoned(static_cast<size_t>(rows * out));
          linear_dot_rows(x.data(), w.data(), with_bias ? bias.data() : nullptr, y.data(), rows, in,
                          out, {});

          std::vector<float> want(y.size());
          const int64_t vector_end = in - in % 4;
          for (int64_t r = 0; r < rows; ++r) {
            for (int64_t o = 0; o < out; ++o) {
              float partial[4] = {0.0f, 0.0f, 0.0f, 0.0f};
              for (int64_t k = 0; k < vector_end; ++k)
                partial[k % 4] = std::fma(x[r * in + k], w[o * in + k], partial[k % 4]);
              float sum = partial[0] + partial[1];
              sum += partial[2];
              sum += partial[3];
              for (int64_t k = vector_end; k < in; ++k)
                sum = std::fma(x[r * in + k], w[o * in + k], sum);
              want[r * out + o] = with_bias ? sum + bias[o] : sum;
            }
          }
          ASSERT_TRUE(same_bits(y, want))
              << "rows " << rows << ", " << in << " -> " << out << ", bias " << with_bias;
        }
      }
    }
  }
}

// A whole Linear on the packed path: its depth blocks (256 inputs each) continue one fused chain
// per output, started from the bias, so the result is the chain over every input at once.
TEST_F(NeonExactness, PackedLinearAcrossDepthBlocksIsOneChain) {
  Random random;
  const int64_t rows = 9, in = 600, out = 53;
  ASSERT_EQ(linear_form(rows), LinearForm::PackedGemm);
  const std::vector<float> x = random.uniform_vector(static_cast<size_t>(rows * in));
  const std::vector<float> w = random.uniform_vector(static_cast<size_t>(out * in));
  const std::vector<float> bias = random.uniform_vector(static_cast<size_t>(out));
  std::vector<float> y = poisoned(static_cast<size_t>(rows * out));
  linear_forward(x.data(), w.data(), bias.data(), y.data(), rows, in, out, {});

  std::vector<float> want(y.size());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t o = 0; o < out; ++o) {
      float sum = bias[o];
      for (int64_t k = 0; k < in; ++k) sum = std::fma(x[r * in + k], w[o * in + k], sum);
      want[r * out + o] = sum;
    }
  }
  EXPECT_TRUE(same_bits(y, want));
}

}  // namespace
}  // namespace fusednn::cpu::testing
