// SPDX-License-Identifier: Apache-2.0
// Unary elementwise chains (activations, Scale) and the binary Add with an epilogue.
#pragma once

#include <cstdint>

#include "common/elementwise_op.hpp"

namespace fusednn::cpu {

// y[i] = epilogue(x[i]); x == y is allowed.
void elementwise_forward(const float* x, float* y, int64_t count, const Epilogue& epilogue);

// y[i] = epilogue(a[i] + b[i]); y may alias a or b.
void add_forward(const float* a, const float* b, float* y, int64_t count, const Epilogue& epilogue);

}  // namespace fusednn::cpu
