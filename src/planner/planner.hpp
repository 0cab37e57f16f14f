// SPDX-License-Identifier: Apache-2.0
// Graph + weights -> Plan. The passes run in this order: dead-layer pruning, BatchNorm folding,
// activation fusion, workspace assignment.
#pragma once

#include "graph/graph.hpp"
#include "graph/weight_store.hpp"
#include "planner/plan.hpp"

namespace fusednn {

// Weights the store does not hold yet read as zeros, so a plan (and its memory figures) can be
// made before loading; a plan that will run is made from a complete store.
Plan build_plan(const Graph& graph, const WeightStore& weights);

}  // namespace fusednn
