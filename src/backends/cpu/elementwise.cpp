// SPDX-License-Identifier: Apache-2.0
// Elementwise chains run a chunk at a time: the first step writes the chunk of y, then every op
// of the epilogue passes over it while it is still in L1.
#include "backends/cpu/elementwise.hpp"

#include <algorithm>

#include "backends/cpu/epilogue.hpp"

namespace fusednn::cpu {
namespace {

constexpr int64_t kChunk = 2048;  // 8 KiB of floats

}  // namespace

void elementwise_forward(const float* x, float* y, int64_t count, const Epilogue& epilogue) {
  for (int64_t begin = 0; begin < count; begin += kChunk) {
    const int64_t size = std::min(kChunk, count - begin);
    if (x != y) std::copy(x + begin, x + begin + size, y + begin);
    apply_epilogue(epilogue, y + begin, size);
  }
}

void add_forward(const float* a, const float* b, float* y, int64_t count,
                 const Epilogue& epilogue) {
  for (int64_t begin = 0; begin < count; begin += kChunk) {
    const int64_t size = std::min(kChunk, count - begin);
    const float* a_chunk = a + begin;
    const float* b_chunk = b + begin;
    float* y_chunk = y + begin;
    for (int64_t i = 0; i < size; ++i) y_chunk[i] = a_chunk[i] + b_chunk[i];
    apply_epilogue(epilogue, y_chunk, size);
  }
}

}  // namespace fusednn::cpu
