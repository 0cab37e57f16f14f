// SPDX-License-Identifier: Apache-2.0
// MaxPool2d and AvgPool2d on NCHW tensors (PyTorch semantics, ceil_mode=False).
#pragma once

#include <cstdint>

namespace fusednn::cpu {

struct Pool2dGeometry {
  int64_t channels, in_height, in_width;
  int64_t out_height, out_width;
  int64_t kernel_height, kernel_width;
  int64_t stride_height, stride_width;
  int64_t padding_height, padding_width;
  bool count_include_pad;  // AvgPool2d: divide by the full window, padding included
};

// Padding counts as -infinity.
void max_pool2d_forward(const float* x, float* y, int64_t batch, const Pool2dGeometry& geometry);
void avg_pool2d_forward(const float* x, float* y, int64_t batch, const Pool2dGeometry& geometry);

}  // namespace fusednn::cpu
