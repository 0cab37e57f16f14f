// SPDX-License-Identifier: Apache-2.0
// A chain whose first layer is too wide for the tensor-core MLP kernels (an input over 128
// features in tf32 and fp32, 256 in fp16 and bf16: LeNet-5's 400 -> 120 -> 84 -> 10 head), run
// at large batches as two kernels: the first layer as an implicit GEMM on tensor cores (a 1 x 1
// convolution over a 1 x 1 image has the Linear's memory layout, [rows][in] in and [rows][out]
// out; conv2d_implicit_gemm.hpp), its bias and activation in the epilogue, and the rest of the
// chain in the tensor-core MLP's WarpRegisters form (fused_mlp_tensor_core.hpp), both in the
// model's tensor-core math (3xTF32 for fp32). The first layer's output passes through the
// context's workspace in fp32.
//
// Why: the fused FMA kernel fits one block of 8 warps per SM for so wide a first layer, and is
// several times slower than running that layer as a GEMM and the narrow tail on the
// tensor-core chain.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "backends/cuda/conv/conv2d.hpp"
#include "backends/cuda/conv/conv2d_implicit_gemm.hpp"
#include "backends/cuda/device/tensor_core_math.hpp"
#include "backends/cuda/mlp/fused_mlp.hpp"
#include "backends/cuda/mlp/fused_mlp_tensor_core.hpp"
#include "backends/cuda/platform/device_info.hpp"

namespace fusednn::cuda {

struct SplitMlpPlan {
  ConvGemmPlan first;      // layer 0 (its image holds W)
  Conv2dArgs first_shape;  // layer 0 as a 1 x 1 convolution: channels and epilogue, no pointers
  TensorCoreMlpPlan rest;  // layers 1.. in the WarpRegisters form
  int64_t min_rows = 0;    // rows from which the backend runs the chain this way
  bool usable() const { return first.usable && rest.tile_rows > 0; }
};

// Whether `layers` (two or more, the first one's input wider than the WarpRegisters form takes)
// run split in `math` on `device`, from the rows that give every SM a warp tile of the rest
// (where the split is faster than the fused FMA kernel; below a few hundred rows it is
// slower). Fills *plan (not its images) and readies both kernels. With a `tail`, the rest's
// kernel ends with that Softmax or LayerNorm (false where it cannot).
bool plan_split_mlp(const std::vector<FusedMlpLayerDesc>& layers, TensorCoreMath math,
                    const DeviceInfo& device, SplitMlpPlan* plan,
                    const TensorCoreRowTail& tail = {});

// The images the two kernels read: W of layer 0 for the implicit GEMM, and the rest's weights
// and biases (and a folded LayerNorm's gamma and beta, when the plan has them). weights[l] is
// [out][in] as PyTorch stores it; biases[l] may be null.
std::vector<uint32_t> build_split_mlp_first_image(const SplitMlpPlan& plan,
                                                  const float* first_weight);
std::vector<uint32_t> build_split_mlp_rest_image(const SplitMlpPlan& plan,
                                                 const std::vector<const float*>& weights,
                                                 const std::vector<const float*>& biases,
                                                 const float* gamma = nullptr,
                                                 const float* beta = nullptr);

// y[rows][last out] = chain(x[rows][first in]) (then the folded tail, if planned), through
// middle[rows][first out] (16-byte aligned); first_bias is layer 0's device bias or null.
void launch_split_mlp(const SplitMlpPlan& plan, const float* x, const float* first_bias,
                      float* middle, float* y, int64_t rows, const DeviceInfo& device,
                      cudaStream_t stream);

}  // namespace fusednn::cuda
