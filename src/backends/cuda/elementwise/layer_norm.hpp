// SPDX-License-Identifier: Apache-2.0
// LayerNorm over rows: y = epilogue((x - mean) * rstd [* gamma + beta]).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "backends/cuda/device/device_epilogue.hpp"
#include "backends/cuda/platform/device_info.hpp"

namespace fusednn::cuda {

struct LayerNormArgs {
  const float* x = nullptr;
  const float* gamma = nullptr;  // [row_size] or null (no affine)
  const float* beta = nullptr;   // [row_size] or null (no bias)
  float* y = nullptr;
  int64_t rows = 0;
  int64_t row_size = 0;
  float eps = 0.0f;
  DeviceEpilogue epilogue;
};
void launch_layer_norm(const LayerNormArgs& args, const DeviceInfo& device, cudaStream_t stream);

}  // namespace fusednn::cuda
