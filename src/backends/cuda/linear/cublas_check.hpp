// SPDX-License-Identifier: Apache-2.0
// cuBLAS / cuBLASLt errors become fusednn::StatusError as CUDA errors do (cuda_check.hpp):
// FDNN_STATUS_OUT_OF_MEMORY for CUBLAS_STATUS_ALLOC_FAILED, FDNN_STATUS_DEVICE_ERROR for the
// rest, with the failing call, where it was made and cublasLtGetStatusString's text. Kept apart
// from cuda_check.hpp so that the kernels' translation units never parse the cuBLAS headers.
#pragma once

#include <cublasLt.h>

#include <string>

namespace fusednn::cuda {

[[noreturn]] void throw_cublas_error(cublasStatus_t status, const char* call, const char* file,
                                     int line);

// The library's message and the status's name: "the functionality requested is not supported
// (CUBLAS_STATUS_NOT_SUPPORTED)".
std::string cublas_status_text(cublasStatus_t status);

}  // namespace fusednn::cuda

// Evaluates a cuBLAS / cuBLASLt call once and throws on failure.
#define FDNN_CUBLAS_CHECK(call)                                                            \
  do {                                                                                     \
    const cublasStatus_t fdnn_cublas_status_ = (call);                                     \
    if (fdnn_cublas_status_ != CUBLAS_STATUS_SUCCESS) {                                    \
      ::fusednn::cuda::throw_cublas_error(fdnn_cublas_status_, #call, __FILE__, __LINE__); \
    }                                                                                      \
  } while (0)
