// SPDX-License-Identifier: Apache-2.0
// Per row: the maximum, then exp(x - max) written to y and summed in kLanes interleaved partial
// sums combined in a fixed order, then y / sum. x == y works: each pass reads an element before
// writing it.
#include "backends/cpu/softmax.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace fusednn::cpu {
namespace {

constexpr int64_t kLanes = 8;

float row_max(const float* x, int64_t count) {
  float lanes[kLanes];
  for (int64_t j = 0; j < kLanes; ++j) lanes[j] = -std::numeric_limits<float>::infinity();
  int64_t i = 0;
  for (; i + kLanes <= count; i += kLanes) {
    for (int64_t j = 0; j < kLanes; ++j) lanes[j] = std::max(lanes[j], x[i + j]);
  }
  float max = lanes[0];
  for (int64_t j = 1; j < kLanes; ++j) max = lanes[j] > max ? lanes[j] : max;
  for (; i < count; ++i) max = x[i] > max ? x[i] : max;
  return max;
}

// y[i] = exp(x[i] - max); returns the sum of y.
float exp_and_sum(const float* x, float max, float* y, int64_t count) {
  float lanes[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= count; i += kLanes) {
    for (int64_t j = 0; j < kLanes; ++j) {
      const float e = std::exp(x[i + j] - max);
      y[i + j] = e;
      lanes[j] += e;
    }
  }
  float total = 0.0f;
  for (int64_t j = 0; j < kLanes; ++j) total += lanes[j];
  for (; i < count; ++i) {
    const float e = std::exp(x[i] - max);
    y[i] = e;
    total += e;
  }
  return total;
}

}  // namespace

void softmax_forward(const float* x, float* y, int64_t rows, int64_t row_size) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* x_row = x + r * row_size;
    float* y_row = y + r * row_size;
    const float max = row_max(x_row, row_size);
    const float sum = exp_and_sum(x_row, max, y_row, row_size);
    for (int64_t i = 0; i < row_size; ++i) y_row[i] /= sum;
  }
}

}  // namespace fusednn::cpu
