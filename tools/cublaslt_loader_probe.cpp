// SPDX-License-Identifier: Apache-2.0
// Loads cuBLASLt through the backend's own loader (src/backends/cuda/linear/cublaslt_library.cpp,
// compiled in with the cuBLAS headers of the build checked) and prints which library it took, or
// why none: tools/check_cublaslt_cuda12.sh runs it against a folder holding only
// libcublasLt.so.12. No GPU is needed: loading resolves symbols and reads the version only.
// Usage: cublaslt_loader_probe   exit status 0: loaded, 1: not
#include <cstdio>
#include <string>

#include "backends/cuda/linear/cublaslt_library.hpp"

int main() {
  std::string reason;
  const fusednn::cuda::CublasLtLibrary* library = fusednn::cuda::cublaslt_library(&reason);
  if (library == nullptr) {
    std::printf("not loaded: %s\n", reason.c_str());
    return 1;
  }
  std::printf("loaded: %s\n", library->origin.c_str());
  return 0;
}
