// SPDX-License-Identifier: Apache-2.0
// What every harness asserts beyond "no crash": a refused input comes with a status the API
// documents and a message saying why. A broken promise aborts, which libFuzzer reports as a
// finding with the input that caused it.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "fusednn/fusednn.h"

namespace fusednn_fuzz {

[[noreturn]] inline void broken_promise(const char* what, const char* detail) {
  std::fprintf(stderr, "fusednn fuzz: %s: %s\n", what, detail);
  std::abort();
}

// A failed call must set a message; an internal error means the library missed a check.
inline void check_refusal(fdnn_status status, const char* call) {
  if (status == FDNN_STATUS_OK) return;
  const char* message = fdnn_last_error_message();
  if (message == nullptr || std::strlen(message) == 0) {
    broken_promise(call, "failed with no message");
  }
  if (status == FDNN_STATUS_INTERNAL_ERROR) broken_promise(call, message);
}

}  // namespace fusednn_fuzz
