// SPDX-License-Identifier: Apache-2.0
// cuBLASLt, loaded when a model first needs it rather than when libfusednn is loaded: a
// libfusednn built with CUDA then still loads, and runs on the CPU, on a machine without the
// CUDA libraries, and a GPU model without a wide Linear never touches cuBLASLt. Loaded once per
// process with dlopen("libcublasLt.so.<the major version built against>") and never unloaded;
// a CUDA 11 build tries libcublasLt.so.12 (cuBLAS 12.2 to 12.9) next, where the 11 library is
// absent (JetPack 6): every function, type and value fusednn uses is the same in both headers,
// and cuBLAS 12 lays a matmul descriptor out within the smaller storage CUDA 11's header declares
// (tools/check_cublaslt_cuda12.sh checks both).
#pragma once

#include <cublasLt.h>

#include <cstddef>
#include <string>

namespace fusednn::cuda {

// The entry points the backend calls (cublasLtMatrixLayoutInit and cublasLtMatmulDescInit are
// inline wrappers of the exported *_internal functions).
struct CublasLtLibrary {
  decltype(&cublasLtCreate) create = nullptr;
  decltype(&cublasLtDestroy) destroy = nullptr;
  decltype(&cublasLtGetStatusName) status_name = nullptr;
  decltype(&cublasLtGetStatusString) status_string = nullptr;
  decltype(&cublasLtMatmul) matmul = nullptr;
  decltype(&cublasLtMatmulAlgoGetHeuristic) algo_get_heuristic = nullptr;
  decltype(&cublasLtMatmulDescInit_internal) matmul_desc_init_internal = nullptr;
  decltype(&cublasLtMatmulDescSetAttribute) matmul_desc_set_attribute = nullptr;
  decltype(&cublasLtMatmulPreferenceCreate) preference_create = nullptr;
  decltype(&cublasLtMatmulPreferenceDestroy) preference_destroy = nullptr;
  decltype(&cublasLtMatmulPreferenceSetAttribute) preference_set_attribute = nullptr;
  decltype(&cublasLtMatrixLayoutInit_internal) matrix_layout_init_internal = nullptr;

  const char* soname = nullptr;  // the library loaded, e.g. "libcublasLt.so.12"
  size_t version = 0;            // its cublasLtGetVersion()
  // Which library, its version and why the sonames tried before it were passed over, for the
  // backend's explanation: "libcublasLt.so.12 (cuBLASLt 12.6.1; cannot load libcublasLt.so.11
  // (...))".
  std::string origin;

  cublasStatus_t matmul_desc_init(cublasLtMatmulDesc_t desc, cublasComputeType_t compute,
                                  cudaDataType_t scale) const {
    return matmul_desc_init_internal(desc, sizeof(*desc), compute, scale);
  }
  cublasStatus_t matrix_layout_init(cublasLtMatrixLayout_t layout, cudaDataType type, uint64_t rows,
                                    uint64_t cols, int64_t ld) const {
    return matrix_layout_init_internal(layout, sizeof(*layout), type, rows, cols, ld);
  }
};

// The process's cuBLASLt, or null when it cannot be loaded; *reason then says why (each soname
// tried, and dlerror's text or the version refused). Thread-safe; the first call loads.
const CublasLtLibrary* cublaslt_library(std::string* reason);

}  // namespace fusednn::cuda
