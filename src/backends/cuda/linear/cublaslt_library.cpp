// SPDX-License-Identifier: Apache-2.0

#include "backends/cuda/linear/cublaslt_library.hpp"

#include <dlfcn.h>

namespace fusednn::cuda {
namespace {

#define FDNN_STRINGIFY_INNER(x) #x
#define FDNN_STRINGIFY(x) FDNN_STRINGIFY_INNER(x)
constexpr const char* kLibraryName = "libcublasLt.so." FDNN_STRINGIFY(CUBLAS_VER_MAJOR);

struct Loaded {
  CublasLtLibrary library;
  bool ok = false;
  std::string reason;
};

template <typename Function>
bool resolve(void* handle, const char* name, Function* target, std::string* reason) {
  dlerror();
  void* symbol = dlsym(handle, name);
  if (symbol == nullptr) {
    const char* error = dlerror();
    *reason =
        std::string(kLibraryName) + " has no " + name + (error ? std::string(": ") + error : "");
    return false;
  }
  *target = reinterpret_cast<Function>(symbol);
  return true;
}

Loaded load() {
  Loaded loaded;
  void* handle = dlopen(kLibraryName, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* error = dlerror();
    loaded.reason = std::string("cannot load ") + kLibraryName + " (" +
                    (error ? error : "unknown error") +
                    "); install the CUDA toolkit's cuBLAS or add its lib directory to "
                    "LD_LIBRARY_PATH";
    return loaded;
  }
  CublasLtLibrary& l = loaded.library;
  std::string& why = loaded.reason;
  loaded.ok =
      resolve(handle, "cublasLtCreate", &l.create, &why) &&
      resolve(handle, "cublasLtDestroy", &l.destroy, &why) &&
      resolve(handle, "cublasLtGetStatusName", &l.status_name, &why) &&
      resolve(handle, "cublasLtGetStatusString", &l.status_string, &why) &&
      resolve(handle, "cublasLtMatmul", &l.matmul, &why) &&
      resolve(handle, "cublasLtMatmulAlgoGetHeuristic", &l.algo_get_heuristic, &why) &&
      resolve(handle, "cublasLtMatmulDescInit_internal", &l.matmul_desc_init_internal, &why) &&
      resolve(handle, "cublasLtMatmulDescSetAttribute", &l.matmul_desc_set_attribute, &why) &&
      resolve(handle, "cublasLtMatmulPreferenceCreate", &l.preference_create, &why) &&
      resolve(handle, "cublasLtMatmulPreferenceDestroy", &l.preference_destroy, &why) &&
      resolve(handle, "cublasLtMatmulPreferenceSetAttribute", &l.preference_set_attribute, &why) &&
      resolve(handle, "cublasLtMatrixLayoutInit_internal", &l.matrix_layout_init_internal, &why);
  if (!loaded.ok) dlclose(handle);
  return loaded;
}

}  // namespace

const CublasLtLibrary* cublaslt_library(std::string* reason) {
  static const Loaded loaded = load();  // thread-safe initialisation, once per process
  if (!loaded.ok) {
    if (reason != nullptr) *reason = loaded.reason;
    return nullptr;
  }
  return &loaded.library;
}

}  // namespace fusednn::cuda
