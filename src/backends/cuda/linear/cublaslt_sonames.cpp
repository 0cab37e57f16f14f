// SPDX-License-Identifier: Apache-2.0

#include "backends/cuda/linear/cublaslt_sonames.hpp"

namespace fusednn::cuda {

std::string cublaslt_version_text(size_t version) {
  return std::to_string(version / 10000) + "." + std::to_string(version / 100 % 100) + "." +
         std::to_string(version % 100);
}

CublasLtPick pick_cublaslt_library(const std::vector<CublasLtCandidate>& candidates,
                                   const std::function<CublasLtOpened(const char* soname)>& open,
                                   const std::function<void(void* handle)>& close) {
  CublasLtPick pick;
  for (size_t i = 0; i < candidates.size(); ++i) {
    const CublasLtCandidate& candidate = candidates[i];
    const CublasLtOpened opened = open(candidate.soname);
    std::string why;
    if (opened.handle == nullptr) {
      why = std::string("cannot load ") + candidate.soname + " (" +
            (opened.error.empty() ? "unknown error" : opened.error) + ")";
    } else if (opened.version < candidate.first_version ||
               opened.version >= candidate.end_version) {
      close(opened.handle);
      why = std::string(candidate.soname) + " is cuBLASLt " +
            cublaslt_version_text(opened.version) + ", outside the " +
            cublaslt_version_text(candidate.first_version) + " to below " +
            cublaslt_version_text(candidate.end_version) + " accepted from it";
    } else {
      pick.handle = opened.handle;
      pick.candidate = i;
      pick.version = opened.version;
      return pick;
    }
    pick.reason += (pick.reason.empty() ? "" : "; ") + why;
  }
  if (candidates.empty()) pick.reason = "no cuBLASLt library to try";
  return pick;
}

}  // namespace fusednn::cuda
