// SPDX-License-Identifier: Apache-2.0
// The WarpRegisters form of the tensor-core fused MLP (fused_mlp_tensor_core.hpp says when each
// form runs): plan, weight image and launch, called through fused_mlp_tensor_core.hpp's entry
// points.
#pragma once

#include "backends/cuda/mlp/fused_mlp_tensor_core.hpp"

namespace fusednn::cuda {

// The widest layer the form's register arrays take in `math`.
constexpr int warp_register_max_width(TensorCoreMath math) {
  return math == TensorCoreMath::Fp16 || math == TensorCoreMath::Bf16 ? 256 : 128;
}

// Fills *plan with form WarpRegisters when every width fits the form's register arrays
// (warp_register_max_width) and the weights fit one block's shared memory.
bool plan_warp_register_mlp(const std::vector<FusedMlpLayerDesc>& layers, TensorCoreMath math,
                            const DeviceInfo& device, const TensorCoreRowTail& tail,
                            TensorCoreMlpPlan* plan);

std::vector<uint32_t> build_warp_register_mlp_image(const TensorCoreMlpPlan& plan,
                                                    const std::vector<const float*>& weights,
                                                    const std::vector<const float*>& biases,
                                                    const float* gamma, const float* beta);

// x and y in any ElementType: the kernel widens its input rows as it reads them and narrows its
// output rows as it writes them.
void launch_warp_register_mlp(const TensorCoreMlpPlan& plan, TypedInput x, TypedOutput y,
                              int64_t rows, const DeviceInfo& device, cudaStream_t stream);

// fp16 or bf16 bits of `value`, rounded to nearest even (weights are converted once at load).
uint16_t tensor_core_half_bits(float value, TensorCoreMath math);

}  // namespace fusednn::cuda
