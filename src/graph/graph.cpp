#include "graph/graph.hpp"

namespace fusednn {

// Every declared tensor counts, BatchNorm's running statistics included: this is the number of
// scalars a weight file must supply.
int64_t Graph::parameter_count() const {
  int64_t count = 0;
  for (const Layer& layer : layers) {
    for (const WeightSlot& slot : layer.weights) count += element_count(slot.shape);
  }
  return count;
}

}  // namespace fusednn
