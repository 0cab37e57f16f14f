// SPDX-License-Identifier: Apache-2.0
// The fused MLP on tensor cores, WarpRegisters form (see fused_mlp_tensor_core.hpp).
//
// Why this form: the SharedTiles form is slower than PyTorch on large batches: one 8-warp block
// per SM (179 KB of shared memory), a block barrier per layer, every activation through shared
// memory, and integer work outweighing the mma's. Here a warp owns 16 rows from input to output;
// the weights are the only shared data, read-only after one barrier.
//
// Napkin math, seed MLP 100-128-64-10 at batch 262144: 6.2 G multiply-adds in bf16, 115 MB of
// fp32 input and output, and each warp reads the 46 KB of bf16 weights from shared memory per
// 16 rows; each of the three takes about as long as the others at the device's rates, so the
// bound is memory. 3xTF32 triples the products at half the rate. In practice the kernel is not
// memory-bound: it waits on fixed-latency dependencies, instruction fetch and shared memory, at
// ~3 warps per scheduler. 3xTF32 splits operands with integer rounding, and the weights once at
// load, which more than halves its cost.
//
// Where the instructions go: each layer is a loop over groups of 4 output tiles, the k loop
// inside it unrolled, so that only one group's accumulators are live; the half forms up to
// width 128 run a fixed k trip count over weight rows padded to the width class (no branch per
// k-step), two layers per trip into alternating operand arrays (no register copies between
// layers), one copy of the layer code with the activation chosen per group (the general epilogue in
// a loop laid out away from the common path); each warp's next input rows arrive in shared memory
// by cp.async while it computes (kernels whose weights leave room); blocks are as wide as the
// registers allow; accumulators start from the bias.
//
// Fragment bookkeeping (PTX ISA, mma.m16n8k8 tf32 and mma.m16n8k16 f16/bf16; g = lane / 4,
// t = lane % 4). C fragments hold (row g, columns 2t, 2t+1) and (row g+8, the same) of an 8-column
// tile. f16/bf16 A fragments hold (row g, k 2t..2t+1), (row g+8, same), (row g, k 2t+8..2t+9),
// (row g+8, same): C tiles 2s and 2s+1, packed in pairs, are exactly A's k-step s. tf32 A
// fragments hold (row g, k t), (row g+8, k t), (row g, k t+4), (row g+8, k t+4): the order of k
// inside a dot product is free, so k t and t+4 are taken to mean columns 2t and 2t+1 of C tile
// s, and the weights are laid out to match. A thread's two B words of k-steps 2q and 2q+1 are
// adjacent in shared memory (one 16-byte load); rows 16 mod 32 words apart make those loads
// conflict-free. The first layer reads the input rows (from the warp's staged copy or from global
// memory) in the caller's element type, float32 or 16-bit: 4 consecutive columns per thread and
// k-step in the half forms (one 16- or 8-byte load), 2 in the tf32 forms, with the weights
// ordered to match; the last layer stores in the output's element type.
#include "backends/cuda/mlp/fused_mlp_tensor_core_registers.hpp"

#include <algorithm>
#include <cstring>

#include "backends/cuda/mlp/fused_mlp_tensor_core_registers_kernel.cuh"
#include "backends/cuda/platform/launch.hpp"
#include "common/error.hpp"

