// SPDX-License-Identifier: Apache-2.0
// Runs a model the harness managed to build, as a careful caller would: validate, check the cost
// the API reports before running (a server refuses a model it cannot afford), then run batches of
// 1 and 2 and one batch past max_batch, which must be refused.
#pragma once

#include <cstdint>
#include <vector>

#include "fusednn/fusednn.h"
#include "fuzz_checks.hpp"

namespace fusednn_fuzz {

// The harnesses' own budget: models over it are built, validated and described, not run.
constexpr size_t kMaxContextBytes = size_t{64} << 20;
constexpr int64_t kMaxElementsPerSample = int64_t{1} << 20;
constexpr double kMaxMultiplyAddsPerSample = 5e7;

inline int64_t element_count(const fdnn_shape& shape) {
  int64_t count = 1;
  for (int32_t i = 0; i < shape.rank && i < FDNN_MAX_RANK; ++i) {
    if (shape.dims[i] <= 0 || count > kMaxElementsPerSample / shape.dims[i]) return -1;
    count *= shape.dims[i];
  }
  return count;
}

// A rough per-sample cost from the layer table: each output element costs the weights that
// produce one output channel (a Linear's row, a convolution's filter), at least one operation.
inline double multiply_adds_per_sample(const fdnn_model* model) {
  int32_t layers = 0;
  check_refusal(fdnn_model_layer_count(model, &layers), "fdnn_model_layer_count");
  double total = 0;
  for (int32_t i = 0; i < layers; ++i) {
    fdnn_layer_info info{};
    info.struct_size = sizeof info;
    if (fdnn_model_layer_info(model, i, &info) != FDNN_STATUS_OK) {
      broken_promise("fdnn_model_layer_info", fdnn_last_error_message());
    }
    double outputs = 1;
    for (int32_t d = 0; d < info.output_shape.rank && d < FDNN_MAX_RANK; ++d) {
      outputs *= static_cast<double>(info.output_shape.dims[d]);
    }
    const double channels = info.output_shape.rank > 0 ? info.output_shape.dims[0] : 1;
    const double per_output =
        channels > 0 ? static_cast<double>(info.parameter_count) / channels : 0;
    total += outputs * (per_output > 1 ? per_output : 1);
  }
  return total;
}

inline void run_model(fdnn_model* model) {
  const fdnn_status valid = fdnn_model_validate(model);
  check_refusal(valid, "fdnn_model_validate");
  if (valid != FDNN_STATUS_OK) return;

  fdnn_shape input_shape{};
  fdnn_shape output_shape{};
  check_refusal(fdnn_model_input_shape(model, &input_shape), "fdnn_model_input_shape");
  check_refusal(fdnn_model_output_shape(model, &output_shape), "fdnn_model_output_shape");
  const int64_t input_count = element_count(input_shape);
  const int64_t output_count = element_count(output_shape);
  if (input_count < 0 || output_count < 0) return;
  if (multiply_adds_per_sample(model) > kMaxMultiplyAddsPerSample) return;

  fdnn_memory_info memory{};
  memory.struct_size = sizeof memory;
  const fdnn_status described = fdnn_model_memory_info(model, &memory);
  check_refusal(described, "fdnn_model_memory_info");
  if (described != FDNN_STATUS_OK || memory.context_bytes > kMaxContextBytes) return;

  std::vector<float> input(static_cast<size_t>(3 * input_count));
  for (size_t i = 0; i < input.size(); ++i) {
    input[i] = static_cast<float>(static_cast<int>(i * 37 % 17) - 8) * 0.25f;
  }
  std::vector<float> output(static_cast<size_t>(3 * output_count));
  for (int64_t batch : {1, 2}) {
    const auto in_count = static_cast<size_t>(batch * input_count);
    const auto out_count = static_cast<size_t>(batch * output_count);
    check_refusal(fdnn_model_run(model, batch, input.data(), in_count, output.data(), out_count),
                  "fdnn_model_run");
  }
  if (fdnn_model_run(model, 3, input.data(), input.size(), output.data(), output.size()) !=
      FDNN_STATUS_INVALID_ARGUMENT) {
    broken_promise("fdnn_model_run", "a batch past max_batch was not refused");
  }
}

// Options for every harness model: small scratch, the calling thread only.
inline fdnn_model_options small_options() {
  fdnn_model_options options;
  fdnn_model_options_init(&options, sizeof options);
  options.max_batch = 2;
  options.cpu_threads = 1;
  options.device = FDNN_DEVICE_CPU;
  return options;
}

}  // namespace fusednn_fuzz
