// SPDX-License-Identifier: Apache-2.0
// Runs a plan with the CPU kernels. A run is split across threads by batch slices: every step is
// independent per sample, so each thread runs the whole plan on its slice (better locality than
// splitting each step).
#pragma once

#include <memory>

#include "backends/backend.hpp"
#include "planner/plan.hpp"

namespace fusednn {

// cpu_threads: 0 = hardware threads, used only when the batch is large enough to pay for them.
std::unique_ptr<Backend> make_cpu_backend(std::shared_ptr<const Plan> plan, int64_t max_batch,
                                          int cpu_threads);

}  // namespace fusednn
