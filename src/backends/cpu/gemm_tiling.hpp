// SPDX-License-Identifier: Apache-2.0
// How gemm_block and linear_dot_rows cover a block with register tiles, written once for every
// instruction set. The tile itself comes from a kernel class that each instruction set's file
// provides (gemm.cpp: GCC/Clang generic vectors, compiled for the baseline and for AVX2 + FMA;
// gemm_neon.cpp: AArch64 NEON intrinsics). Everything here is always inlined, so each entry point
// is compiled for its own instruction set. Internal to the CPU backend.
//
// A kernel class provides, for kRows in 1..kGemmRows and kOutputs in {1, 6, 8}:
//   template <int kRows, bool kRowOffsets> static void multiply_tile(
//       int64_t depth, const float* const* a_rows, const float* b, int64_t b_row_stride,
//       const int64_t* b_row_offsets, const float* row_bias, const float* column_bias,
//       float* out, int64_t out_stride, bool accumulate);
//     out[i][j] = start[i][j] + sum_k a_rows[i][k] * B[k][j] for i < kRows, j < 16, where B's
//     row k is b + k * b_row_stride (kRowOffsets false) or b + b_row_offsets[k]; out has row
//     stride out_stride. start is out itself when accumulate is set, else the bias: row_bias[i]
//     (kRows values), column_bias[j] (16 values) or zero. Products are added k ascending.
//   template <int kRows, int kOutputs> static void dot_tile(
//       const float* const* x_rows, const float* const* w_rows, int64_t depth, float* sums);
//     sums[r * kOutputs + j] = sum_k x_rows[r][k] * w_rows[j][k], in an order that does not
//     depend on kRows or kOutputs.
//   static constexpr int kGemmRows;  the rows of a full tile
#pragma once

#include <algorithm>
#include <cstdint>

#include "backends/cpu/epilogue.hpp"
#include "backends/cpu/gemm.hpp"
#include "common/always_inline.hpp"

