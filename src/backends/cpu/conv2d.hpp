// SPDX-License-Identifier: Apache-2.0
// Conv2d on NCHW tensors with stride, zero padding, dilation and groups (PyTorch semantics),
// bias and an elementwise epilogue fused.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/elementwise_op.hpp"

namespace fusednn::cpu {

struct Conv2dGeometry {
  int64_t in_channels, in_height, in_width;
  int64_t out_channels, out_height, out_width;
  int64_t kernel_height, kernel_width;
  int64_t stride_height, stride_width;
  int64_t padding_height, padding_width;
  int64_t dilation_height, dilation_width;
  int64_t groups;
};

// The two ways conv2d_forward reads its input (conv2d.cpp): shifted windows of the (padded)
// input plane, or an im2col copy. A function of the geometry alone; *reason (when not null)
// receives what decided it.
enum class Conv2dForm { ShiftedWindows, Im2col };
Conv2dForm conv2d_form(const Conv2dGeometry& geometry, std::string* reason = nullptr);

// Floats of scratch one conv2d_forward call needs (independent of the batch).
size_t conv2d_scratch_floats(const Conv2dGeometry& geometry);

// weight is [out_channels, in_channels / groups, kernel_height, kernel_width]; bias may be null.
// scratch holds conv2d_scratch_floats(geometry) floats. x and y must not overlap.
void conv2d_forward(const float* x, const float* weight, const float* bias, float* y, int64_t batch,
                    const Conv2dGeometry& geometry, const Epilogue& epilogue, float* scratch);

}  // namespace fusednn::cpu
