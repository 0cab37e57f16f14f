// SPDX-License-Identifier: Apache-2.0
// The fully fused MLP on tensor cores (compute capability 8.0 and newer): the same chains as
// fused_mlp.hpp, with every layer's matrix work done by warp-level mma instructions.
//
// Three forms, each a persistent grid whose blocks copy all the chain's weights into shared memory
// once, in the layout the mma fragments read:
//   WarpRegisters (fused_mlp_tensor_core_registers.cu), the fast one: each warp takes 16 rows
//     through every layer on its own, activations in registers (a layer's accumulator fragments
//     are the next layer's operand fragments), no block barrier after the weights are in.
//     Widths up to 256 (half forms) or 128 (tf32 forms).
//   Warpgroup (fused_mlp_warpgroup.cu): fp16 and bf16 on compute capability 9.0 from 512 rows,
//     planned beside WarpRegisters: 64 rows per warpgroup through wgmma.
//   SharedTiles (fused_mlp_tensor_core.cu): the block takes a tile of rows through each layer
//     together, activations in shared memory, the next tile's input arriving by cp.async. Wider
//     chains (tf32 forms up to 256, a first input up to 1024).
//
// Math (TensorCoreMath):
//   Tf32   : tf32 operands, fp32 accumulation (precision tf32).
//   Tf32x3 : each fp32 operand split into a tf32 "big" part and a tf32 remainder; three products
//            (small*big + big*small + big*big) recover fp32 accuracy (precision fp32 at large
//            batches, where it beats the fp32 FMA pipes about 2x).
//   Fp16 / Bf16 : weights and activations stored in that type, fp32 accumulation.
//
// Query, then run: plan_tensor_core_mlp() decides at load whether the chain fits and sizes the
// tile and the shared memory; build_tensor_core_mlp_image() lays the weights out for the device;
// launch_tensor_core_mlp() runs.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "backends/cuda/device/device_epilogue.hpp"
#include "backends/cuda/device/element_type.hpp"
#include "backends/cuda/device/tensor_core_math.hpp"
#include "backends/cuda/device/tensor_core_row_tail.hpp"
#include "backends/cuda/mlp/fused_mlp.hpp"
#include "backends/cuda/mlp/fused_mlp_warpgroup.hpp"
#include "backends/cuda/platform/device_info.hpp"

