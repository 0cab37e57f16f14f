// SPDX-License-Identifier: Apache-2.0
// CUDA errors become fusednn::StatusError: FDNN_STATUS_OUT_OF_MEMORY for allocation failures,
// FDNN_STATUS_DEVICE_ERROR for the rest, with the failing call, where it was made and
// cudaGetErrorString's text. The library never exits or aborts on a CUDA error.
#pragma once

#include <cuda_runtime_api.h>

namespace fusednn::cuda {

[[noreturn]] void throw_cuda_error(cudaError_t error, const char* call, const char* file, int line);

// The status a CUDA error maps to.
bool is_out_of_memory(cudaError_t error) noexcept;

}  // namespace fusednn::cuda

// Evaluates a CUDA runtime call once and throws on failure.
#define FDNN_CUDA_CHECK(call)                                                          \
  do {                                                                                 \
    const cudaError_t fdnn_cuda_status_ = (call);                                      \
    if (fdnn_cuda_status_ != cudaSuccess) {                                            \
      ::fusednn::cuda::throw_cuda_error(fdnn_cuda_status_, #call, __FILE__, __LINE__); \
    }                                                                                  \
  } while (0)
