// SPDX-License-Identifier: Apache-2.0
// Shapes are per-sample unless a name says otherwise: the batch dimension is added at run time.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "common/checked_math.hpp"

namespace fusednn {

using Shape = std::vector<int64_t>;

// "[128, 100]", the form every error message uses.
inline std::string to_string(const Shape& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) text += ", ";
    text += std::to_string(shape[i]);
  }
  return text + "]";
}

// A shape as a message part, formatted only when a message is built.
struct ShapeText {
  const Shape& shape;
};
inline std::ostream& operator<<(std::ostream& out, ShapeText text) {
  return out << to_string(text.shape);
}

// Product of the extents; 1 for a scalar shape. A product past int64_t is
// FDNN_STATUS_INVALID_ARGUMENT naming the shape (shapes from files are bounded before this).
inline int64_t element_count(const Shape& shape) {
  int64_t count = 1;
  for (int64_t extent : shape) {
    count = checked_multiply(count, extent, FDNN_STATUS_INVALID_ARGUMENT,
                             "the element count of shape ", ShapeText{shape});
  }
  return count;
}

}  // namespace fusednn
