// SPDX-License-Identifier: Apache-2.0
// The caller's 16-bit inputs and outputs on the device path: widened into the context's float32
// input buffer before a run and narrowed from its float32 output after (round to nearest even,
// as common/half_float.hpp does on the host); and the 16-bit x of cuBLASLt's Linear layers in
// fp16 and bf16 models. Memory-bound streams of count elements.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "backends/cuda/platform/device_info.hpp"

namespace fusednn::cuda {

enum class HalfFormat : int32_t { Binary16 = 1, Bfloat16 = 2 };  // fdnn_dtype's values

void launch_widen(const void* x, HalfFormat format, float* y, int64_t count,
                  const DeviceInfo& device, cudaStream_t stream);
void launch_narrow(const float* x, void* y, HalfFormat format, int64_t count,
                   const DeviceInfo& device, cudaStream_t stream);

}  // namespace fusednn::cuda
