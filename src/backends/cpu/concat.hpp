// SPDX-License-Identifier: Apache-2.0
// Concatenation along one axis: for each of `outer` blocks, copy each input's inner block in turn.
#pragma once

#include <cstdint>

namespace fusednn::cpu {

// inputs[k] holds outer x inner_sizes[k] floats; y holds outer x sum(inner_sizes) floats.
void concat_forward(const float* const* inputs, const int64_t* inner_sizes, int input_count,
                    float* y, int64_t outer);

}  // namespace fusednn::cpu
