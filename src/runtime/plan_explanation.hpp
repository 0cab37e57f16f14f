// SPDX-License-Identifier: Apache-2.0
// The plan explanation (fdnn_model_explain): for a batch size, each lowered step the backend
// runs, with the spec layers it covers, its kernel form and why (Backend::explain), where its
// output lives and its nominal FLOPs and bytes (planner/step_cost.hpp). Rendered as JSON (the
// structure every binding parses) or as a text table (the CLI's `info --plan`).
#pragma once

#include <cstdint>
#include <string>

#include "runtime/prepared_model.hpp"
#include "runtime/resolved_options.hpp"

namespace fusednn {

enum class ExplanationFormat { Json, Text };

// batch is 1 to prepared.max_batch (checked by the caller).
std::string explain_plan(const PreparedModel& prepared, const std::string& model_name,
                         const ResolvedOptions& options, int64_t batch, ExplanationFormat format);

}  // namespace fusednn
