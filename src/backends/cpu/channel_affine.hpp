// SPDX-License-Identifier: Apache-2.0
// y = x * scale[c] + shift[c] per channel: a BatchNorm that could not be folded into a preceding
// Linear or Conv2d (for example one that follows a ReLU).
#pragma once

#include <cstdint>

#include "common/elementwise_op.hpp"

namespace fusednn::cpu {

// x and y are [batch, channels, spatial]; x == y is allowed.
void channel_affine_forward(const float* x, const float* scale, const float* shift, float* y,
                            int64_t batch, int64_t channels, int64_t spatial,
                            const Epilogue& epilogue);

}  // namespace fusednn::cpu
