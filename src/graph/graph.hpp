// SPDX-License-Identifier: Apache-2.0
// The internal graph every model file is parsed into: a DAG of layers in topological order
// (a layer only reads the model input or layers before it).
#pragma once

#include <string>
#include <vector>

#include "graph/layer.hpp"

namespace fusednn {

// The index a Layer::inputs entry holds to mean "the model's input".
constexpr int kGraphInput = -1;

struct Graph {
  std::string name;
  Shape input_shape;          // per sample
  std::vector<Layer> layers;  // topological order
  int output = -1;            // index of the layer whose output is the model's output

  const Shape& output_shape() const { return layers.at(output).output_shape; }
  // Shape produced by a Layer::inputs entry (the model input for kGraphInput).
  const Shape& shape_of(int producer) const {
    return producer == kGraphInput ? input_shape : layers.at(producer).output_shape;
  }
  int64_t parameter_count() const;
};

}  // namespace fusednn
