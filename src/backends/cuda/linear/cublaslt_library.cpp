// SPDX-License-Identifier: Apache-2.0

#include "backends/cuda/linear/cublaslt_library.hpp"

#include <dlfcn.h>

#include <vector>

#include "backends/cuda/linear/cublaslt_sonames.hpp"

namespace fusednn::cuda {
namespace {

#define FDNN_STRINGIFY_INNER(x) #x
#define FDNN_STRINGIFY(x) FDNN_STRINGIFY_INNER(x)

// The sonames tried, in order, with the cublasLtGetVersion() values accepted from each: any
// release of the major built against; for a CUDA 11 build, then cuBLAS 12 from 12.2 (JetPack
// 6.0's) through 12.9, the releases whose headers and libraries tools/check_cublaslt_cuda12.sh
// checks.
// The names are literals: the packaging checks read them from the library.
constexpr size_t kBuiltMajor = CUBLAS_VER_MAJOR;
const std::vector<CublasLtCandidate>& candidates() {
  static const std::vector<CublasLtCandidate> list = {
    {"libcublasLt.so." FDNN_STRINGIFY(CUBLAS_VER_MAJOR), kBuiltMajor * 10000,
     (kBuiltMajor + 1) * 10000},
#if CUBLAS_VER_MAJOR == 11
    {"libcublasLt.so.12", 120200, 130000},
#endif
  };
  return list;
}

struct Loaded {
  CublasLtLibrary library;
  bool ok = false;
  std::string reason;
};

// dlopen, then cublasLtGetVersion, for pick_cublaslt_library.
CublasLtOpened open_library(const char* soname) {
  CublasLtOpened opened;
  dlerror();
  void* handle = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* error = dlerror();
    opened.error = error ? error : "";
    return opened;
  }
  const auto get_version =
      reinterpret_cast<decltype(&cublasLtGetVersion)>(dlsym(handle, "cublasLtGetVersion"));
  if (get_version == nullptr) {
    dlclose(handle);
    opened.error = "it has no cublasLtGetVersion";
    return opened;
  }
  opened.handle = handle;
  opened.version = get_version();
  return opened;
}

template <typename Function>
bool resolve(void* handle, const char* soname, const char* name, Function* target,
             std::string* reason) {
  dlerror();
  void* symbol = dlsym(handle, name);
  if (symbol == nullptr) {
    const char* error = dlerror();
    *reason = std::string(soname) + " has no " + name + (error ? std::string(": ") + error : "");
    return false;
  }
  *target = reinterpret_cast<Function>(symbol);
  return true;
}

Loaded load() {
  Loaded loaded;
  const CublasLtPick pick =
      pick_cublaslt_library(candidates(), open_library, [](void* handle) { dlclose(handle); });
  if (pick.handle == nullptr) {
    loaded.reason = pick.reason +
                    "; install the CUDA toolkit's cuBLAS or add its lib directory to "
                    "LD_LIBRARY_PATH";
    return loaded;
  }
  void* handle = pick.handle;
  CublasLtLibrary& l = loaded.library;
  l.soname = candidates()[pick.candidate].soname;
  l.version = pick.version;
  l.origin = std::string(l.soname) + " (cuBLASLt " + cublaslt_version_text(pick.version) +
             (pick.reason.empty() ? "" : "; " + pick.reason) + ")";
  const char* so = l.soname;
  std::string& why = loaded.reason;
  loaded.ok =
      resolve(handle, so, "cublasLtCreate", &l.create, &why) &&
      resolve(handle, so, "cublasLtDestroy", &l.destroy, &why) &&
      resolve(handle, so, "cublasLtGetStatusName", &l.status_name, &why) &&
      resolve(handle, so, "cublasLtGetStatusString", &l.status_string, &why) &&
      resolve(handle, so, "cublasLtMatmul", &l.matmul, &why) &&
      resolve(handle, so, "cublasLtMatmulAlgoGetHeuristic", &l.algo_get_heuristic, &why) &&
      resolve(handle, so, "cublasLtMatmulDescInit_internal", &l.matmul_desc_init_internal, &why) &&
      resolve(handle, so, "cublasLtMatmulDescSetAttribute", &l.matmul_desc_set_attribute, &why) &&
      resolve(handle, so, "cublasLtMatmulPreferenceCreate", &l.preference_create, &why) &&
      resolve(handle, so, "cublasLtMatmulPreferenceDestroy", &l.preference_destroy, &why) &&
      resolve(handle, so, "cublasLtMatmulPreferenceSetAttribute", &l.preference_set_attribute,
              &why) &&
      resolve(handle, so, "cublasLtMatrixLayoutInit_internal", &l.matrix_layout_init_internal,
              &why);
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
