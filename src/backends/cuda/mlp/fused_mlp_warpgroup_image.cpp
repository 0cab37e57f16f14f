// SPDX-License-Identifier: Apache-2.0
// The Warpgroup form's shared-memory layout and weight image (host code, testable without a GPU).
//
// wgmma reads B (K x N, here W^T: k runs along a layer's input, n along its output) from shared
// memory as 8 x 8 core matrices of 16-bit values, each 8 rows of n holding 16 contiguous bytes of
// k ("K-major": PyTorch's W[out][in] rows, cut into 8-column pieces). A layer stores core matrix
// (n / 8, k / 8) at ((n / 8) * k_steps * 2 + k / 8) * 128 bytes, so that the descriptor of k-step
// s starts at 256 * s, core matrices adjacent in k are 128 bytes apart (the leading byte offset)
// and those adjacent in n are k_steps * 256 apart (the stride byte offset).
//
// A operands come from registers in mma.m16n8k16's layout: thread (g, t) of a warp holds rows g
// and g + 8, k 2t..2t+1 and 2t+8..2t+9 of each step. Later layers' operands are the previous
// layer's accumulators (k in its natural order). The first layer's are read from the staged
// fp32 rows as 4 consecutive columns per thread and step (one 16-byte load), so its k order is
// permuted: thread t's 4 columns of step s (its k 2t, 2t + 1, 2t + 8, 2t + 9) start at
//   quads:        16 s + 4 t
//   interleaved:  32 (s / 2) + 8 t + 4 (s % 2)   (steps 2p and 2p + 1 share 32 columns)
// A quarter warp's 16-byte loads (rows g and g + 1, t = 0..3) are conflict-free when the two rows'
// 4-bank groups do not meet: quads need a row stride of 16 mod 32 words, interleaved an odd
// number of 4-word groups (the seed MLP's 100: its quads had 2-way conflicts).
#include <algorithm>
#include <cstring>

#include "backends/cuda/mlp/fused_mlp_warpgroup.hpp"
#include "common/half_float.hpp"

