// SPDX-License-Identifier: Apache-2.0

#include "runtime/prepared_model.hpp"

#include "common/checked_math.hpp"
#include "common/error.hpp"

namespace fusednn {

void check_run_arguments(const PreparedModel& prepared, int64_t batch, const void* input,
                         size_t input_count, const void* output, size_t output_capacity,
                         const char* unit) {
  if (input == nullptr) fail(FDNN_STATUS_INVALID_ARGUMENT, "input is NULL");
  if (output == nullptr) fail(FDNN_STATUS_INVALID_ARGUMENT, "output is NULL");
  if (batch < 1 || batch > prepared.max_batch) {
    fail(FDNN_STATUS_INVALID_ARGUMENT, "batch is ", batch, "; it must be 1 to max_batch (",
         prepared.max_batch, ", set in fdnn_model_options)");
  }
  const Plan& plan = *prepared.plan;
  const auto needed_input = static_cast<size_t>(checked_multiply(
      batch, element_count(plan.input_shape), FDNN_STATUS_INVALID_ARGUMENT, "the input count"));
  if (input_count != needed_input) {
    fail(FDNN_STATUS_INVALID_ARGUMENT, "input_count is ", input_count, " but batch ", batch,
         " x input shape ", to_string(plan.input_shape), " needs ", needed_input, " ", unit);
  }
  const auto needed_output = static_cast<size_t>(checked_multiply(
      batch, element_count(plan.output_shape), FDNN_STATUS_INVALID_ARGUMENT, "the output count"));
  if (output_capacity < needed_output) {
    fail(FDNN_STATUS_BUFFER_TOO_SMALL, "output_capacity is ", output_capacity, " but batch ", batch,
         " x output shape ", to_string(plan.output_shape), " needs ", needed_output, " ", unit);
  }
}

}  // namespace fusednn
