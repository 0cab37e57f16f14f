// SPDX-License-Identifier: Apache-2.0
// fdnn_model_set_weight with any name, dtype, rank and shape on the tiny spec. Each call hands
// over a buffer exactly as large as the spec's tensor in the given dtype (one element for an
// undeclared name), so a library that reads by the caller's shape before checking it overruns the
// buffer under ASan. A call accepted with a shape other than the spec's is a finding too. Once the
// calls are done, the model is validated and run.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "fusednn/fusednn.h"
#include "fuzz_checks.hpp"
#include "fuzz_input.hpp"
#include "fuzz_run_model.hpp"
#include "tiny_spec.hpp"

namespace {

// Mostly small extents, sometimes any 64-bit value.
int64_t extent(fusednn_fuzz::FuzzInput& input) {
  const uint8_t kind = input.byte();
  if (kind < 224) return kind % 8;
  return static_cast<int64_t>(input.u64());
}

// Mostly a valid dtype, sometimes any 32-bit value.
int32_t dtype_value(fusednn_fuzz::FuzzInput& input) {
  const uint8_t kind = input.byte();
  if (kind < 240) return kind % 3;
  return static_cast<int32_t>(input.u64());
}

// Mostly 0 to FDNN_MAX_RANK, sometimes just outside.
int32_t rank_value(fusednn_fuzz::FuzzInput& input) {
  const uint8_t kind = input.byte();
  if (kind < 240) return kind % 4;
  return static_cast<int32_t>(static_cast<int8_t>(kind)) + FDNN_MAX_RANK + 8;
}

bool matches_spec(const fusednn_fuzz::TinyTensor& tensor, const int64_t* dims, int32_t rank) {
  if (tensor.rank != rank) return false;
  for (int32_t i = 0; i < rank; ++i) {
    if (dims[i] != tensor.dims[i]) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fusednn_fuzz::FuzzInput input(data, size);
  const fdnn_model_options options = fusednn_fuzz::small_options();
  fdnn_model* model = nullptr;
  const std::string spec = fusednn_fuzz::kTinySpec;
  if (fdnn_model_create_from_spec(spec.data(), spec.size(), &options, &model) != FDNN_STATUS_OK) {
    fusednn_fuzz::broken_promise("fdnn_model_create_from_spec", fdnn_last_error_message());
  }
  for (int calls = 0; calls < 16 && !input.empty(); ++calls) {
    const fusednn_fuzz::TinyTensor& tensor =
        fusednn_fuzz::kTinyTensors[input.byte() % fusednn_fuzz::kTinyTensorCount];
    const int32_t raw_dtype = dtype_value(input);
    fdnn_dtype dtype;
    std::memcpy(&dtype, &raw_dtype, sizeof dtype);  // C callers may pass any value
    const int32_t rank = rank_value(input);
    int64_t dims[FDNN_MAX_RANK] = {};
    for (int32_t i = 0; i < rank && i < FDNN_MAX_RANK; ++i) dims[i] = extent(input);

    const size_t element_bytes = raw_dtype == FDNN_DTYPE_FLOAT32 ? 4 : 2;
    const int64_t elements = fusednn_fuzz::element_count(tensor);
    std::vector<uint8_t> buffer(static_cast<size_t>(elements > 0 ? elements : 1) * element_bytes);
    const std::string values = input.bytes(buffer.size());
    std::memcpy(buffer.data(), values.data(), values.size());

    const fdnn_status status =
        fdnn_model_set_weight(model, tensor.name, dtype, buffer.data(), dims, rank);
    fusednn_fuzz::check_refusal(status, "fdnn_model_set_weight");
    if (status == FDNN_STATUS_OK && tensor.rank != -2 &&
        (raw_dtype < 0 || raw_dtype > 2 || !matches_spec(tensor, dims, rank))) {
      fusednn_fuzz::broken_promise("fdnn_model_set_weight",
                                   "accepted a tensor whose name, dtype or shape the spec refuses");
    }
  }
  fusednn_fuzz::run_model(model);
  fdnn_model_destroy(model);
  return 0;
}
