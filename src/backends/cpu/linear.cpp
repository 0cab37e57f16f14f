// SPDX-License-Identifier: Apache-2.0
// Linear as C = X * W^T: X is A (rows of activations, read in place) and W^T is B, packed here a
// block at a time into 16-column panels on the stack (the transpose the register tile needs).
//
// Blocking: for each block of kColumnBlock output features and kGemmDepthBlock input features,
// the packed weight block (256 x 48 floats = 48 KiB on the stack, L1/L2) is swept by every row of
// X; each 6-row sliver of X is read from L3 once per block and reused across its 3 panels (48
// columns are faster than 32 for wide layers, 64 no better). Calls with fewer than
// kLinearDotProductRowLimit rows skip the packing and take dot products instead (rows in pairs, one
// pass over W per pair); that path sums in another order, so a row can differ in its last bits
// depending on whether its slice of the batch had fewer than 4 rows. On the packed path results
// do not depend on the split.
#include "backends/cpu/linear.hpp"

#include <algorithm>

#include "backends/cpu/gemm.hpp"

namespace fusednn::cpu {
namespace {

// Output features per packed block; the stack buffer is kGemmDepthBlock * kColumnBlock floats.
constexpr int64_t kColumnBlock = 48;
static_assert(kColumnBlock % kGemmPanelWidth == 0, "blocks hold whole panels");

}  // namespace

void linear_forward(const float* x, const float* weight, const float* bias, float* y, int64_t rows,
                    int64_t in_features, int64_t out_features, const Epilogue& epilogue) {
  if (rows <= 0 || out_features <= 0) return;
  if (linear_form(rows) == LinearForm::DotProducts) {
    linear_dot_rows(x, weight, bias, y, rows, in_features, out_features, epilogue);
    return;
  }

  alignas(64) float packed[kGemmDepthBlock * kColumnBlock];
  for (int64_t col0 = 0; col0 < out_features; col0 += kColumnBlock) {
    const int64_t cols = std::min(kColumnBlock, out_features - col0);
    // At least one depth block, so that in_features == 0 still writes bias and epilogue.
    int64_t depth0 = 0;
    do {
      const int64_t depth = std::min(kGemmDepthBlock, in_features - depth0);
      pack_transposed_panels(weight + col0 * in_features + depth0, in_features, cols, depth,
                             packed);
      GemmBlock block{};
      block.a = x + depth0;
      block.lda = in_features;
      block.b = packed;
      block.b_row_stride = kGemmPanelWidth;
      block.b_panel_stride = depth * kGemmPanelWidth;
      block.c = y + col0;
      block.ldc = out_features;
      block.m = rows;
      block.n = cols;
      block.depth = depth;
      block.accumulate = depth0 > 0;
      block.finish = depth0 + depth >= in_features;
      block.column_bias = bias ? bias + col0 : nullptr;
      block.epilogue = &epilogue;
      gemm_block(block);
      depth0 += depth;
    } while (depth0 < in_features);
  }
}

}  // namespace fusednn::cpu
