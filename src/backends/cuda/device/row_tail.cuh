// SPDX-License-Identifier: Apache-2.0
// A Softmax or LayerNorm folded into a tensor-core MLP's last layer, on output rows held in mma's
// C layout (the WarpRegisters and Warpgroup forms): a thread holds columns 8n + 2t and 8n + 2t + 1
// of rows g (v[n][0], v[n][1]) and g + 8 (v[n][2], v[n][3]), so a row's columns are spread over the
// 4 lanes of its fragment group, two shuffles apart. The CPU backend's formulas: exp(x - max) /
// sum; (x - mean) * rstd [* gamma + beta] with the variance around the mean and
// rstd = 1 / sqrt(variance + eps).
#pragma once

#include <cmath>

#include "backends/cuda/device/relu.cuh"

namespace fusednn::cuda {

// The sum (or the max) of the values of one row across the 4 lanes of the fragment group.
__device__ __forceinline__ float group_sum(float value) {
  value += __shfl_xor_sync(0xffffffffu, value, 1);
  return value + __shfl_xor_sync(0xffffffffu, value, 2);
}
__device__ __forceinline__ float group_max(float value) {
  value = fmaxf(value, __shfl_xor_sync(0xffffffffu, value, 1));
  return fmaxf(value, __shfl_xor_sync(0xffffffffu, value, 2));
}

// v (the last layer's products) normalised in place over the row's `out` columns, of which the
// first `tiles` 8-column tiles hold any. First, where `bias` is not null, its tile n's column pair
// (bias[4 n].x, .y) is added, then ReLU where `relu`. gamma and beta: the LayerNorm's constants
// [out], or null.
template <int kTiles>
__device__ __forceinline__ void normalize_rows(float (&v)[kTiles][4], int tiles, int out, int t,
                                               const float4* bias, bool relu, bool softmax,
                                               float eps, const float* gamma, const float* beta) {
  float first[2] = {softmax ? -INFINITY : 0.0f, softmax ? -INFINITY : 0.0f};
#pragma unroll
  for (int n = 0; n < kTiles; ++n) {
    if (n >= tiles) break;
    const int col = n * 8 + 2 * t;
    const float4 b = bias != nullptr ? bias[4 * n] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      v[n][i] += (i & 1) ? b.y : b.x;
      if (relu) v[n][i] = relu_keeping_nan(v[n][i]);
      if (col + (i & 1) < out) {
        first[i / 2] = softmax ? fmaxf(first[i / 2], v[n][i]) : first[i / 2] + v[n][i];
      }
    }
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    first[h] = softmax ? group_max(first[h]) : group_sum(first[h]) / static_cast<float>(out);
  }
  // Softmax: exp(x - max) and its sum; LayerNorm: the squared deviations from the mean.
  float second[2] = {0.0f, 0.0f};
#pragma unroll
  for (int n = 0; n < kTiles; ++n) {
    if (n >= tiles) break;
    const int col = n * 8 + 2 * t;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float centred = v[n][i] - first[i / 2];
      if (softmax) v[n][i] = expf(centred);
      if (col + (i & 1) < out) second[i / 2] += softmax ? v[n][i] : centred * centred;
    }
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    second[h] = group_sum(second[h]);
    if (!softmax) second[h] = 1.0f / sqrtf(second[h] / static_cast<float>(out) + eps);
  }
#pragma unroll
  for (int n = 0; n < kTiles; ++n) {
    if (n >= tiles) break;
    const int col = n * 8 + 2 * t;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      if (softmax) {
        v[n][i] = v[n][i] / second[i / 2];
      } else {
        const int c = col + (i & 1);
        float y = (v[n][i] - first[i / 2]) * second[i / 2];
        if (gamma != nullptr) y = y * gamma[c];  // read up to the tile's end: padded
        if (beta != nullptr) y = y + beta[c];
        v[n][i] = y;
      }
    }
  }
}

}  // namespace fusednn::cuda
