// SPDX-License-Identifier: Apache-2.0

#include "backends/cuda/linear/cublas_check.hpp"

#include "backends/cuda/linear/cublaslt_library.hpp"

#include <cstring>

#include "common/error.hpp"

namespace fusednn::cuda {

std::string cublas_status_text(cublasStatus_t status) {
  const CublasLtLibrary* library = cublaslt_library(nullptr);
  const char* text = library != nullptr ? library->status_string(status) : nullptr;
  const char* name = library != nullptr ? library->status_name(status) : nullptr;
  std::string result = text != nullptr ? text : "unknown cuBLAS status";
  result += " (";
  result += name != nullptr ? name : std::to_string(static_cast<int>(status));
  result += ")";
  return result;
}

void throw_cublas_error(cublasStatus_t status, const char* call, const char* file, int line) {
  // Only the file's name: the build machine's directories mean nothing to the caller.
  const char* slash = std::strrchr(file, '/');
  const char* name = slash ? slash + 1 : file;
  if (status == CUBLAS_STATUS_ALLOC_FAILED) {
    fail(FDNN_STATUS_OUT_OF_MEMORY, "cuBLAS call ", call, " failed (", name, ":", line,
         "): ", cublas_status_text(status), "; lower max_batch or free GPU memory");
  }
  fail(FDNN_STATUS_DEVICE_ERROR, "cuBLAS call ", call, " failed (", name, ":", line,
       "): ", cublas_status_text(status));
}

}  // namespace fusednn::cuda
