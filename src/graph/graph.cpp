// SPDX-License-Identifier: Apache-2.0

#include "graph/graph.hpp"

#include "common/checked_math.hpp"

namespace fusednn {

// Every declared tensor counts, BatchNorm's running statistics included: this is the number of
// scalars a weight file must supply.
int64_t Graph::parameter_count() const {
  int64_t count = 0;
  for (const Layer& layer : layers) {
    for (const WeightSlot& slot : layer.weights) {
      count = checked_add(count, element_count(slot.shape), FDNN_STATUS_INVALID_MODEL,
                          "the parameter count of model '", name, "'");
    }
  }
  return count;
}

}  // namespace fusednn
