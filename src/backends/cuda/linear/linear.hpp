// SPDX-License-Identifier: Apache-2.0
// Linear with any in/out width: y[rows][out] = epilogue(x[rows][in] * W^T + bias), W as PyTorch
// stores it ([out][in]). The backend runs lone Linear layers through cuBLASLt
// (linear_cublaslt.hpp), whose weights are in this layout too; this tiled GEMM is the fallback for
// the calls where cuBLASLt's heuristic offers no algorithm.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "backends/cuda/device/device_epilogue.hpp"
#include "backends/cuda/platform/device_info.hpp"

namespace fusednn::cuda {

struct LinearArgs {
  const float* x = nullptr;
  const float* weight = nullptr;  // [out][in]
  const float* bias = nullptr;    // [out] or null
  float* y = nullptr;
  int64_t rows = 0;
  int32_t in = 0;
  int32_t out = 0;
  DeviceEpilogue epilogue;
};
void launch_linear(const LinearArgs& args, const DeviceInfo& device, cudaStream_t stream);

}  // namespace fusednn::cuda
