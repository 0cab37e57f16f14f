// SPDX-License-Identifier: Apache-2.0

#include "graph/layer.hpp"

namespace fusednn {

const char* layer_kind_name(LayerKind kind) {
  switch (kind) {
    case LayerKind::Linear: return "Linear";
    case LayerKind::Conv2d: return "Conv2d";
    case LayerKind::MaxPool2d: return "MaxPool2d";
    case LayerKind::AvgPool2d: return "AvgPool2d";
    case LayerKind::Flatten: return "Flatten";
    case LayerKind::ReLU: return "ReLU";
    case LayerKind::LeakyReLU: return "LeakyReLU";
    case LayerKind::GELU: return "GELU";
    case LayerKind::SiLU: return "SiLU";
    case LayerKind::Sigmoid: return "Sigmoid";
    case LayerKind::Tanh: return "Tanh";
    case LayerKind::Scale: return "Scale";
    case LayerKind::LayerNorm: return "LayerNorm";
    case LayerKind::BatchNorm: return "BatchNorm";
    case LayerKind::Softmax: return "Softmax";
    case LayerKind::Add: return "Add";
    case LayerKind::Concat: return "Concat";
  }
  return "unknown";
}

}  // namespace fusednn