namespace fusednn::cuda {
namespace {

using warp_registers::KernelFunction;
using warp_registers::kRowsPerWarp;
using warp_registers::kStepsPerLoad;
using warp_registers::kTileGroup;
using warp_registers::RegisterParams;
using warp_registers::step_elements;

KernelFunction kernel_for(TensorCoreMath math, int width_class, bool split_weights) {
  switch (math) {
    case TensorCoreMath::Tf32:
      return warp_registers::kernel_for_width<TensorCoreMath::Tf32>(width_class, false);
    case TensorCoreMath::Tf32x3:
      return warp_registers::kernel_for_width<TensorCoreMath::Tf32x3>(width_class, split_weights);
    case TensorCoreMath::Fp16:
      return warp_registers::kernel_for_width<TensorCoreMath::Fp16>(width_class, false);
    case TensorCoreMath::Bf16: break;
  }
  return warp_registers::kernel_for_width<TensorCoreMath::Bf16>(width_class, false);
}

int round_up(int value, int multiple) { return (value + multiple - 1) / multiple * multiple; }

// Each warp's input buffer in shared memory (after the image), where the next tile's rows arrive
// while the warp computes: rows padded to 4 floats.
int stage_stride(const TensorCoreMlpPlan& plan) { return round_up(plan.layers[0].in, 4); }
uint32_t stage_offset(const TensorCoreMlpPlan& plan) {
  return static_cast<uint32_t>(round_up(static_cast<int>(plan.image_bytes), 16));
}
uint32_t stage_bytes(const TensorCoreMlpPlan& plan) {
  return static_cast<uint32_t>(kRowsPerWarp * stage_stride(plan) * 4);
}

// Round to nearest, ties away from zero, into tf32 (cvt.rna's rounding), kept in fp32's layout.
uint32_t tf32_bits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  if ((bits & 0x7f800000u) == 0x7f800000u) return bits;  // inf and NaN as they are
  return (bits + 0x1000u) & 0xffffe000u;
}

}  // namespace

bool plan_warp_register_mlp(const std::vector<FusedMlpLayerDesc>& layers, TensorCoreMath math,
                            const DeviceInfo& device, const TensorCoreRowTail& tail,
                            TensorCoreMlpPlan* plan) {
  if (device.major < 8) return false;
  if (layers.empty() || layers.size() > static_cast<size_t>(kFusedMlpMaxLayers)) return false;
  const int step = step_elements(math);
  const int max_width = warp_register_max_width(math);
  TensorCoreMlpPlan result;
  result.math = math;
  result.form = TensorCoreForm::WarpRegisters;
  result.layer_count = static_cast<int32_t>(layers.size());
  int widest = 0;
  for (size_t l = 0; l < layers.size(); ++l) {
    const FusedMlpLayerDesc& desc = layers[l];
    if (desc.in < 1 || desc.out < 1 || desc.in > max_width || desc.out > max_width) return false;
    if (l > 0 && desc.in != layers[l - 1].out) return false;
    TensorCoreMlpLayer& layer = result.layers[l];
    layer.in = desc.in;
    layer.out = desc.out;
    layer.epilogue = desc.epilogue;
    layer.k_steps = (desc.in + step - 1) / step;
    // Whole groups of tiles, so that every column the next layer's weight loads cover is
    // computed (from zero weights and a zero bias past out).
    const int multiplied_out = round_up(desc.out, 8 * kTileGroup);
    layer.out_frags = round_up(desc.out, 8) / 8;
    layer.n_frags = multiplied_out / 8;
    widest = std::max({widest, round_up(layer.k_steps, kStepsPerLoad) * step, multiplied_out});
  }
  if (widest > max_width) return false;
  result.width_class = widest <= 64 ? 64 : widest <= 128 ? 128 : 256;
  const DeviceEpilogue& last_epilogue = layers.back().epilogue;
  const bool relu_or_none =
      last_epilogue.count == 0 || (last_epilogue.count == 1 && last_epilogue.kind[0] == kOpReLU);
  if (tail.kind != RowTailKind::None &&
      (!relu_or_none || layers.back().out > warp_registers::kMaxTailColumns)) {
    return false;
  }
  result.tail = tail;
  result.tile_rows = kRowsPerWarp;
  const int warps = warp_registers::warps_per_block(math, result.width_class);

  // Lays out the image (and shared memory) with the weights split or not and returns the blocks
  // per SM that leaves resident (0: it does not fit).
  const auto lay_out = [&](bool split) {
    result.split_weights = split;
    // 16 words per pair of k-steps (32 split), over the width class where full_width_rows()
    // (zeros past the layer's input: the kernel's k loop has a fixed trip count there), else
    // over the layer's input; rows 16 mod 32 words apart for conflict-free 16-byte loads (a
    // quarter warp reads 4 lanes' 16 bytes from each of two rows).
    const bool full_width = warp_registers::full_width_rows(math, result.width_class);
    uint32_t offset = 0;
    for (int l = 0; l < result.layer_count; ++l) {
      TensorCoreMlpLayer& layer = result.layers[l];
      const int row_words =
          (full_width ? result.width_class / step : round_up(layer.k_steps, kStepsPerLoad)) *
          (split ? 16 : 8);
      const int weight_stride = row_words % 32 == 16 ? row_words : row_words + 16;
      layer.weight_stride = weight_stride;
      layer.weight_offset = offset;
      offset += static_cast<uint32_t>(layer.n_frags * 8 * weight_stride * 4);
      layer.bias_offset = offset;  // 4 words per column pair (build_warp_register_mlp_image)
      offset += static_cast<uint32_t>(layer.n_frags * 16 * 4);
    }
    result.gamma_offset = result.beta_offset = 0;
    if (tail.kind == RowTailKind::LayerNorm) {  // gamma and beta after the weights (offsets > 0)
      // Read up to the padded out.
      const uint32_t bytes = static_cast<uint32_t>(round_up(layers.back().out, 8) * 4);
      if (tail.gamma) result.gamma_offset = offset, offset += bytes;
      if (tail.beta) result.beta_offset = offset, offset += bytes;
    }
    result.image_bytes = offset;
    // The image, then each warp's input buffer where the kernel stages its input.
    result.shared_bytes = warp_registers::stages_input(math, result.width_class)
                              ? stage_offset(result) + size_t(warps) * stage_bytes(result)
                              : result.image_bytes;
    if (result.shared_bytes > device.shared_per_block_optin) return 0;
    const KernelFunction kernel = kernel_for(math, result.width_class, split);
    FDNN_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(device.shared_per_block_optin)));
    int blocks = 0;
    FDNN_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, 32 * warps,
                                                                  result.shared_bytes));
    return blocks;
  };
  // Tf32x3 splits the weights at load where the doubled image keeps as many blocks resident
  // (the seed MLP: one 8-warp block per SM either way); the kernel then splits only the
  // activations.
  int blocks = lay_out(false);
  if (math == TensorCoreMath::Tf32x3) {
    const int split_blocks = lay_out(true);
    if (split_blocks < 1 || split_blocks < blocks) {
      lay_out(false);
    } else {
      blocks = split_blocks;
    }
  }
  if (blocks < 1) return false;
  result.blocks_per_sm = blocks;
  *plan = result;
  return true;
}

