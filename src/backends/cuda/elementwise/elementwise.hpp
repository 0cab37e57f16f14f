// SPDX-License-Identifier: Apache-2.0
// Elementwise (an epilogue chain over one input) and n-ary Add.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "backends/cuda/device/device_epilogue.hpp"
#include "backends/cuda/platform/device_info.hpp"

namespace fusednn::cuda {

// y[i] = epilogue(x[i]) for i < count; x == y is allowed (in place).
struct ElementwiseArgs {
  const float* x = nullptr;
  float* y = nullptr;
  int64_t count = 0;
  DeviceEpilogue epilogue;
};
void launch_elementwise(const ElementwiseArgs& args, const DeviceInfo& device, cudaStream_t stream);

constexpr int kMaxAddInputs = 8;

// y = epilogue(((x0 + x1) + x2) + ...), summed left to right as the CPU backend does; y may be
// x0 (a running sum continued by the next launch).
struct AddArgs {
  const float* x[kMaxAddInputs] = {};
  int32_t input_count = 0;
  float* y = nullptr;
  int64_t count = 0;
  DeviceEpilogue epilogue;
};
void launch_add(const AddArgs& args, const DeviceInfo& device, cudaStream_t stream);

}  // namespace fusednn::cuda
