// SPDX-License-Identifier: Apache-2.0
// Two passes over each row: the mean, then the biased variance of (x - mean), both summed in
// kLanes interleaved partial sums (which the compiler keeps in one vector) combined in a fixed
// order; then y = (x - mean) * rstd [* gamma + beta] and the epilogue.
#include "backends/cpu/layer_norm.hpp"

#include <cmath>

#include "backends/cpu/epilogue.hpp"

namespace fusednn::cpu {
namespace {

constexpr int64_t kLanes = 8;

float combine_lanes(const float* lanes) {
  float total = 0.0f;
  for (int64_t j = 0; j < kLanes; ++j) total += lanes[j];
  return total;
}

float row_sum(const float* x, int64_t count) {
  float lanes[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= count; i += kLanes) {
    for (int64_t j = 0; j < kLanes; ++j) lanes[j] += x[i + j];
  }
  float total = combine_lanes(lanes);
  for (; i < count; ++i) total += x[i];
  return total;
}

float row_squared_deviation(const float* x, int64_t count, float mean) {
  float lanes[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= count; i += kLanes) {
    for (int64_t j = 0; j < kLanes; ++j) {
      const float deviation = x[i + j] - mean;
      lanes[j] += deviation * deviation;
    }
  }
  float total = combine_lanes(lanes);
  for (; i < count; ++i) {
    const float deviation = x[i] - mean;
    total += deviation * deviation;
  }
  return total;
}

}  // namespace

void layer_norm_forward(const float* x, const float* gamma, const float* beta, float* y,
                        int64_t rows, int64_t row_size, float eps, const Epilogue& epilogue) {
  if (row_size <= 0) return;
  const float inverse_size = 1.0f / static_cast<float>(row_size);
  for (int64_t r = 0; r < rows; ++r) {
    const float* x_row = x + r * row_size;
    float* y_row = y + r * row_size;
    const float mean = row_sum(x_row, row_size) * inverse_size;
    const float variance = row_squared_deviation(x_row, row_size, mean) * inverse_size;
    const float rstd = 1.0f / std::sqrt(variance + eps);
    if (gamma && beta) {
      for (int64_t i = 0; i < row_size; ++i) {
        y_row[i] = (x_row[i] - mean) * rstd * gamma[i] + beta[i];
      }
    } else if (gamma) {  // LayerNorm(bias=False)
      for (int64_t i = 0; i < row_size; ++i) y_row[i] = (x_row[i] - mean) * rstd * gamma[i];
    } else {
      for (int64_t i = 0; i < row_size; ++i) y_row[i] = (x_row[i] - mean) * rstd;
    }
    apply_epilogue(epilogue, y_row, row_size);
  }
}

}  // namespace fusednn::cpu
