// SPDX-License-Identifier: Apache-2.0
// MaxPool2d and AvgPool2d over NCHW, PyTorch semantics (NaN propagates through max; the average
// divides by the padded window's area or by the input elements it covers).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "backends/cuda/platform/device_info.hpp"

namespace fusednn::cuda {

struct Pool2dArgs {
  const float* x = nullptr;
  float* y = nullptr;
  int64_t planes = 0;  // batch x channels
  int32_t in_height = 0, in_width = 0, out_height = 0, out_width = 0;
  int32_t kernel_height = 1, kernel_width = 1;
  int32_t stride_height = 1, stride_width = 1;
  int32_t padding_height = 0, padding_width = 0;
  int32_t count_include_pad = 1;
};
void launch_max_pool2d(const Pool2dArgs& args, const DeviceInfo& device, cudaStream_t stream);
void launch_avg_pool2d(const Pool2dArgs& args, const DeviceInfo& device, cudaStream_t stream);

}  // namespace fusednn::cuda
