// SPDX-License-Identifier: Apache-2.0
// Linear: y[r, o] = epilogue(sum_i x[r, i] * weight[o, i] + bias[o]), PyTorch's [out, in] layout.
#pragma once

#include <cstdint>

#include "common/elementwise_op.hpp"

namespace fusednn::cpu {

// The two ways linear_forward runs: one dot product per output for calls with fewer than
// kLinearDotProductRowLimit rows (packing W would cost more than it saves), else the packed GEMM.
enum class LinearForm { DotProducts, PackedGemm };
inline constexpr int64_t kLinearDotProductRowLimit = 4;
inline LinearForm linear_form(int64_t rows) {
  return rows < kLinearDotProductRowLimit ? LinearForm::DotProducts : LinearForm::PackedGemm;
}

// bias may be null. x and y must not overlap.
void linear_forward(const float* x, const float* weight, const float* bias, float* y, int64_t rows,
                    int64_t in_features, int64_t out_features, const Epilogue& epilogue);

}  // namespace fusednn::cpu