namespace fusednn::cuda {
namespace {

int round_up(int value, int multiple) { return (value + multiple - 1) / multiple * multiple; }

int wgmma_n(int out) { return out <= 16 ? 16 : out <= 32 ? 32 : out <= 64 ? 64 : 128; }

// The first column of thread t's 4 in k-step s (the comment above).
int first_layer_column(bool interleaved, int step, int t) {
  return interleaved ? 32 * (step / 2) + 8 * t + 4 * (step % 2) : 16 * step + 4 * t;
}

}  // namespace

bool lay_out_warpgroup_mlp(const std::vector<FusedMlpLayerDesc>& layers, TensorCoreMath math,
                           const TensorCoreRowTail& tail, int warpgroups, int stages,
                           WarpgroupMlpPlan* plan) {
  if (math != TensorCoreMath::Fp16 && math != TensorCoreMath::Bf16) return false;
  if (layers.empty() || layers.size() > static_cast<size_t>(kFusedMlpMaxLayers)) return false;
  if (layers.front().in % 4 != 0) return false;
  WarpgroupMlpPlan result;
  result.math = math;
  result.layer_count = static_cast<int32_t>(layers.size());
  int widest = 0;
  for (size_t l = 0; l < layers.size(); ++l) {
    const FusedMlpLayerDesc& desc = layers[l];
    if (desc.in < 1 || desc.out < 1) return false;
    if (desc.in > kWarpgroupMaxWidth || desc.out > kWarpgroupMaxWidth) return false;
    if (l > 0 && desc.in != layers[l - 1].out) return false;
    WarpgroupMlpLayer& layer = result.layers[l];
    layer.in = desc.in;
    layer.out = desc.out;
    layer.epilogue = desc.epilogue;
    layer.n = wgmma_n(desc.out);
    widest = std::max({widest, round_up(desc.in, 16), layer.n});
  }
  result.width_class = widest <= 64 ? 64 : 128;
  if (tail.kind != RowTailKind::None && layers.back().out > kWarpgroupMaxTailColumns) return false;
  const int input_width = layers.front().in;
  result.interleaved_columns = (input_width / 4) % 2 == 1;
  // The steps up to the last that holds a column of the input (interleaved, a width of 12 needs
  // two: columns 8..11 are step 1's).
  for (int step = 0; step < result.width_class / 16; ++step) {
    for (int t = 0; t < 4; ++t) {
      if (first_layer_column(result.interleaved_columns, step, t) < input_width) {
        result.input_steps = step + 1;
      }
    }
  }
  result.uniform_hidden =
      result.width_class == 64 && tail.kind == RowTailKind::None && result.layer_count >= 2;
  for (int l = 0; l + 1 < result.layer_count; ++l) {
    const WarpgroupMlpLayer& layer = result.layers[l];
    const bool relu = layer.epilogue.count == 1 && layer.epilogue.kind[0] == kOpReLU;
    if (layer.n != result.width_class || !relu) result.uniform_hidden = false;
  }
  // Every layer runs the width class's k-steps (zero weights past its input): a k loop with a
  // run-time trip count put the multiplies on divergent paths, and ptxas serialized them.
  uint32_t offset = 0;
  for (int l = 0; l < result.layer_count; ++l) {
    WarpgroupMlpLayer& layer = result.layers[l];
    layer.k_steps = result.width_class / 16;
    layer.weight_offset = offset;
    offset += static_cast<uint32_t>(layer.n * layer.k_steps * 32);
    layer.bias_offset = offset;
    offset += static_cast<uint32_t>(round_up(layer.n * 4, 128));
  }
  // The tail's LayerNorm constants after the weights (offsets > 0), N floats each: the kernel
  // reads them up to the last layer's N, zeros past out.
  result.tail = tail;
  const int last_n = result.layers[result.layer_count - 1].n;
  const auto constants = static_cast<uint32_t>(round_up(last_n * 4, 128));
  if (tail.kind == RowTailKind::LayerNorm && tail.gamma) {
    result.gamma_offset = offset, offset += constants;
  }
  if (tail.kind == RowTailKind::LayerNorm && tail.beta) {
    result.beta_offset = offset, offset += constants;
  }
  result.image_bytes = offset;
  result.warpgroups = warpgroups;
  result.stages = stages;
  // A tile's rows arrive as one bulk copy, as they lie in memory (a copy per row, 64 a tile, is
  // slower). The kernel reads only columns inside the width and takes zeros for the rest of the
  // last k-step. A buffer holds a float32 tile, the widest input; a 16-bit tile's copy moves
  // half of that (WarpgroupParams::tile_bytes, set per launch from the input's element type).
  result.stage_bytes = static_cast<uint32_t>(kWarpgroupTileRows * layers.front().in * 4);
  result.stage_offset = offset;
  const size_t buffers = size_t(warpgroups) * size_t(stages);
  result.barrier_offset = static_cast<uint32_t>(offset + buffers * result.stage_bytes);
  result.shared_bytes = result.barrier_offset + buffers * 8;
  *plan = result;
  return true;
}

std::vector<uint32_t> build_warpgroup_mlp_image(const WarpgroupMlpPlan& plan,
                                                const std::vector<const float*>& weights,
                                                const std::vector<const float*>& biases,
                                                const float* gamma, const float* beta) {
  std::vector<uint32_t> image(plan.image_bytes / 4, 0u);
  auto narrow = [&](float value) -> uint32_t {
    return plan.math == TensorCoreMath::Fp16 ? float_to_half(value) : float_to_bfloat16(value);
  };
  for (int l = 0; l < plan.layer_count; ++l) {
    const WarpgroupMlpLayer& layer = plan.layers[l];
    auto* values = reinterpret_cast<uint16_t*>(image.data()) + layer.weight_offset / 2;
    for (int n = 0; n < layer.out; ++n) {
      const float* row = weights[l] + static_cast<size_t>(n) * layer.in;
      for (int kk = 0; kk < 16 * layer.k_steps; ++kk) {
        const int within = kk % 16;  // k 2t, 2t + 1, 2t + 8, 2t + 9 are thread t's 4 columns
        const int column =
            l > 0 ? kk
                  : first_layer_column(plan.interleaved_columns, kk / 16, (within % 8) / 2) +
                        2 * (within / 8) + within % 2;
        if (column >= layer.in) continue;
        const size_t core = static_cast<size_t>(n / 8) * layer.k_steps * 2 + kk / 8;
        const size_t at = core * 64 + (n % 8) * 8 + kk % 8;  // in 16-bit values
        values[at] = static_cast<uint16_t>(narrow(row[column]));
      }
    }
    if (biases[l] != nullptr) {
      std::memcpy(image.data() + layer.bias_offset / 4, biases[l], sizeof(float) * layer.out);
    }
  }
  copy_row_tail_constants(image, plan.gamma_offset, plan.beta_offset, gamma, beta,
                          static_cast<size_t>(plan.layers[plan.layer_count - 1].out));
  return image;
}

}  // namespace fusednn::cuda
