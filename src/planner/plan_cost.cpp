// SPDX-License-Identifier: Apache-2.0

#include "planner/plan_cost.hpp"

#include "planner/step_cost.hpp"

namespace fusednn {

// The sum of step_cost's per-step figures, each step counted as a kernel of its own.
PlanCost plan_cost(const Plan& plan) {
  PlanCost cost;
  const int step_count = static_cast<int>(plan.steps.size());
  for (int i = 0; i < step_count; ++i) {
    cost.flops_per_sample += step_flops_per_sample(plan, plan.steps[static_cast<size_t>(i)]);
    cost.bytes_per_sample +=
        static_cast<double>(range_traffic(plan, i, i).activation_bytes_per_sample);
  }
  return cost;
}

}  // namespace fusednn
