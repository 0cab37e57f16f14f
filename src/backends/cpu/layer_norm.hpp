// SPDX-License-Identifier: Apache-2.0
// LayerNorm over the trailing row_size elements of each row (biased variance, as PyTorch).
#pragma once

#include <cstdint>

#include "common/elementwise_op.hpp"

namespace fusednn::cpu {

// gamma and beta are [row_size] or null: both null for elementwise_affine=False, beta alone
// null for bias=False. x == y is allowed.
void layer_norm_forward(const float* x, const float* gamma, const float* beta, float* y,
                        int64_t rows, int64_t row_size, float eps, const Epilogue& epilogue);

}  // namespace fusednn::cpu
