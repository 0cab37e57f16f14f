// SPDX-License-Identifier: Apache-2.0
// What a backend reports about how it runs a plan at one batch size (Backend::explain): for each
// lowered step, the plan steps it covers, the kernel form it takes and what decided that form.
// Each backend fills these where it makes the decision; the runtime adds the costs
// (planner/step_cost.hpp) and renders the document (runtime/plan_explanation.hpp).
#pragma once

#include <string>
#include <vector>

namespace fusednn {

struct KernelChoice {
  int first_step = 0;  // the plan steps it runs: [first_step, last_step]
  int last_step = 0;
  std::string form;    // the kernel or kernel form: "packed GEMM (AVX2+FMA)", "cuBLASLt"
  std::string reason;  // the size, alignment, precision or device property that chose it
  int launches = 1;    // kernel launches (GPU) or kernel calls per slice (CPU)
};

struct BackendExplanation {
  std::string summary;  // backend-wide facts at this batch: threads, device, single launch
  std::vector<KernelChoice> kernels;
};

}  // namespace fusednn
