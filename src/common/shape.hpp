// Shapes are per-sample unless a name says otherwise: the batch dimension is added at run time.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace fusednn {

using Shape = std::vector<int64_t>;

// Product of the extents; 1 for a scalar shape.
inline int64_t element_count(const Shape& shape) {
  int64_t count = 1;
  for (int64_t extent : shape) count *= extent;
  return count;
}

// "[128, 100]", the form every error message uses.
inline std::string to_string(const Shape& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) text += ", ";
    text += std::to_string(shape[i]);
  }
  return text + "]";
}

}  // namespace fusednn
