// SPDX-License-Identifier: Apache-2.0
// Softmax over the last dimension: y = exp(x - max) / sum(exp(x - max)) per row.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "backends/cuda/platform/device_info.hpp"

namespace fusednn::cuda {

struct SoftmaxArgs {
  const float* x = nullptr;
  float* y = nullptr;
  int64_t rows = 0;
  int64_t row_size = 0;
};
void launch_softmax(const SoftmaxArgs& args, const DeviceInfo& device, cudaStream_t stream);

}  // namespace fusednn::cuda
