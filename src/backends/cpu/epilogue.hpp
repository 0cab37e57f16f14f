// Running an Epilogue over a whole range in place. Internal to the CPU backend.
#pragma once

#include <cstdint>

#include "common/elementwise_op.hpp"

namespace fusednn::cpu {

// data[i] = apply(epilogue, data[i]) for i < count, bit for bit: each op runs over the whole range
// in its own loop, specialised on its kind, so that plain arithmetic (ReLU, LeakyReLU, Scale)
// vectorises while the transcendental ones call the same scalar std:: functions apply() does.
void apply_epilogue(const Epilogue& epilogue, float* data, int64_t count);

}  // namespace fusednn::cpu
