// SPDX-License-Identifier: Apache-2.0

#include "backends/cuda/platform/cuda_check.hpp"

#include <cstring>

#include "common/error.hpp"

namespace fusednn::cuda {

bool is_out_of_memory(cudaError_t error) noexcept { return error == cudaErrorMemoryAllocation; }

void throw_cuda_error(cudaError_t error, const char* call, const char* file, int line) {
  // Only the file's name: the build machine's directories mean nothing to the caller.
  const char* slash = std::strrchr(file, '/');
  const char* name = slash ? slash + 1 : file;
  if (is_out_of_memory(error)) {
    fail(FDNN_STATUS_OUT_OF_MEMORY, "CUDA call ", call, " failed (", name, ":", line,
         "): ", cudaGetErrorString(error), " (", cudaGetErrorName(error),
         "); lower max_batch or free GPU memory");
  }
  fail(FDNN_STATUS_DEVICE_ERROR, "CUDA call ", call, " failed (", name, ":", line,
       "): ", cudaGetErrorString(error), " (", cudaGetErrorName(error), ")");
}

}  // namespace fusednn::cuda
