// SPDX-License-Identifier: Apache-2.0
// The matrix-multiply core's register tiles in AArch64 NEON intrinsics: every multiply-add is an
// FMLA (fused, one rounding), so the order gemm_neon.hpp gives fixes every result bit; the way a
// block is covered with tiles is gemm_tiling.hpp's, shared with the other instruction sets.
//
// Register tile: 5 rows of C by 16 columns. Each step loads 16 floats of B (4 vectors) and one
// value of A per row, and does 80 multiply-adds by lane (FMLA v, v, v.s[0]): 20 accumulators +
// 4 B vectors + 5 A values of NEON's 32 registers. GCC loads every A value of a step before the
// FMLAs, so 6 rows would need 34 registers and keep two accumulators on the stack.
#include "backends/cpu/gemm_neon.hpp"

#if defined(FUSEDNN_CPU_NEON_GEMM)

#include <arm_neon.h>

#include <cmath>

#include "backends/cpu/gemm_tiling.hpp"
#include "common/always_inline.hpp"

namespace fusednn::cpu {
namespace {

constexpr int kLanes = 4;
constexpr int kVectors = static_cast<int>(kGemmPanelWidth) / kLanes;

// The kernel class gemm_tiling.hpp's drivers take (that file says what each member computes).
struct NeonKernel {
  static constexpr int kGemmRows = 5;

  template <int kRows, bool kRowOffsets>
  static FUSEDNN_ALWAYS_INLINE void multiply_tile(int64_t depth, const float* const* a_rows,
                                                  const float* b, int64_t b_row_stride,
                                                  const int64_t* b_row_offsets,
                                                  const float* row_bias, const float* column_bias,
                                                  float* out, int64_t out_stride, bool accumulate) {
    float32x4_t acc[kRows][kVectors];
    for (int i = 0; i < kRows; ++i) {
      for (int v = 0; v < kVectors; ++v) {
        if (accumulate) {
          acc[i][v] = vld1q_f32(out + i * out_stride + v * kLanes);
        } else if (row_bias) {
          acc[i][v] = vdupq_n_f32(row_bias[i]);
        } else if (column_bias) {
          acc[i][v] = vld1q_f32(column_bias + v * kLanes);
        } else {
          acc[i][v] = vdupq_n_f32(0.0f);
        }
      }
    }
    const float* rows[kRows];
    for (int i = 0; i < kRows; ++i) rows[i] = a_rows[i];
    for (int64_t k = 0; k < depth; ++k) {
      const float* b_row = kRowOffsets ? b + b_row_offsets[k] : b + k * b_row_stride;
      float32x4_t b_vectors[kVectors];
      for (int v = 0; v < kVectors; ++v) b_vectors[v] = vld1q_f32(b_row + v * kLanes);
      for (int i = 0; i < kRows; ++i) {
        const float a_value = rows[i][k];
        // acc + b * a_value, fused.
        for (int v = 0; v < kVectors; ++v)
          acc[i][v] = vfmaq_n_f32(acc[i][v], b_vectors[v], a_value);
      }
    }
    for (int i = 0; i < kRows; ++i) {
      for (int v = 0; v < kVectors; ++v) vst1q_f32(out + i * out_stride + v * kLanes, acc[i][v]);
    }
  }

  template <int kRows, int kOutputs>
  static FUSEDNN_ALWAYS_INLINE void dot_tile(const float* const* x_rows, const float* const* w_rows,
                                             int64_t depth, float* sums) {
    const int64_t vector_end = depth - depth % kLanes;
    float32x4_t acc[kRows][kOutputs];
    for (int r = 0; r < kRows; ++r) {
      for (int j = 0; j < kOutputs; ++j) acc[r][j] = vdupq_n_f32(0.0f);
    }
    for (int64_t k = 0; k < vector_end; k += kLanes) {
      float32x4_t x_vectors[kRows];
      for (int r = 0; r < kRows; ++r) x_vectors[r] = vld1q_f32(x_rows[r] + k);
      for (int j = 0; j < kOutputs; ++j) {
        const float32x4_t w_vector = vld1q_f32(w_rows[j] + k);
        for (int r = 0; r < kRows; ++r) acc[r][j] = vfmaq_f32(acc[r][j], x_vectors[r], w_vector);
      }
    }
    // The lanes go out through memory in a loop of its own: a loop that also reads them out of
    // the registers, with the leftover loop inside it, keeps GCC from giving the accumulators
    // registers of their own in the loop above.
    float lanes[kRows * kOutputs * kLanes];
    for (int r = 0; r < kRows; ++r) {
      for (int j = 0; j < kOutputs; ++j) vst1q_f32(lanes + (r * kOutputs + j) * kLanes, acc[r][j]);
    }
    for (int r = 0; r < kRows; ++r) {
      for (int j = 0; j < kOutputs; ++j) {
        // Lanes added left to right, then the leftover k.
        const float* lane = lanes + (r * kOutputs + j) * kLanes;
        float sum = lane[0] + lane[1];
        sum += lane[2];
        sum += lane[3];
        for (int64_t k = vector_end; k < depth; ++k)
          sum = std::fma(x_rows[r][k], w_rows[j][k], sum);
        sums[r * kOutputs + j] = sum;
      }
    }
  }
};

}  // namespace

void gemm_block_neon(const GemmBlock& block) { tiling::gemm_block_body<NeonKernel>(block); }

void linear_dot_rows_neon(const float* x, const float* w, const float* bias, float* y, int64_t rows,
                          int64_t in_features, int64_t out_features, const Epilogue& epilogue) {
  tiling::linear_dot_rows_body<NeonKernel>(x, w, bias, y, rows, in_features, out_features,
                                           epilogue);
}

}  // namespace fusednn::cpu

#endif
