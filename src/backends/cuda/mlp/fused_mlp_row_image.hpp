// SPDX-License-Identifier: Apache-2.0
// The image of a fused MLP chain that the small-batch forms stage (fused_mlp_block.cu, and
// fused_mlp_cluster.cu, which stages a slice of every layer): per layer, W in PyTorch's [out][in]
// order with each row padded to a multiple of 4 floats, then the layer's bias (zeros without
// one), padded alike. Every offset is a multiple of 4 floats, so any run of whole rows is a run
// of 16-byte words. The host builds the image (build_fused_mlp_row_image); the kernels locate
// rows in it with the same layout function.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "backends/cuda/device/device_epilogue.hpp"
#include "backends/cuda/mlp/fused_mlp.hpp"

namespace fusednn::cuda {

struct RowImageLayer {
  int32_t in, in4, out, out4;  // in4, out4: rounded up to a multiple of 4
  int32_t weight_offset;       // floats into the image: [out4][in4]
  int32_t bias_offset;         // [out4], zeros where the layer has no bias
  DeviceEpilogue epilogue;
};

inline int round_up_to_4(int value) { return (value + 3) / 4 * 4; }

// Fills out[0, layers.size()) and the widest in4 (the activation row stride); returns the image's
// size in floats.
inline int row_image_layout(const std::vector<FusedMlpLayerDesc>& layers, RowImageLayer* out,
                            int* width4) {
  int offset = 0;
  *width4 = 0;
  for (size_t l = 0; l < layers.size(); ++l) {
    RowImageLayer& layer = out[l];
    layer.in = layers[l].in;
    layer.out = layers[l].out;
    layer.in4 = round_up_to_4(layer.in);
    layer.out4 = round_up_to_4(layer.out);
    layer.weight_offset = offset;
    layer.bias_offset = offset + layer.out4 * layer.in4;
    layer.epilogue = layers[l].epilogue;
    offset = layer.bias_offset + layer.out4;
    *width4 = std::max(*width4, layer.in4);
  }
  return offset;
}

// The fields both small-batch forms' kernel parameters share (x, y and their element types,
// image, rows, layer_count, width4, layers), for a run of `rows` rows of `plan` on `image`;
// returns the row image's size in floats.
template <typename Params>
int fill_row_image_params(const FusedMlpPlan& plan, const float* image, TypedInput x, TypedOutput y,
                          int64_t rows, Params* p) {
  p->x = x.data;
  p->y = y.data;
  p->input_type = static_cast<int32_t>(x.type);
  p->output_type = static_cast<int32_t>(y.type);
  p->image = image;
  p->rows = rows;
  p->layer_count = static_cast<int32_t>(plan.layers.size());
  return row_image_layout(plan.layers, p->layers, &p->width4);
}

// The chain's row image; weights[l]: [out][in] on the host, biases[l]: [out] or null (zeros).
std::vector<float> build_fused_mlp_row_image(const std::vector<FusedMlpLayerDesc>& layers,
                                             const std::vector<const float*>& weights,
                                             const std::vector<const float*>& biases);

}  // namespace fusednn::cuda
