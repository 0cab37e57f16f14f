// SPDX-License-Identifier: Apache-2.0
// Bundles end to end through the public API: fdnn_model_create_from_memory on any bytes, then,
// for what loads, validation and CPU runs at batch 1 and 2 (fuzz_run_model.hpp).
#include <cstddef>
#include <cstdint>

#include "fusednn/fusednn.h"
#include "fuzz_checks.hpp"
#include "fuzz_run_model.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const fdnn_model_options options = fusednn_fuzz::small_options();
  fdnn_model* model = nullptr;
  const fdnn_status created = fdnn_model_create_from_memory(data, size, &options, &model);
  fusednn_fuzz::check_refusal(created, "fdnn_model_create_from_memory");
  if (created != FDNN_STATUS_OK) {
    if (model != nullptr) {
      fusednn_fuzz::broken_promise("fdnn_model_create_from_memory", "set model on failure");
    }
    return 0;
  }
  fusednn_fuzz::run_model(model);
  fdnn_model_destroy(model);
  return 0;
}
