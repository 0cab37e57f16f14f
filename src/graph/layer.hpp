// SPDX-License-Identifier: Apache-2.0
// One layer of a model spec, as parsed and shape-checked: the unit the graph is made of.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "common/shape.hpp"

namespace fusednn {

enum class LayerKind {
  Linear,
  Conv2d,
  MaxPool2d,
  AvgPool2d,
  Flatten,
  ReLU,
  LeakyReLU,
  GELU,
  SiLU,
  Sigmoid,
  Tanh,
  Scale,
  LayerNorm,
  BatchNorm,  // BatchNorm1d and BatchNorm2d: per-channel (dim 0 of the per-sample shape)
  Softmax,
  Add,
  Concat,
};

// The spec's spelling of a kind ("Linear"). BatchNorm, which two spec types share, is reported as
// "BatchNorm"; Layer::type_name keeps the spelling the spec used ("BatchNorm2d").
const char* layer_kind_name(LayerKind kind);

// A weight the layer reads, named by its PyTorch state_dict name.
struct WeightSlot {
  std::string role;         // "weight", "bias", "running_mean", "running_var"
  std::string tensor_name;  // "fc1.weight"
  Shape shape;              // expected shape, exactly as PyTorch stores it
};

// Every layer attribute, with PyTorch's names and defaults; each kind reads the fields it needs.
// Layer::weights is the authority on which tensors exist: has_bias is true exactly when the layer
// has a "bias" slot, and elementwise_affine exactly when it has a "weight" slot (LayerNorm,
// BatchNorm).
struct LayerAttributes {
  // Linear
  int64_t in_features = 0;
  int64_t out_features = 0;
  bool has_bias = true;  // Linear, Conv2d, LayerNorm, BatchNorm
  // Conv2d and pooling; index 0 is height, 1 is width
  int64_t in_channels = 0;
  int64_t out_channels = 0;
  std::array<int64_t, 2> kernel_size{1, 1};
  std::array<int64_t, 2> stride{1, 1};
  std::array<int64_t, 2> padding{0, 0};
  std::array<int64_t, 2> dilation{1, 1};  // Conv2d only: pooling layers accept only 1
  int64_t groups = 1;
  bool count_include_pad = true;  // AvgPool2d
  // Activations and Scale
  float negative_slope = 0.01f;  // LeakyReLU
  bool gelu_tanh = false;        // GELU(approximate="tanh")
  float alpha = 1.0f;            // Scale
  // LayerNorm, BatchNorm
  Shape normalized_shape;  // LayerNorm, trailing dims of the input
  float eps = 1e-5f;
  bool elementwise_affine = true;  // LayerNorm; BatchNorm's "affine"
  int64_t num_features = 0;        // BatchNorm: channels, dim 0 of the per-sample shape
  // Concat: axis within the per-sample shape (PyTorch dim minus one for the batch)
  int64_t axis = 0;
};

struct Layer {
  std::string name;       // unique; other layers refer to this output by it
  std::string type_name;  // as written in the spec ("BatchNorm2d")
  LayerKind kind;
  LayerAttributes attributes;
  std::vector<int> inputs;  // indices of producing layers; kGraphInput for the model input
  std::vector<WeightSlot> weights;
  Shape output_shape;  // per sample
};

}  // namespace fusednn
