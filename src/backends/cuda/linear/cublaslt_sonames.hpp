// SPDX-License-Identifier: Apache-2.0
// Which cuBLASLt library the process loads: the sonames to try, in order, each with the
// cublasLtGetVersion() values accepted from it, and the choice among them through a loader given
// as callbacks (dlopen in cublaslt_library.cpp, a fake in the tests). Host code without CUDA
// headers, so that the choice is tested in every configuration.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace fusednn::cuda {

// One soname to try. Versions are cublasLtGetVersion()'s: major * 10000 + minor * 100 + patch;
// those in [first_version, end_version) are accepted.
struct CublasLtCandidate {
  const char* soname;
  size_t first_version;
  size_t end_version;
};

// What the loader got for one soname: a handle and the library's version, or null and why not.
struct CublasLtOpened {
  void* handle = nullptr;
  size_t version = 0;
  std::string error;  // dlerror's text, or a missing cublasLtGetVersion; set when handle is null
};

// The loaded library: its handle, candidate index and version; or a null handle. `reason` says
// what was tried and why each soname before the loaded one, or every soname, was passed over.
struct CublasLtPick {
  void* handle = nullptr;
  size_t candidate = 0;
  size_t version = 0;
  std::string reason;
};

// Opens the candidates in order until one opens with a version in its range; one that opens
// outside its range is closed again. Never throws on the loader's account (its errors are text).
CublasLtPick pick_cublaslt_library(const std::vector<CublasLtCandidate>& candidates,
                                   const std::function<CublasLtOpened(const char* soname)>& open,
                                   const std::function<void(void* handle)>& close);

// "12.6.1" for 120601.
std::string cublaslt_version_text(size_t version);

}  // namespace fusednn::cuda
