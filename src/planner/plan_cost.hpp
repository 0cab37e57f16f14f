// SPDX-License-Identifier: Apache-2.0
// What one sample costs a plan, whatever the backend: the arithmetic and the activation traffic.
// fdnn_memory_info reports it (so a server can refuse a model before running it) and the CPU
// backend uses the arithmetic to decide how many threads a batch is worth.
#pragma once

#include "planner/plan.hpp"

namespace fusednn {

struct PlanCost {
  // Floating-point operations, counted as step_cost.hpp counts them (a multiply-add is 2).
  double flops_per_sample = 0;
  // Bytes of every step's inputs and output as float32, each step a kernel of its own; the
  // weights are not counted (a run reads them once whatever its batch).
  double bytes_per_sample = 0;
};

PlanCost plan_cost(const Plan& plan);

}  // namespace fusednn
