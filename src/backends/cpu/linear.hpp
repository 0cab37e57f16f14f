// Linear: y[r, o] = epilogue(sum_i x[r, i] * weight[o, i] + bias[o]), PyTorch's [out, in] layout.
#pragma once

#include <cstdint>

#include "common/elementwise_op.hpp"

namespace fusednn::cpu {

// bias may be null. x and y must not overlap.
void linear_forward(const float* x, const float* weight, const float* bias, float* y, int64_t rows,
                    int64_t in_features, int64_t out_features, const Epilogue& epilogue);

}  // namespace fusednn::cpu