namespace fusednn::cpu::tiling {

// Rows [row0, row0 + kRows) of C across the block's columns, a 16-column panel at a time.
template <class Kernel, int kRows, bool kRowOffsets>
FUSEDNN_ALWAYS_INLINE void gemm_row_sliver(const GemmBlock& block, int64_t row0) {
  constexpr int64_t kWidth = kGemmPanelWidth;
  const float* a_rows[kRows];
  for (int i = 0; i < kRows; ++i) a_rows[i] = block.a + (row0 + i) * block.lda;
  const float* row_bias = block.row_bias && !block.accumulate ? block.row_bias + row0 : nullptr;
  float* c_rows = block.c + row0 * block.ldc;
  // The last panel, when narrower than 16 columns, runs through these buffers so that the
  // register tile never touches C or the bias outside the block.
  alignas(64) float edge_tile[kRows * kWidth];
  alignas(64) float edge_bias[kWidth];

  for (int64_t col0 = 0; col0 < block.n; col0 += kWidth) {
    const int64_t cols = std::min(kWidth, block.n - col0);
    const bool full = cols == kWidth;
    float* c_tile = c_rows + col0;
    float* out = full ? c_tile : edge_tile;
    const int64_t out_stride = full ? block.ldc : kWidth;
    const float* column_bias =
        block.column_bias && !block.accumulate ? block.column_bias + col0 : nullptr;
    if (!full && block.accumulate) {
      for (int i = 0; i < kRows; ++i) {
        std::copy(c_tile + i * block.ldc, c_tile + i * block.ldc + cols, edge_tile + i * kWidth);
        std::fill(edge_tile + i * kWidth + cols, edge_tile + (i + 1) * kWidth, 0.0f);
      }
    }
    if (!full && column_bias) {
      std::copy(column_bias, column_bias + cols, edge_bias);
      std::fill(edge_bias + cols, edge_bias + kWidth, 0.0f);
      column_bias = edge_bias;
    }

    Kernel::template multiply_tile<kRows, kRowOffsets>(
        block.depth, a_rows, block.b + (col0 / kWidth) * block.b_panel_stride, block.b_row_stride,
        block.b_row_offsets, row_bias, column_bias, out, out_stride, block.accumulate);

    if (!full) {
      for (int i = 0; i < kRows; ++i) {
        std::copy(edge_tile + i * kWidth, edge_tile + i * kWidth + cols, c_tile + i * block.ldc);
      }
    }
  }

  if (block.finish && block.epilogue && !block.epilogue->empty()) {
    for (int i = 0; i < kRows; ++i)
      apply_epilogue(*block.epilogue, c_rows + i * block.ldc, block.n);
  }
}

// The rows left after the full slivers (fewer than kRows) get a tile of exactly their count.
template <class Kernel, int kRows, bool kRowOffsets>
FUSEDNN_ALWAYS_INLINE void gemm_remainder_sliver(const GemmBlock& block, int64_t row0,
                                                 int64_t rows) {
  if constexpr (kRows > 1) {
    if (rows == kRows - 1) {
      gemm_row_sliver<Kernel, kRows - 1, kRowOffsets>(block, row0);
    } else {
      gemm_remainder_sliver<Kernel, kRows - 1, kRowOffsets>(block, row0, rows);
    }
  }
}

template <class Kernel, bool kRowOffsets>
FUSEDNN_ALWAYS_INLINE void gemm_rows(const GemmBlock& block) {
  constexpr int kRows = Kernel::kGemmRows;
  int64_t row0 = 0;
  for (; row0 + kRows <= block.m; row0 += kRows) {
    gemm_row_sliver<Kernel, kRows, kRowOffsets>(block, row0);
  }
  if (row0 < block.m) {
    gemm_remainder_sliver<Kernel, kRows, kRowOffsets>(block, row0, block.m - row0);
  }
}

// gemm_block's body (see gemm.hpp) on Kernel's register tiles.
template <class Kernel>
FUSEDNN_ALWAYS_INLINE void gemm_block_body(const GemmBlock& block) {
  if (block.b_row_offsets) {
    gemm_rows<Kernel, true>(block);
  } else {
    gemm_rows<Kernel, false>(block);
  }
}

// kRows consecutive rows of x against every row of w: one pass over w for all of them.
template <class Kernel, int kRows, int kOutputs>
FUSEDNN_ALWAYS_INLINE void dot_row_group(const float* x, const float* w, const float* bias,
                                         float* y, int64_t in_features, int64_t out_features) {
  const float* x_rows[kRows];
  for (int r = 0; r < kRows; ++r) x_rows[r] = x + r * in_features;
  float sums[kRows * kOutputs];
  int64_t o = 0;
  for (; o + kOutputs <= out_features; o += kOutputs) {
    const float* w_rows[kOutputs];
    for (int j = 0; j < kOutputs; ++j) w_rows[j] = w + (o + j) * in_features;
    Kernel::template dot_tile<kRows, kOutputs>(x_rows, w_rows, in_features, sums);
    for (int r = 0; r < kRows; ++r) {
      for (int j = 0; j < kOutputs; ++j) {
        const float sum = sums[r * kOutputs + j];
        y[r * out_features + o + j] = bias ? sum + bias[o + j] : sum;
      }
    }
  }
  for (; o < out_features; ++o) {
    const float* w_row = w + o * in_features;
    Kernel::template dot_tile<kRows, 1>(x_rows, &w_row, in_features, sums);
    for (int r = 0; r < kRows; ++r) y[r * out_features + o] = bias ? sums[r] + bias[o] : sums[r];
  }
}

// linear_dot_rows's body (see gemm.hpp). Rows go two at a time against six outputs (12
// accumulators + 2 x vectors + 1 w vector: what fits 16 registers; three rows by four outputs
// needs all 16 and GCC then spills), a last odd row against eight outputs.
template <class Kernel>
FUSEDNN_ALWAYS_INLINE void linear_dot_rows_body(const float* x, const float* w, const float* bias,
                                                float* y, int64_t rows, int64_t in_features,
                                                int64_t out_features, const Epilogue& epilogue) {
  int64_t r = 0;
  for (; r + 2 <= rows; r += 2) {
    dot_row_group<Kernel, 2, 6>(x + r * in_features, w, bias, y + r * out_features, in_features,
                                out_features);
  }
  if (r < rows) {
    dot_row_group<Kernel, 1, 8>(x + r * in_features, w, bias, y + r * out_features, in_features,
                                out_features);
  }
  if (!epilogue.empty()) apply_epilogue(epilogue, y, rows * out_features);
}

}  // namespace fusednn::cpu::tiling
