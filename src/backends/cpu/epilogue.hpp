// SPDX-License-Identifier: Apache-2.0
// Running an Epilogue over a whole range in place. Internal to the CPU backend.
#pragma once

#include <cstdint>

#include "common/elementwise_op.hpp"

namespace fusednn::cpu {

// data[i] = apply(epilogue, data[i]) for i < count, bit for bit: each op runs over the whole range
// in its own loop, specialised on its kind, and every loop vectorises (the transcendental ops
// through common/float_math.hpp); those run eight lanes wide with AVX2 (when GemmIsa::Avx2Fma is
// chosen or forced).
void apply_epilogue(const Epilogue& epilogue, float* data, int64_t count);

}  // namespace fusednn::cpu
