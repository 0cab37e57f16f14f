// SPDX-License-Identifier: Apache-2.0
// The split MLP chain (see fused_mlp_split.hpp): planning, images and the two launches.
#include "backends/cuda/mlp/fused_mlp_split.hpp"

#include "backends/cuda/mlp/fused_mlp_tensor_core_registers.hpp"

namespace fusednn::cuda {

bool plan_split_mlp(const std::vector<FusedMlpLayerDesc>& layers, TensorCoreMath math,
                    const DeviceInfo& device, SplitMlpPlan* plan, const TensorCoreRowTail& tail) {
  if (layers.size() < 2 || layers.front().in <= warp_register_max_width(math)) return false;
  SplitMlpPlan result;
  Conv2dArgs& shape = result.first_shape;
  shape.in_channels = layers[0].in;
  shape.in_height = shape.in_width = 1;
  shape.out_channels = layers[0].out;
  shape.out_height = shape.out_width = 1;
  shape.epilogue = layers[0].epilogue;
  // The host-side checks first; readying a kernel loads its module, which a chain that is not
  // split should not wait for at load.
  if (!plan_conv_gemm(shape, math, device, &result.first)) return false;
  const std::vector<FusedMlpLayerDesc> rest(layers.begin() + 1, layers.end());
  if (!plan_tensor_core_mlp(rest, math, device, &result.rest, tail) ||
      result.rest.form != TensorCoreForm::WarpRegisters ||
      !prepare_conv2d_implicit_gemm(result.first, device)) {
    return false;
  }
  result.min_rows = int64_t{device.sm_count} * kWarpRegisterTileRows;
  *plan = result;
  return true;
}

std::vector<uint32_t> build_split_mlp_first_image(const SplitMlpPlan& plan,
                                                  const float* first_weight) {
  return build_conv_gemm_image(plan.first, plan.first_shape, first_weight);
}

std::vector<uint32_t> build_split_mlp_rest_image(const SplitMlpPlan& plan,
                                                 const std::vector<const float*>& weights,
                                                 const std::vector<const float*>& biases,
                                                 const float* gamma, const float* beta) {
  return build_tensor_core_mlp_image(
      plan.rest, std::vector<const float*>(weights.begin() + 1, weights.end()),
      std::vector<const float*>(biases.begin() + 1, biases.end()), gamma, beta);
}

void launch_split_mlp(const SplitMlpPlan& plan, const float* x, const float* first_bias,
                      float* middle, float* y, int64_t rows, const DeviceInfo& device,
                      cudaStream_t stream) {
  if (rows <= 0) return;
  Conv2dArgs first = plan.first_shape;
  first.x = x;
  first.bias = first_bias;
  first.y = middle;
  first.batch = rows;
  launch_conv2d_implicit_gemm(plan.first, first, stream);
  launch_tensor_core_mlp(plan.rest, middle, y, rows, device, stream);
}

}  // namespace fusednn::cuda