namespace fusednn::cuda {

enum class TensorCoreForm : int32_t { WarpRegisters = 0, SharedTiles = 1 };

constexpr int kWarpRegisterTileRows = 16;  // rows per warp tile in the WarpRegisters form

const char* tensor_core_math_name(TensorCoreMath math);

struct TensorCoreMlpLayer {
  int32_t in = 0, out = 0;
  int32_t k_steps = 0;         // mma k-steps over the (padded) input
  int32_t n_frags = 0;         // 8-column mma tiles over the (padded) output
  int32_t out_frags = 0;       // WarpRegisters: the tiles of those the epilogue finishes
  int32_t weight_stride = 0;   // 32-bit words between weight rows in shared memory
  int32_t input_stride = 0;    // 32-bit words between rows of this layer's input activations
  uint32_t weight_offset = 0;  // bytes from the start of shared memory
  uint32_t bias_offset = 0;
  int32_t input_buffer = 0;  // 0: the staging buffer, 1: odd buffer, 2: even buffer
  DeviceEpilogue epilogue;
};

struct TensorCoreMlpPlan {
  TensorCoreMath math = TensorCoreMath::Tf32;
  TensorCoreForm form = TensorCoreForm::WarpRegisters;
  int32_t width_class = 0;  // WarpRegisters: 64, 128 or 256, the kernel's register arrays
  int32_t tile_rows = 0;    // rows per tile (0: no plan); WarpRegisters: 16 per warp
  int32_t layer_count = 0;
  TensorCoreMlpLayer layers[kFusedMlpMaxLayers];
  uint32_t image_bytes = 0;  // weights + biases, copied to shared memory offset 0
  uint32_t staging_offset[2] = {0, 0};
  int32_t staging_stride = 0;  // words per staged input row (fp32)
  uint32_t odd_offset = 0;     // inputs of layers 1, 3, ...
  uint32_t even_offset = 0;    // inputs of layers 2, 4, ... (0: in the tile's staging buffer)
  size_t shared_bytes = 0;
  int blocks_per_sm = 0;
  bool split_weights = false;   // WarpRegisters Tf32x3: weights split into tf32 parts at load
  TensorCoreRowTail tail;       // WarpRegisters (and its Warpgroup companion) only
  uint32_t gamma_offset = 0;    // bytes into the image, when tail.gamma
  uint32_t beta_offset = 0;     // bytes into the image, when tail.beta
  const void* image = nullptr;  // device copy of the image, set once uploaded
  // WarpRegisters chains in fp16 or bf16 on compute capability 9.0 also get the Warpgroup form
  // (fused_mlp_warpgroup.hpp) for large batches; its image follows the first form's in `image`.
  WarpgroupMlpPlan warpgroup;
  uint32_t warpgroup_image_offset = 0;  // bytes
};

// Whether the chain runs on tensor cores on this device with `math`; fills *plan (but not
// plan->image). Needs compute capability 8.0+, 1..kFusedMlpMaxLayers layers, widths <= 256.
// The WarpRegisters form where it fits, else SharedTiles; the override tensor_core_form=shared
// forces the second.
// With a `tail` (kind != None) only the WarpRegisters form (and its Warpgroup companion)
// qualifies.
bool plan_tensor_core_mlp(const std::vector<FusedMlpLayerDesc>& layers, TensorCoreMath math,
                          const DeviceInfo& device, TensorCoreMlpPlan* plan,
                          const TensorCoreRowTail& tail = {});

// The shared-memory image of the chain's weights and biases (plan.image_bytes bytes):
// weights[l] is [out][in] as PyTorch stores it, biases[l] may be null.
// gamma and beta: the tail's LayerNorm constants [last out], when the plan's tail has them.
std::vector<uint32_t> build_tensor_core_mlp_image(const TensorCoreMlpPlan& plan,
                                                  const std::vector<const float*>& weights,
                                                  const std::vector<const float*>& biases,
                                                  const float* gamma = nullptr,
                                                  const float* beta = nullptr);

// The form launch_tensor_core_mlp() runs for `rows` rows reading x: the Warpgroup companion
// where it takes them (from its min_rows, x on 16 bytes), else the plan's form.
enum class TensorCoreLaunchForm { Warpgroup, WarpRegisters, SharedTiles };
TensorCoreLaunchForm tensor_core_mlp_launch_form(const TensorCoreMlpPlan& plan, const void* x,
                                                 int64_t rows);

// Whether the plan's kernels read a 16-bit input and write a 16-bit output themselves: the
// WarpRegisters form in fp16 and bf16 (not the tf32 forms) and its Warpgroup companion do, at
// every batch and alignment; SharedTiles reads and writes float32 only. The Warpgroup form writes
// the math's own 16-bit type only: tensor_core_mlp_writes() says whether a launch of `rows` rows
// (any alignment) writes `output`.
bool tensor_core_mlp_takes_16_bit_io(const TensorCoreMlpPlan& plan);
bool tensor_core_mlp_writes(const TensorCoreMlpPlan& plan, ElementType output, int64_t rows);

// y[rows][last out] = chain(x[rows][first in]); the image must be uploaded. x and y are float32
// unless tensor_core_mlp_takes_16_bit_io(), y as tensor_core_mlp_writes() allows.
void launch_tensor_core_mlp(const TensorCoreMlpPlan& plan, TypedInput x, TypedOutput y,
                            int64_t rows, const DeviceInfo& device, cudaStream_t stream);

}  // namespace fusednn::cuda
