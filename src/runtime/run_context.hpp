// SPDX-License-Identifier: Apache-2.0
// One caller's means to run a prepared model: the backend's execution context (its scratch, and
// on a GPU its stream and graphs) plus the buffers that convert float16 / bfloat16 inputs and
// outputs where the backend does not. Behind fdnn_context, and pooled by LoadedModel for
// fdnn_model_run. Not thread-safe: one thread at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "fusednn/fusednn.h"
#include "runtime/prepared_model.hpp"

namespace fusednn {

// The caller's run arguments in their dtypes (the typed calls); the C API has checked that the
// dtypes are fdnn_dtype values (checked_dtype), the runtime checks the rest.
struct TypedRun {
  int64_t batch = 0;
  const void* input = nullptr;
  fdnn_dtype input_dtype = FDNN_DTYPE_FLOAT32;
  size_t input_count = 0;
  void* output = nullptr;
  fdnn_dtype output_dtype = FDNN_DTYPE_FLOAT32;
  size_t output_capacity = 0;
};

class RunContext {
 public:
  explicit RunContext(std::shared_ptr<const PreparedModel> prepared);
  void run(int64_t batch, const float* input, size_t input_count, float* output,
           size_t output_capacity);
  // The device runs refuse buffers not aligned to their elements, and buffers that overlap.
  void run_device(int64_t batch, const float* input, size_t input_count, float* output,
                  size_t output_capacity, void* stream);
  // FLOAT32 both ways is run() / run_device(); otherwise the input is widened to float32 and the
  // output narrowed from it (by the backend while staging, or here in typed_input_ /
  // typed_output_, allocated for max_batch by the first run that needs each).
  void run_typed(const TypedRun& run);
  void run_device_typed(const TypedRun& run, void* stream);
  // The backend context's host path (ExecutionContext::host_io).
  fdnn_host_io host_io() const { return execution_->host_io(); }

 private:
  void check_typed(const TypedRun& run) const;
  // The elements a run of `batch` samples writes (after check_run_arguments).
  size_t output_elements(int64_t batch) const;

  std::shared_ptr<const PreparedModel> prepared_;
  std::unique_ptr<ExecutionContext> execution_;
  std::vector<float> typed_input_;
  std::vector<float> typed_output_;
};

}  // namespace fusednn
