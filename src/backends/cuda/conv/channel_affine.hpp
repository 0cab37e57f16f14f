// SPDX-License-Identifier: Apache-2.0
// ChannelAffine: an unfolded BatchNorm, y = epilogue(x * scale[c] + shift[c]) over
// [batch][channels][spatial].
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "backends/cuda/device/device_epilogue.hpp"
#include "backends/cuda/platform/device_info.hpp"

namespace fusednn::cuda {

struct ChannelAffineArgs {
  const float* x = nullptr;
  const float* scale = nullptr;
  const float* shift = nullptr;
  float* y = nullptr;
  int64_t batch = 0;
  int64_t channels = 0;
  int64_t spatial = 0;
  DeviceEpilogue epilogue;
};
void launch_channel_affine(const ChannelAffineArgs& args, const DeviceInfo& device,
                           cudaStream_t stream);

}  // namespace fusednn::cuda
