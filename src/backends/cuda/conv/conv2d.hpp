// SPDX-License-Identifier: Apache-2.0
// Conv2d over NCHW with stride, padding, dilation and groups; bias and epilogue fused.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "backends/cuda/device/device_epilogue.hpp"
#include "backends/cuda/platform/device_info.hpp"

namespace fusednn::cuda {

struct Conv2dArgs {
  const float* x = nullptr;
  const float* weight = nullptr;  // [out_channels][in_channels / groups][kernel_h][kernel_w]
  const float* bias = nullptr;    // [out_channels] or null
  float* y = nullptr;
  int64_t batch = 0;
  int32_t in_channels = 0, in_height = 0, in_width = 0;
  int32_t out_channels = 0, out_height = 0, out_width = 0;
  int32_t kernel_height = 1, kernel_width = 1;
  int32_t stride_height = 1, stride_width = 1;
  int32_t padding_height = 0, padding_width = 0;
  int32_t dilation_height = 1, dilation_width = 1;
  int32_t groups = 1;
  DeviceEpilogue epilogue;
};
// Whether the staged form (a sample's input and a channel's filters in 48 KB of shared memory)
// takes this geometry; anything else runs on the global-memory form.
bool conv2d_fits_staged(const Conv2dArgs& args);
void launch_conv2d(const Conv2dArgs& args, const DeviceInfo& device, cudaStream_t stream);

}  // namespace fusednn::cuda
