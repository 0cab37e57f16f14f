// What one sample costs a plan, whatever the backend: the arithmetic and the activation traffic.
// fdnn_memory_info reports it (so a server can refuse a model before running it) and the CPU
// backend uses the arithmetic to decide how many threads a batch is worth.
#pragma once

#include "planner/plan.hpp"

namespace fusednn {

struct PlanCost {
  // Floating-point operations: 2 per multiply-add of Linear and Conv2d steps, about 4 per output
  // element of every other step (its epilogue included).
  double flops_per_sample = 0;
  // Bytes of every step's inputs and output as float32; the weights are not counted (a run reads
  // them once whatever its batch).
  double bytes_per_sample = 0;
};

PlanCost plan_cost(const Plan& plan);

}  // namespace fusednn
