// SPDX-License-Identifier: Apache-2.0
// Softmax over the last dimension, max-subtracted for stability.
#pragma once

#include <cstdint>

namespace fusednn::cpu {

// x == y is allowed.
void softmax_forward(const float* x, float* y, int64_t rows, int64_t row_size);

}  // namespace fusednn::cpu
