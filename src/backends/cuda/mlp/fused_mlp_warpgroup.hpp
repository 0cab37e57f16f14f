// SPDX-License-Identifier: Apache-2.0
// The Warpgroup form of the tensor-core fused MLP: fp16 and bf16 chains on compute capability 9.0,
// from 512 rows. A warpgroup (4 warps) takes 64 rows through every layer with wgmma
// (sm_90a): activations in registers as in the WarpRegisters form, weights read by the tensor
// cores straight from shared memory, and each warpgroup's next input tiles arriving by bulk
// copies while it computes. fused_mlp_tensor_core.hpp plans it next to the WarpRegisters form of
// the same chain, and launch_tensor_core_mlp() takes it from min_rows rows on.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "backends/cuda/device/device_epilogue.hpp"
#include "backends/cuda/device/element_type.hpp"
#include "backends/cuda/device/tensor_core_math.hpp"
#include "backends/cuda/device/tensor_core_row_tail.hpp"
#include "backends/cuda/mlp/fused_mlp.hpp"
#include "backends/cuda/platform/device_info.hpp"

namespace fusednn::cuda {

constexpr int kWarpgroupTileRows = 64;  // wgmma's M: the rows a warpgroup multiplies at once
constexpr int kWarpgroupMaxWidth = 128;
constexpr int64_t kWarpgroupMinRows = 512;    // the batch rows from which the form runs
constexpr int kWarpgroupMaxTailColumns = 64;  // the widest last layer a folded row op follows

struct WarpgroupMlpLayer {
  int32_t in = 0, out = 0;
  int32_t k_steps = 0;         // 16-column steps: the width class's, zero weights past `in`
  int32_t n = 0;               // the wgmma's N: out rounded up to 16, 32, 64 or 128
  uint32_t weight_offset = 0;  // bytes into shared memory, 8 x 8 core matrices (the .cpp says how)
  uint32_t bias_offset = 0;    // bytes into shared memory: n floats, zero past out
  DeviceEpilogue epilogue;
};

struct WarpgroupMlpPlan {
  TensorCoreMath math = TensorCoreMath::Bf16;
  int32_t layer_count = 0;   // 0: no plan
  int32_t width_class = 0;   // 64 or 128: the kernel's register arrays
  int32_t warpgroups = 0;    // per block; one block per SM
  int32_t stages = 0;        // input tiles each warpgroup has in flight
  uint32_t stage_bytes = 0;  // per input buffer: a float32 tile's rows as they lie in memory
  int32_t input_steps = 0;   // k-steps over the first layer's input, in its k order
  // The first layer's k order (the .cpp says which columns each thread reads): interleaved where
  // the input's row stride makes that order's 16-byte shared loads conflict-free.
  bool interleaved_columns = false;
  // Width 64, no tail, and every layer before the last of N 64 with ReLU alone: the kernel runs
  // those layers without a switch on N or a test of the activation (the 64-wide MLP's shape).
  bool uniform_hidden = false;
  uint32_t image_bytes = 0;     // weights and biases, copied to shared memory offset 0
  uint32_t stage_offset = 0;    // bytes into shared memory of the input buffers
  uint32_t barrier_offset = 0;  // bytes into shared memory of their mbarriers
  size_t shared_bytes = 0;
  int64_t min_rows = 0;       // the batch rows from which it runs
  TensorCoreRowTail tail;     // a folded Softmax or LayerNorm after the last layer
  uint32_t gamma_offset = 0;  // bytes into the image, when tail.gamma (0: none)
  uint32_t beta_offset = 0;   // bytes into the image, when tail.beta (0: none)
  WarpgroupMlpLayer layers[kFusedMlpMaxLayers];
};

// Fills *plan when the library holds the sm_90a kernels, the device is compute capability 9.0,
// math is Fp16 or Bf16, every width is at most kWarpgroupMaxWidth, the first layer's input is a
// multiple of 4 columns (rows are copied 16 bytes at a time) and everything fits one block's
// shared memory. The override wgmma=0 turns the form off, =1 takes it at every batch.
bool plan_warpgroup_mlp(const std::vector<FusedMlpLayerDesc>& layers, TensorCoreMath math,
                        const DeviceInfo& device, const TensorCoreRowTail& tail,
                        WarpgroupMlpPlan* plan);

// The layout alone (no device queries; plan_warpgroup_mlp() calls it, then checks the device):
// the layers' wgmma shapes and offsets, and shared memory for `warpgroups` x `stages` input
// buffers. False where the chain does not fit the form's widths.
bool lay_out_warpgroup_mlp(const std::vector<FusedMlpLayerDesc>& layers, TensorCoreMath math,
                           const TensorCoreRowTail& tail, int warpgroups, int stages,
                           WarpgroupMlpPlan* plan);

// The plan's shared-memory image (plan.image_bytes bytes): weights[l] is [out][in] as PyTorch
// stores it, biases[l] may be null; gamma and beta: the tail's LayerNorm constants [last out],
// when the plan's tail has them.
std::vector<uint32_t> build_warpgroup_mlp_image(const WarpgroupMlpPlan& plan,
                                                const std::vector<const float*>& weights,
                                                const std::vector<const float*>& biases,
                                                const float* gamma = nullptr,
                                                const float* beta = nullptr);

// Whether a launch with these buffers can take the form: x on 16 bytes (its rows are bulk
// copies); decided by the 16-byte alignment classes the context keys its graphs by.
bool warpgroup_mlp_takes(const WarpgroupMlpPlan& plan, const void* x, int64_t rows);

// Whether the form stores output rows of this type: float32 and the math's own 16-bit type.
bool warpgroup_mlp_writes(const WarpgroupMlpPlan& plan, ElementType output);

// y[rows][last out] = chain(x[rows][first in]); `image` is the uploaded image. x in any
// ElementType: 16-bit input rows are staged as they lie in memory and read without a float32
// copy; y as warpgroup_mlp_writes() allows, 16-bit rows narrowed as they are stored.
void launch_warpgroup_mlp(const WarpgroupMlpPlan& plan, const void* image, TypedInput x,
                          TypedOutput y, int64_t rows, const DeviceInfo& device,
                          cudaStream_t stream);

}  // namespace fusednn::cuda