std::vector<uint32_t> build_warp_register_mlp_image(const TensorCoreMlpPlan& plan,
                                                    const std::vector<const float*>& weights,
                                                    const std::vector<const float*>& biases,
                                                    const float* gamma, const float* beta) {
  std::vector<uint32_t> image(plan.image_bytes / 4, 0u);
  const bool half = is_half(plan.math);
  const int step = step_elements(plan.math);
  for (int l = 0; l < plan.layer_count; ++l) {
    const TensorCoreMlpLayer& layer = plan.layers[l];
    uint32_t* rows = image.data() + layer.weight_offset / 4;
    for (int n = 0; n < layer.out; ++n) {
      const float* source = weights[l] + static_cast<size_t>(n) * layer.in;
      uint32_t* row = rows + static_cast<size_t>(n) * layer.weight_stride;
      for (int k = 0; k < layer.in; ++k) {
        // Word w of k-step s is thread w / 2's word w % 2 of that step. The half forms pack two
        // columns per word: the first layer's operands are 4 consecutive input columns per
        // thread and step (weights in their natural order); later layers' operands are C
        // fragments, so thread t's two words of step s hold columns 16s+2t, 16s+2t+1 and
        // 16s+8+2t, 16s+9+2t. tf32 words hold one column each, in order.
        const int s = k / step, r = k % step;
        const int w = !half ? r : l == 0 ? r / 2 : 2 * ((r % 8) / 2) + r / 8;
        if (plan.split_weights) {
          // One 16-byte load per step: the thread's two big words, then their two rests (the
          // kernel's split_tf32, done once here).
          const uint32_t big = tf32_bits(source[k]);
          float big_value;
          std::memcpy(&big_value, &big, sizeof big_value);
          const float rest = source[k] - big_value;
          const int word = 16 * s + 4 * (w / 2) + w % 2;
          row[word] = big;
          std::memcpy(&row[word + 2], &rest, sizeof rest);
          continue;
        }
        // One 16-byte load gives a thread its words of steps 2q and 2q + 1.
        const int word = 16 * (s / kStepsPerLoad) + 4 * (w / 2) + 2 * (s % kStepsPerLoad) + w % 2;
        if (!half) {
          uint32_t bits;
          std::memcpy(&bits, &source[k], sizeof bits);
          row[word] = plan.math == TensorCoreMath::Tf32 ? tf32_bits(source[k]) : bits;
          continue;
        }
        const uint32_t bits = tensor_core_half_bits(source[k], plan.math);
        row[word] |= (k % 2 == 0) ? bits : (bits << 16);
      }
    }
    if (biases[l] != nullptr) {
      // Columns c, c + 1 as {c, c + 1, c, c + 1}: one 16-byte load is the starting value of a
      // thread's C fragment (rows g and g + 8), so accumulators start from the bias.
      uint32_t* words = image.data() + layer.bias_offset / 4;
      for (int c = 0; c < layer.out; ++c) {
        uint32_t bits;
        std::memcpy(&bits, &biases[l][c], sizeof bits);
        words[2 * (c & ~1) + (c & 1)] = bits;
        words[2 * (c & ~1) + 2 + (c & 1)] = bits;
      }
    }
  }
  copy_row_tail_constants(image, plan.gamma_offset, plan.beta_offset, gamma, beta,
                          static_cast<size_t>(plan.layers[plan.layer_count - 1].out));
  return image;
}

