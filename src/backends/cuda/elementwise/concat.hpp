// SPDX-License-Identifier: Apache-2.0
// Concat (one launch per input, each writing its columns of every outer block) and Copy (one
// input, one block): y[o * y_row + y_offset + j] = x[o * x_row + j] for o < outer, j < x_row.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "backends/cuda/platform/device_info.hpp"

namespace fusednn::cuda {

struct StridedCopyArgs {
  const float* x = nullptr;
  float* y = nullptr;  // the base of the output; y_offset says where this input's columns start
  int64_t outer = 0;
  int64_t x_row = 0;
  int64_t y_row = 0;
  int64_t y_offset = 0;
};
void launch_strided_copy(const StridedCopyArgs& args, const DeviceInfo& device,
                         cudaStream_t stream);

}  // namespace fusednn::cuda
