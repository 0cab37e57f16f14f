// SPDX-License-Identifier: Apache-2.0
// Model spec (JSON, docs/model-format.md) -> Graph, with every shape inferred and checked.
#pragma once

#include <string>

#include "graph/graph.hpp"

namespace fusednn {

// source names the spec in messages (a path, or "<memory>"). Throws FDNN_STATUS_PARSE_ERROR for
// malformed JSON (with line and column) and FDNN_STATUS_INVALID_MODEL for a spec that does not
// describe a valid network (naming the layer and the field at fault).
Graph parse_model_spec(const std::string& json_text, const std::string& source);

}  // namespace fusednn