void launch_warp_register_mlp(const TensorCoreMlpPlan& plan, TypedInput x, TypedOutput y,
                              int64_t rows, const DeviceInfo& device, cudaStream_t stream) {
  if (rows <= 0) return;
  RegisterParams p{};
  p.x = x.data;
  p.y = y.data;
  p.input_type = static_cast<int32_t>(x.type);
  p.output_type = static_cast<int32_t>(y.type);
  p.image = static_cast<const uint4*>(plan.image);
  p.rows = rows;
  p.tiles = (rows + kRowsPerWarp - 1) / kRowsPerWarp;
  p.layer_count = plan.layer_count;
  p.input_width = plan.layers[0].in;
  // Vector accesses only on 16-byte buffers: the context keys its graphs by 16-byte alignment,
  // and a graph captured on a buffer 8 bytes off 16 is replayed for one 4 bytes off.
  const bool x_aligned = reinterpret_cast<uintptr_t>(x.data) % 16 == 0;
  p.vector_output = plan.layers[plan.layer_count - 1].out % 2 == 0 &&
                    reinterpret_cast<uintptr_t>(y.data) % 16 == 0;
  p.image_chunks = plan.image_bytes / 16;
  p.stage_offset = stage_offset(plan);
  p.stage_stride = stage_stride(plan);
  p.vector_copy = x_aligned && (x.type != ElementType::Float32 || plan.layers[0].in % 4 == 0);
  const int in_alignment = is_half(plan.math) ? 4 : 2;
  p.vector_input = plan.layers[0].in % in_alignment == 0 && x_aligned;
  p.tail_kind = static_cast<int32_t>(plan.tail.kind);
  p.tail_eps = plan.tail.eps;
  p.gamma_offset = plan.gamma_offset;
  p.beta_offset = plan.beta_offset;
  for (int l = 0; l < plan.layer_count; ++l) p.layers[l] = plan.layers[l];
  const int warps = warp_registers::warps_per_block(plan.math, plan.width_class);
  const int64_t blocks = (p.tiles + warps - 1) / warps;
  const int64_t resident = int64_t{device.sm_count} * plan.blocks_per_sm;
  const unsigned grid = static_cast<unsigned>(std::min(blocks, resident));
  launch_kernel(kernel_for(plan.math, plan.width_class, plan.split_weights),
                "warp_register_mlp_kernel", dim3(grid), dim3(32 * warps), plan.shared_bytes, stream,
                p);
}

}  // namespace fusednn::cuda
