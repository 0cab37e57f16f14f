// SPDX-License-Identifier: Apache-2.0
// What runs once a model's weights are frozen: the plan and the backend holding its weights,
// immutable and shared by every context of the model (a context keeps it alive after the model).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "backends/backend.hpp"
#include "planner/plan.hpp"

namespace fusednn {

struct PreparedModel {
  std::shared_ptr<const Plan> plan;
  std::unique_ptr<Backend> backend;
  int64_t max_batch = 0;
};

// Checks a run's arguments against the plan; throws INVALID_ARGUMENT or BUFFER_TOO_SMALL.
// `unit` names what the counts count in messages ("floats" for the float32 calls).
void check_run_arguments(const PreparedModel& prepared, int64_t batch, const void* input,
                         size_t input_count, const void* output, size_t output_capacity,
                         const char* unit = "floats");

}  // namespace fusednn
