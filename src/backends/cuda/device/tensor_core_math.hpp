// SPDX-License-Identifier: Apache-2.0
// How a tensor-core kernel multiplies (the MLP forms and the implicit-GEMM convolution share it).
#pragma once

#include <cstdint>

namespace fusednn::cuda {

// Tf32   : tf32 operands, fp32 accumulation (precision tf32).
// Tf32x3 : each fp32 operand split into a tf32 "big" part and a tf32 remainder; three products
//          recover fp32 accuracy (precision fp32 where tensor cores pay).
// Fp16 / Bf16 : operands stored in that type, fp32 accumulation.
enum class TensorCoreMath : int32_t { Tf32 = 0, Tf32x3 = 1, Fp16 = 2, Bf16 = 3 };

}  // namespace fusednn::cuda
