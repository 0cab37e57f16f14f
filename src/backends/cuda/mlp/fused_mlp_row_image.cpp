// SPDX-License-Identifier: Apache-2.0
// The small-batch forms' row image (fused_mlp_row_image.hpp), built on the host at load.
#include "backends/cuda/mlp/fused_mlp_row_image.hpp"

namespace fusednn::cuda {

std::vector<float> build_fused_mlp_row_image(const std::vector<FusedMlpLayerDesc>& layers,
                                             const std::vector<const float*>& weights,
                                             const std::vector<const float*>& biases) {
  RowImageLayer layout[kFusedMlpMaxLayers];
  int width4 = 0;
  std::vector<float> image(static_cast<size_t>(row_image_layout(layers, layout, &width4)), 0.0f);
  for (size_t l = 0; l < layers.size(); ++l) {
    const RowImageLayer& layer = layout[l];
    for (int o = 0; o < layer.out; ++o) {
      std::copy(weights[l] + static_cast<size_t>(o) * layer.in,
                weights[l] + static_cast<size_t>(o + 1) * layer.in,
                image.begin() + layer.weight_offset + o * layer.in4);
    }
    if (biases[l] != nullptr) {
      std::copy(biases[l], biases[l] + layer.out, image.begin() + layer.bias_offset);
    }
  }
  return image;
}

}  // namespace fusednn::cuda
