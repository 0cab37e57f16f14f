// SPDX-License-Identifier: Apache-2.0
// The Warpgroup form of the tensor-core fused MLP (fused_mlp_warpgroup.hpp): kernel, plan and
// launch. Layout of the weights and of A's fragments: fused_mlp_warpgroup_image.cpp.
//
// Why: the WarpRegisters form issues one mma.sync per 16 x 8 x 16 product and loads its B
// fragment from shared memory first, so at large batches its warps spend their issue slots on
// loads, mma and their dependencies, and run several times slower than their input and output
// can stream. Here one wgmma multiplies 64 rows by a whole layer's k-step with B read by
// the tensor cores themselves, asynchronously: a 64-wide layer is 4 instructions per warp for 64
// rows instead of 32 mma and 16 loads per 16 rows.
//
// Napkin math, 64-wide fp16 MLP (32-64-64-64-64-16) at batch 2^21: 32 G multiply-adds against
// 268 MB of fp32 input and 134 MB of output; at the dense fp16 rate and the device's copy rate
// the bytes take longer than the arithmetic: memory-bound if the input streams while the tensor
// cores work. Hence a ring of input tiles per warpgroup, filled by bulk copies a warp issues as
// soon as a buffer is read.
//
// Shape: one block per SM of 3 or 4 warpgroups (registers: accumulators are N / 2 floats a
// thread); each warpgroup loops over 64-row tiles. A tile: wait for its input stage, read each
// thread's rows as A fragments (16 bytes per row and k-step), release the stage (named barrier,
// then the next copy), then per layer: accumulators from the bias, wgmma over the k-steps,
// commit and wait, the activation packed into the next layer's A fragments (cvt.relu for ReLU),
// or fp32 stores for the last layer.
#include "backends/cuda/mlp/fused_mlp_warpgroup.hpp"

#include <cuda_pipeline.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "backends/cuda/device/dependent_launch.cuh"
#include "backends/cuda/device/element_type.cuh"
#include "backends/cuda/device/epilogue.cuh"
#include "backends/cuda/device/kernel_timeline.cuh"
#include "backends/cuda/device/mbarrier.cuh"
#include "backends/cuda/device/row_tail.cuh"
#include "backends/cuda/device/wgmma.cuh"
#include "backends/cuda/platform/launch.hpp"
#include "common/error.hpp"

namespace fusednn::cuda {
namespace {

// Which output element types a kernel stores (a template parameter): the general kernels choose
// at run time between float32 and the math's 16-bit type; the uniform kernels, whose wgmma
// pipeline ptxas serialises when their last layer holds both store paths, have one kernel each.
enum class OutputStore { Either = 0, Float32 = 1, Math16 = 2 };

struct WarpgroupParams {
  const char* x;        // input_type elements
  void* y;              // output_type elements
  int32_t input_type;   // ElementType of x
  int32_t output_type;  // ElementType of y
  int32_t input_bytes;  // per element of x
  const uint4* image;
  int64_t rows;
  int64_t tiles;  // of kWarpgroupTileRows rows
  int32_t layer_count;
  int32_t input_width;
  uint32_t stage_bytes;  // a stage buffer's stride: a float32 tile's rows
  // A full tile's input as it lies in the caller's memory (64 rows of input_bytes elements, a
  // multiple of 16 bytes): its bulk copy's bytes, at most stage_bytes.
  uint32_t tile_bytes;
  // The last tile's input, which may hold fewer rows: its bulk copy's bytes (a multiple of 16)
  // and the 8 bytes past them that 16-bit rows may leave (0 or 8), copied by the issuer itself.
  uint32_t last_tile_bytes;
  uint32_t last_tile_rest;
  int32_t input_steps;
  int32_t interleaved_columns;  // the first layer's k order (fused_mlp_warpgroup_image.cpp)
  int32_t stages;
  int32_t vector_output;  // y on 16 bytes and an even last width: stores of 2 elements
  uint32_t image_chunks;  // 16-byte chunks
  uint32_t stage_offset;
  uint32_t barrier_offset;
  int32_t tail_kind;  // RowTailKind
  float tail_eps;
  uint32_t gamma_offset;  // bytes into shared memory; 0: none
  uint32_t beta_offset;
  WarpgroupMlpLayer layers[kFusedMlpMaxLayers];
};

// Warpgroups a block holds at most: registers allow 4 at width 64 (~100 a thread), 3 at 128
// (two 32-register operand arrays and 64 accumulators).
__host__ __device__ constexpr int max_warpgroups(int width_class) {
  return width_class <= 64 ? 4 : 3;
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

template <int kSteps>
using Operands = uint32_t[kSteps][4];

// Two fp32 values as a 16-bit pair (low first), clamped at zero with kRelu (cvt's .relu, which
// keeps NaN as PyTorch's ReLU does: PTX turns a NaN result into the canonical NaN).
template <TensorCoreMath kMath, bool kRelu>
__device__ __forceinline__ uint32_t pack(float low, float high) {
  uint32_t bits;
  if constexpr (kMath == TensorCoreMath::Fp16) {
    if constexpr (kRelu) {
      asm("cvt.rn.relu.f16x2.f32 %0, %1, %2;" : "=r"(bits) : "f"(high), "f"(low));
    } else {
      asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(bits) : "f"(high), "f"(low));
    }
  } else {
    if constexpr (kRelu) {
      asm("cvt.rn.relu.bf16x2.f32 %0, %1, %2;" : "=r"(bits) : "f"(high), "f"(low));
    } else {
      asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(bits) : "f"(high), "f"(low));
    }
  }
  return bits;
}

__device__ __forceinline__ void warpgroup_barrier(int warpgroup) {
  asm volatile("bar.sync %0, 128;" ::"r"(1 + warpgroup) : "memory");
}

// The input of `tile`, whose rows start at `source`, into the stage buffer at `buffer` as one bulk
// copy (rows are contiguous; a whole tile is a multiple of 16 bytes), counted on `barrier`. One
// thread. The last tile's 16-bit rows may end 8 bytes past a multiple of 16: those arrive by an
// 8-byte cp.async that this thread waits for before its arrival on the mbarrier, whose release
// publishes them with the tile (with a plain load and store there, ptxas serialises the uniform
// kernels' wgmma pipeline for want of registers).
__device__ __forceinline__ void stage_tile(const WarpgroupParams& p, int64_t tile,
                                           const char* source, uint32_t buffer, uint32_t barrier) {
  const bool last = tile + 1 == p.tiles;
  const uint32_t bytes = last ? p.last_tile_bytes : p.tile_bytes;
  if (last && p.last_tile_rest != 0) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8;" ::"r"(buffer + bytes),
                 "l"(source + bytes)
                 : "memory");
    asm volatile("cp.async.wait_all;" ::: "memory");
  }
  expect_bytes(barrier, bytes);
  if (bytes != 0) bulk_copy(buffer, reinterpret_cast<const float*>(source), bytes, barrier);
}

// 16 bytes of shared memory at `address` where `inside`, else zeros: a predicated load, not a
// branch, so that a tile's loads can all be in flight before the first conversion needs one.
__device__ __forceinline__ float4 load_shared_if(bool inside, uint32_t address) {
  float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  asm("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %4, 0;\n\t"
      "@p ld.shared.v4.f32 {%0, %1, %2, %3}, [%5];\n\t}"
      : "+f"(v.x), "+f"(v.y), "+f"(v.z), "+f"(v.w)
      : "r"(static_cast<int>(inside)), "r"(address));
  return v;
}

// 8 bytes of shared memory at `address` where `inside`, else zeros (load_shared_if's 16-bit
// rows: 4 elements).
__device__ __forceinline__ uint2 load_shared_pair_if(bool inside, uint32_t address) {
  uint2 v = make_uint2(0u, 0u);
  asm("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %2, 0;\n\t"
      "@p ld.shared.v2.b32 {%0, %1}, [%3];\n\t}"
      : "+r"(v.x), "+r"(v.y)
      : "r"(static_cast<int>(inside)), "r"(address));
  return v;
}

// One k-step's A fragment from a thread's 4 columns of rows g (low) and g + 8 (high).
template <TensorCoreMath kMath>
__device__ __forceinline__ void pack_step(const float4& low, const float4& high,
                                          uint32_t (&fragment)[4]) {
  fragment[0] = pack<kMath, false>(low.x, low.y);
  fragment[1] = pack<kMath, false>(high.x, high.y);
  fragment[2] = pack<kMath, false>(low.z, low.w);
  fragment[3] = pack<kMath, false>(high.z, high.w);
}

// The 4 columns of 16-bit elements (T) in `bits` widened (exactly).
template <typename T>
__device__ __forceinline__ float4 widen_four(uint2 bits) {
  ElementPack<T, 4> pack;
  memcpy(&pack, &bits, sizeof pack);
  return make_float4(widen_element(pack.values[0]), widen_element(pack.values[1]),
                     widen_element(pack.values[2]), widen_element(pack.values[3]));
}

// pack_step from 16-bit rows: pairs of the math's own type are already the fragment's words
// (what widening then rounding them would give); the other 16-bit type is widened and rounded.
template <TensorCoreMath kMath, typename T>
__device__ __forceinline__ void pack_step_16(uint2 low, uint2 high, uint32_t (&fragment)[4]) {
  constexpr bool kSame = (kMath == TensorCoreMath::Fp16) == std::is_same_v<T, __half>;
  if constexpr (kSame) {
    fragment[0] = low.x, fragment[1] = high.x, fragment[2] = low.y, fragment[3] = high.y;
  } else {
    pack_step<kMath>(widen_four<T>(low), widen_four<T>(high), fragment);
  }
}

// The first layer's A fragments from this warp's 16 staged rows: 4 consecutive columns per
// thread and k-step, in quads or interleaved (the weights' k order matches, and the image's
// file says which order is conflict-free at which row stride); zeros past the input's width (a
// multiple of 4, so a thread's 4 columns are all in or all out).
//
// Two orders, chosen by timing them (bench/cuda/warpgroup_mlp_timeline.cu): at width 128 every
// load first, then every conversion: with a branch per k-step the compiler converts each step's
// loads before issuing the next step's, and the warpgroups spend a large share of each tile
// reading the input. At width 64 (two or four k-steps) the batched order is slightly slower, so
// it keeps a branch per step.
//
// T: the rows' element type. 16-bit rows take 8-byte loads and no conversion where T is the
// math's type.
template <TensorCoreMath kMath, int kSteps, typename T = float>
__device__ __forceinline__ void load_input(uint32_t rows, int stride, int input_steps,
                                           bool interleaved, int g, int t, Operands<kSteps>& a) {
  constexpr bool kWide = sizeof(T) == 4;
  using Loaded = std::conditional_t<kWide, float4, uint2>;
  Loaded low[kSteps], high[kSteps];
  // Step s starts at 16 s + 4 t (quads) or 32 (s / 2) + 8 t + 4 (s % 2): 16 s + 8 t, less 12 on
  // odd steps.
  const int even_column = interleaved ? 8 * t : 4 * t;
  const int odd_column = interleaved ? 8 * t - 12 : 4 * t;
#pragma unroll
  for (int s = 0; s < kSteps; ++s) {
    const int first = 16 * s + (s % 2 == 0 ? even_column : odd_column);
    const bool inside = s < input_steps && first < stride;
    const uint32_t column = static_cast<uint32_t>(first);
    constexpr uint32_t kBytes = sizeof(T);
    const uint32_t low_row = rows + kBytes * (static_cast<uint32_t>(g * stride) + column);
    const uint32_t high_row = rows + kBytes * (static_cast<uint32_t>((g + 8) * stride) + column);
    if constexpr (kSteps <= 4) {
      if (!inside) {
#pragma unroll
        for (int i = 0; i < 4; ++i) a[s][i] = 0u;
        continue;
      }
    }
    if constexpr (kWide) {
      low[s] = load_shared_if(inside, low_row);
      high[s] = load_shared_if(inside, high_row);
    } else {
      low[s] = load_shared_pair_if(inside, low_row);
      high[s] = load_shared_pair_if(inside, high_row);
    }
    if constexpr (kSteps <= 4) {
      if constexpr (kWide) {
        pack_step<kMath>(low[s], high[s], a[s]);
      } else {
        pack_step_16<kMath, T>(low[s], high[s], a[s]);
      }
    }
  }
  if constexpr (kSteps > 4) {
#pragma unroll
    for (int s = 0; s < kSteps; ++s) {
      if constexpr (kWide) {
        pack_step<kMath>(low[s], high[s], a[s]);
      } else {
        pack_step_16<kMath, T>(low[s], high[s], a[s]);
      }
    }
  }
}

// acc (holding the bias) += a x W^T over the layer's first kActive k-steps (the rest of `a` is
// zeros: the first layer where its input fills half of them). Every layer's weights are laid out
// over the width class's k-steps (layer.k_steps == kSteps), so the stride is a constant.
template <TensorCoreMath kMath, int kSteps, int kN, int kActive = kSteps>
__device__ __forceinline__ void multiply(const WarpgroupMlpLayer& layer, uint32_t shared_base,
                                         Operands<kSteps>& a, float (&acc)[kN / 2]) {
  const uint32_t weights = shared_base + layer.weight_offset;
  constexpr uint32_t n_stride = static_cast<uint32_t>(kSteps) * 256u;
#pragma unroll
  for (int i = 0; i < kN / 2; ++i) wgmma::pin(acc[i]);
#pragma unroll
  for (int s = 0; s < kSteps; ++s) {
#pragma unroll
    for (int i = 0; i < 4; ++i) wgmma::pin(a[s][i]);
  }
  wgmma::fence();
#pragma unroll
  for (int s = 0; s < kActive; ++s) {
    wgmma::multiply<kMath, kN>(acc, a[s], wgmma::descriptor(weights + 256u * s, n_stride));
  }
  wgmma::commit();
  wgmma::wait_all();
#pragma unroll
  for (int i = 0; i < kN / 2; ++i) wgmma::pin(acc[i]);
}

// Any activation but none and ReLU, value by value in a loop laid out away from the common path.
template <int kCount>
__device__ __forceinline__ void activate_general(const DeviceEpilogue& epilogue,
                                                 float (&acc)[kCount]) {
  float values[kCount];
#pragma unroll
  for (int i = 0; i < kCount; ++i) values[i] = acc[i];
#pragma unroll 1
  for (int i = 0; i < kCount; ++i) values[i] = apply_epilogue(epilogue, values[i]);
#pragma unroll
  for (int i = 0; i < kCount; ++i) acc[i] = values[i];
}

// The next layer's A fragments: accumulator tiles 2s and 2s + 1 are k-step s; zeros past N (the
// next layer multiplies them by zero weights, and stale registers could hold NaN).
template <TensorCoreMath kMath, int kSteps, int kN, bool kRelu>
__device__ __forceinline__ void pack_next(const float (&acc)[kN / 2], Operands<kSteps>& next) {
#pragma unroll
  for (int j = 0; j < kN / 8; ++j) {
    next[j / 2][(j % 2) * 2] = pack<kMath, kRelu>(acc[4 * j], acc[4 * j + 1]);
    next[j / 2][(j % 2) * 2 + 1] = pack<kMath, kRelu>(acc[4 * j + 2], acc[4 * j + 3]);
  }
#pragma unroll
  for (int s = kN / 16; s < kSteps; ++s) {
#pragma unroll
    for (int i = 0; i < 4; ++i) next[s][i] = 0u;
  }
}

// Rows row_lo and row_lo + 8 of the output (those below `valid`, counted from the warp's first
// row), columns 8j + 2t and 8j + 2t + 1: float32, or the math's 16-bit type narrowed to nearest
// even (p.output_type; another 16-bit type is narrowed by the context after a float32 run).
template <TensorCoreMath kMath, OutputStore kStore, int kN>
__device__ __forceinline__ void store_output(const WarpgroupParams& p, int out, int64_t row_lo,
                                             int64_t valid, int g, int t, bool relu,
                                             float (&acc)[kN / 2]) {
  const bool wide = kStore == OutputStore::Either
                        ? p.output_type == static_cast<int32_t>(ElementType::Float32)
                        : kStore == OutputStore::Float32;
#pragma unroll
  for (int j = 0; j < kN / 8; ++j) {
    const int col = 8 * j + 2 * t;
    if (col >= out) break;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      if (g + 8 * h >= valid) continue;
      float v0 = acc[4 * j + 2 * h], v1 = acc[4 * j + 2 * h + 1];
      if (relu) v0 = relu_keeping_nan(v0), v1 = relu_keeping_nan(v1);
      const int64_t offset = (row_lo + 8 * h) * out + col;
      if (wide) {
        float* destination = static_cast<float*>(p.y) + offset;
        if (p.vector_output) {
          *reinterpret_cast<float2*>(destination) = make_float2(v0, v1);
        } else {
          destination[0] = v0;
          if (col + 1 < out) destination[1] = v1;
        }
      } else {
        uint16_t* destination = static_cast<uint16_t*>(p.y) + offset;
        const uint32_t bits = pack<kMath, false>(v0, v1);  // round to nearest even
        if (p.vector_output) {
          *reinterpret_cast<uint32_t*>(destination) = bits;
        } else {
          destination[0] = static_cast<uint16_t>(bits);
          if (col + 1 < out) destination[1] = static_cast<uint16_t>(bits >> 16);
        }
      }
    }
  }
}

// kTail: the kernel folds a Softmax or LayerNorm after a last layer of at most
// kWarpgroupMaxTailColumns (a kernel of its own: the row statistics' code made ptxas spill
// registers of the width-128 kernel, which every chain without a tail would have paid for).

// Accumulators starting from the layer's bias: columns 8j + 2t and 8j + 2t + 1 of rows g and
// g + 8.
template <int kN>
__device__ __forceinline__ void start_from_bias(const WarpgroupMlpLayer& layer, const char* smem,
                                                int t, float (&acc)[kN / 2]) {
  const float2* bias = reinterpret_cast<const float2*>(smem + layer.bias_offset) + t;
#pragma unroll
  for (int j = 0; j < kN / 8; ++j) {
    const float2 b = bias[4 * j];
    acc[4 * j] = b.x, acc[4 * j + 1] = b.y, acc[4 * j + 2] = b.x, acc[4 * j + 3] = b.y;
  }
}

template <TensorCoreMath kMath, int kSteps, int kN, bool kTail, int kActive = kSteps,
          OutputStore kStore = OutputStore::Either>
__device__ __forceinline__ void run_layer(const WarpgroupParams& p, const WarpgroupMlpLayer& layer,
                                          bool last, const char* smem, uint32_t shared_base,
                                          int64_t row_lo, int64_t valid, int g, int t,
                                          Operands<kSteps>& a, Operands<kSteps>& next) {
  float acc[kN / 2];
  start_from_bias<kN>(layer, smem, t, acc);
  multiply<kMath, kSteps, kN, kActive>(layer, shared_base, a, acc);
  const bool relu = layer.epilogue.count == 1 && layer.epilogue.kind[0] == kOpReLU;
  if (__builtin_expect(layer.epilogue.count != 0 && !relu, 0)) {
    activate_general(layer.epilogue, acc);
  }
  if (kTail && kN <= kWarpgroupMaxTailColumns && last) {
    // The folded Softmax or LayerNorm (the planner folds after none or ReLU only).
    float(&tiles)[kN / 8][4] = *reinterpret_cast<float(*)[kN / 8][4]>(&acc[0]);
    const float* gamma = reinterpret_cast<const float*>(smem + p.gamma_offset);
    const float* beta = reinterpret_cast<const float*>(smem + p.beta_offset);
    normalize_rows(tiles, (layer.out + 7) / 8, layer.out, t, nullptr, relu,
                   p.tail_kind == static_cast<int32_t>(RowTailKind::Softmax), p.tail_eps,
                   p.gamma_offset != 0 ? gamma : nullptr, p.beta_offset != 0 ? beta : nullptr);
    store_output<kMath, kStore, kN>(p, layer.out, row_lo, valid, g, t, false, acc);
  } else if (last) {
    store_output<kMath, kStore, kN>(p, layer.out, row_lo, valid, g, t, relu, acc);
  } else if (relu) {
    pack_next<kMath, kSteps, kN, true>(acc, next);
  } else {
    pack_next<kMath, kSteps, kN, false>(acc, next);
  }
}

// Layer l from `a` into `next`, its N chosen at run time; the caller says whether it is the last.
template <TensorCoreMath kMath, int kSteps, bool kTail, int kActive = kSteps,
          OutputStore kStore = OutputStore::Either>
__device__ __forceinline__ void run_layer_at(const WarpgroupParams& p, int l, bool last,
                                             const char* smem, uint32_t shared_base, int64_t row_lo,
                                             int64_t valid, int g, int t, Operands<kSteps>& a,
                                             Operands<kSteps>& next) {
  const WarpgroupMlpLayer& layer = p.layers[l];
#define FDNN_RUN_LAYER(n)                                                                        \
  run_layer<kMath, kSteps, n, kTail, kActive, kStore>(p, layer, last, smem, shared_base, row_lo, \
                                                      valid, g, t, a, next)
  switch (layer.n) {
    case 16: FDNN_RUN_LAYER(16); break;
    case 32: FDNN_RUN_LAYER(32); break;
    case 64: FDNN_RUN_LAYER(64); break;
    default:
      if constexpr (kSteps * 16 >= 128) FDNN_RUN_LAYER(128);
      break;
  }
#undef FDNN_RUN_LAYER
}

// A hidden layer of a uniform chain (WarpgroupMlpPlan::uniform_hidden): N is the width class and
// the activation ReLU, both known here, so no switch, test or branch sits between the layers.
template <TensorCoreMath kMath, int kSteps, int kActive>
__device__ __forceinline__ void run_hidden_layer(const WarpgroupMlpLayer& layer, const char* smem,
                                                 uint32_t shared_base, int t, Operands<kSteps>& a,
                                                 Operands<kSteps>& next) {
  constexpr int kN = kSteps * 16;
  float acc[kN / 2];
  start_from_bias<kN>(layer, smem, t, acc);
  multiply<kMath, kSteps, kN, kActive>(layer, shared_base, a, acc);
  pack_next<kMath, kSteps, kN, true>(acc, next);
}

// Layers kLayer on, unrolled: each layer's fields are constant-bank operands at fixed offsets
// rather than loads at a run-time index. `a` holds layer kLayer's input. Width 64 only: at width
// 128 the unrolled code grows past the registers and spills, which costs more than it saves.
// The first layer multiplies only the k-steps its input fills where that is half of them (the
// 64-wide MLP's 32 inputs: 2 of 4).
template <TensorCoreMath kMath, int kSteps, bool kTail, int kLayer>
__device__ __forceinline__ void run_layers(const WarpgroupParams& p, const char* smem,
                                           uint32_t shared_base, int64_t row_lo, int64_t valid,
                                           int g, int t, Operands<kSteps>& a, Operands<kSteps>& b,
                                           [[maybe_unused]] int warpgroup,
                                           [[maybe_unused]] int local_tile) {
  if constexpr (kLayer < kFusedMlpMaxLayers) {
    const bool last = kLayer + 1 == p.layer_count;
    if (kLayer == 0 && p.input_steps <= kSteps / 2) {
      run_layer_at<kMath, kSteps, kTail, kSteps / 2>(p, kLayer, last, smem, shared_base, row_lo,
                                                     valid, g, t, a, b);
    } else {
      run_layer_at<kMath, kSteps, kTail>(p, kLayer, last, smem, shared_base, row_lo, valid, g, t, a,
                                         b);
    }
    if (threadIdx.x % 128 == 0) FDNN_TILE_STAMP(warpgroup, local_tile, 4 + kLayer);
    if (last) return;
    run_layers<kMath, kSteps, kTail, kLayer + 1>(p, smem, shared_base, row_lo, valid, g, t, b, a,
                                                 warpgroup, local_tile);
  }
}

// A uniform chain of kCount layers (WarpgroupMlpPlan::uniform_hidden) from layer kLayer on:
// straight-line hidden layers, then the last with the switch on its N. No test or branch between
// the hidden layers (in the general chain each layer tested its N and whether it was the last).
template <TensorCoreMath kMath, int kSteps, int kCount, int kLayer, OutputStore kStore>
__device__ __forceinline__ void run_uniform_layers(const WarpgroupParams& p, const char* smem,
                                                   uint32_t shared_base, int64_t row_lo,
                                                   int64_t valid, int g, int t, Operands<kSteps>& a,
                                                   Operands<kSteps>& b,
                                                   [[maybe_unused]] int warpgroup,
                                                   [[maybe_unused]] int local_tile) {
  if constexpr (kLayer + 1 < kCount) {
    if (kLayer == 0 && p.input_steps <= kSteps / 2) {
      run_hidden_layer<kMath, kSteps, kSteps / 2>(p.layers[kLayer], smem, shared_base, t, a, b);
    } else {
      run_hidden_layer<kMath, kSteps, kSteps>(p.layers[kLayer], smem, shared_base, t, a, b);
    }
    if (threadIdx.x % 128 == 0) FDNN_TILE_STAMP(warpgroup, local_tile, 4 + kLayer);
    run_uniform_layers<kMath, kSteps, kCount, kLayer + 1, kStore>(
        p, smem, shared_base, row_lo, valid, g, t, b, a, warpgroup, local_tile);
  } else {
    run_layer_at<kMath, kSteps, false, kSteps, kStore>(p, kLayer, true, smem, shared_base, row_lo,
                                                       valid, g, t, a, b);
    if (threadIdx.x % 128 == 0) FDNN_TILE_STAMP(warpgroup, local_tile, 4 + kLayer);
  }
}

#endif  // __CUDA_ARCH_FEAT_SM90_ALL

// kUniformLayers: 0 for any chain; 2 to kFusedMlpMaxLayers for a uniform chain of that many layers
// (WarpgroupMlpPlan::uniform_hidden), whose code is its straight-line chain alone. A kernel for
// all uniform counts would choose the count's code per tile, and the jump's compares and the
// instruction fetches after it are a visible share of the stalls; a kernel per count avoids them.
template <TensorCoreMath kMath, int kWidth, bool kTail, int kUniformLayers,
          OutputStore kStore = OutputStore::Either>
__global__ void __launch_bounds__(max_warpgroups(kWidth) * 128, 1)
    warpgroup_mlp_kernel(const __grid_constant__ WarpgroupParams p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int kSteps = kWidth / 16;
  constexpr int kRows = kWarpgroupTileRows;
  extern __shared__ __align__(128) uint4 shared_memory[];
  const int warpgroups = static_cast<int>(blockDim.x) / 128;
  const int warpgroup = static_cast<int>(threadIdx.x) / 128;
  const int warp = (static_cast<int>(threadIdx.x) / 32) % 4, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;
  const char* const smem = reinterpret_cast<const char*>(shared_memory);
  const uint32_t shared_base = shared_address(shared_memory);
  const int width = p.input_width;
  const uint32_t stage_bytes = p.stage_bytes;
  FDNN_BLOCK_STAMP(0);

  // Launched as a dependent kernel (launch_dependent_kernel), a block may start while the kernel
  // before it on the stream finishes: until wait_for_previous_grid() it stages only the weights
  // and sets up its mbarriers. Then the input copies go out before the weights have landed.
  for (uint32_t i = threadIdx.x; i < p.image_chunks; i += blockDim.x) {
    __pipeline_memcpy_async(shared_memory + i, p.image + i, 16);
  }
  __pipeline_commit();
  // One thread sets up every stage's mbarrier, as the other kernels do. With one a thread, ptxas
  // loops a uniform init over the warp's addresses, and racecheck reads the address register of
  // the lanes that skip it as a write: when that register holds the shared base, racecheck
  // reports WAW hazards against image chunk 0's copy, a write never made.
  if (threadIdx.x == 0) {
#pragma unroll 1
    for (int i = 0; i < warpgroups * p.stages; ++i) {
      init_single_arrival(shared_base + p.barrier_offset + 8u * static_cast<uint32_t>(i));
    }
    publish_mbarrier_init();
  }
  __syncthreads();  // the issuers see the mbarriers set up
  wait_for_previous_grid();
  // The next kernel's blocks find no room on an SM before this block leaves (its shared memory
  // and registers), so they may start launching now.
  allow_next_grid();

  // Tiles warpgroup-major over the grid: a round of grid_step tiles gives every block's first
  // warpgroup one before any block's second, so the last, partial round spreads over all the SMs
  // instead of filling the first blocks (the seed MLP at batch 262144 has 4096 tiles for 396
  // warpgroups, so block-major rounds would leave its last round on a third of the SMs). The
  // tail kernels keep block-major rounds, which suit them better.
  const int64_t grid_step = int64_t{gridDim.x} * warpgroups;
  const int64_t first_tile = kTail ? int64_t{blockIdx.x} * warpgroups + warpgroup
                                   : int64_t{warpgroup} * gridDim.x + blockIdx.x;
  const int ring_first = warpgroup * p.stages;
  const uint32_t ring =
      shared_base + p.stage_offset + static_cast<uint32_t>(ring_first) * stage_bytes;
  const uint32_t barriers = shared_base + p.barrier_offset + 8u * static_cast<uint32_t>(ring_first);
  const bool issuer = threadIdx.x % 128 == 0;
  // The issuer's next copy: its tile and where its rows start. At width 64 both advance by a
  // constant per tile (computed afresh each time, the copy's ~45 dependent instructions held the
  // warpgroup's first products back); width 128 computes them afresh (two more registers made
  // the kernel with a folded row op spill more).
  constexpr bool kRunningCopy = kSteps <= 4;
  const auto row_bytes = static_cast<uint32_t>(width * p.input_bytes);
  // This warp's 16 rows in a stage buffer, in bytes.
  const uint32_t warp_rows = static_cast<uint32_t>(warp * 16) * row_bytes;
  const int64_t copy_stride = grid_step * kRows * row_bytes;  // bytes between a warpgroup's tiles
  int64_t copy_tile = first_tile;
  const char* copy_source = p.x + first_tile * kRows * row_bytes;
  if (issuer) {
    for (int s = 0; s < p.stages; ++s) {
      if (copy_tile < p.tiles) {
        stage_tile(p, copy_tile, copy_source, ring + s * stage_bytes, barriers + 8u * s);
      }
      copy_tile += grid_step, copy_source += copy_stride;
      FDNN_TILE_STAMP(warpgroup, s, 0);
    }
  }
  __pipeline_wait_prior(0);
  // The weights arrived through the generic proxy and wgmma reads them through the async one.
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();
  FDNN_BLOCK_STAMP(1);
  int stage = 0;
  uint32_t parity = 0;
  [[maybe_unused]] int local_tile = 0;  // the timeline probe's count
  for (int64_t tile = first_tile; tile < p.tiles; tile += grid_step) {
    wait_for_parity(barriers + 8u * stage, parity);
    if (issuer) FDNN_TILE_STAMP(warpgroup, local_tile, 1);
    const uint32_t rows = ring + static_cast<uint32_t>(stage) * stage_bytes + warp_rows;
    Operands<kSteps> a, b;
    // The caller's element type: one branch per tile.
    with_element_type(p.input_type, [&](auto element) {
      load_input<kMath, kSteps, decltype(element)>(rows, width, p.input_steps,
                                                   p.interleaved_columns != 0, g, t, a);
    });
    warpgroup_barrier(warpgroup);  // every thread has read the stage
    if (issuer) {
      if constexpr (!kRunningCopy) {
        copy_tile = tile + int64_t{p.stages} * grid_step;
        copy_source = p.x + copy_tile * kRows * int64_t{width} * p.input_bytes;
      }
      if (copy_tile < p.tiles) {
        stage_tile(p, copy_tile, copy_source, ring + stage * stage_bytes, barriers + 8u * stage);
      }
      if constexpr (kRunningCopy) copy_tile += grid_step, copy_source += copy_stride;
      FDNN_TILE_STAMP(warpgroup, local_tile + p.stages, 0);
      FDNN_TILE_STAMP(warpgroup, local_tile, 2);
    }
    if (++stage == p.stages) stage = 0, parity ^= 1u;
    const int64_t warp_row = tile * kRows + warp * 16;
    const int64_t row_lo = warp_row + g;
    const int64_t valid = p.rows - warp_row;
    if constexpr (kUniformLayers > 0) {
      run_uniform_layers<kMath, kSteps, kUniformLayers, 0, kStore>(
          p, smem, shared_base, row_lo, valid, g, t, a, b, warpgroup, local_tile);
    } else if constexpr (kSteps <= 4) {
      run_layers<kMath, kSteps, kTail, 0>(p, smem, shared_base, row_lo, valid, g, t, a, b,
                                          warpgroup, local_tile);
    }
    // Width 128: two layers per trip, each writing the other's operands: no copy between layers.
    for (int l = 0; kSteps > 4 && l < p.layer_count; l += 2) {
      const bool last = l + 1 == p.layer_count;
      run_layer_at<kMath, kSteps, kTail>(p, l, last, smem, shared_base, row_lo, valid, g, t, a, b);
      if (issuer) FDNN_TILE_STAMP(warpgroup, local_tile, 4 + l);
      if (last) break;
      const bool next_last = l + 2 == p.layer_count;
      run_layer_at<kMath, kSteps, kTail>(p, l + 1, next_last, smem, shared_base, row_lo, valid, g,
                                         t, b, a);
      if (issuer) FDNN_TILE_STAMP(warpgroup, local_tile, 5 + l);
      if (next_last) break;
    }
    if (issuer) FDNN_TILE_STAMP(warpgroup, local_tile, 3);
    ++local_tile;
  }
#else
  (void)p;
#endif
}

using KernelFunction = void (*)(WarpgroupParams);

// The uniform kernel of `layers` layers or a later count's (the uniform kernels exist at width 64
// without a tail: lay_out_warpgroup_mlp() sets uniform_hidden only there), storing float32 or,
// with math16_output, the math's 16-bit type.
template <TensorCoreMath kMath, int kLayers = 2>
KernelFunction uniform_kernel(int layers, bool math16_output) {
  if constexpr (kLayers < kFusedMlpMaxLayers) {
    if (layers != kLayers) return uniform_kernel<kMath, kLayers + 1>(layers, math16_output);
  }
  return math16_output ? warpgroup_mlp_kernel<kMath, 64, false, kLayers, OutputStore::Math16>
                       : warpgroup_mlp_kernel<kMath, 64, false, kLayers, OutputStore::Float32>;
}

template <TensorCoreMath kMath, bool kTail>
KernelFunction kernel_for_width(const WarpgroupMlpPlan& plan, bool math16_output) {
  if (plan.width_class > 64) return warpgroup_mlp_kernel<kMath, 128, kTail, 0>;
  if constexpr (!kTail) {
    if (plan.uniform_hidden) return uniform_kernel<kMath>(plan.layer_count, math16_output);
  }
  return warpgroup_mlp_kernel<kMath, 64, kTail, 0>;
}

// The kernel for the plan storing float32 or (math16_output) the math's 16-bit type; the general
// kernels store either, as the run's parameters say.
KernelFunction kernel_for(const WarpgroupMlpPlan& plan, bool math16_output) {
  const bool tail = plan.tail.kind != RowTailKind::None;
  if (plan.math == TensorCoreMath::Fp16) {
    return tail ? kernel_for_width<TensorCoreMath::Fp16, true>(plan, math16_output)
                : kernel_for_width<TensorCoreMath::Fp16, false>(plan, math16_output);
  }
  return tail ? kernel_for_width<TensorCoreMath::Bf16, true>(plan, math16_output)
              : kernel_for_width<TensorCoreMath::Bf16, false>(plan, math16_output);
}

}  // namespace

bool plan_warpgroup_mlp(const std::vector<FusedMlpLayerDesc>& layers, TensorCoreMath math,
                        const DeviceInfo& device, const TensorCoreRowTail& tail,
                        WarpgroupMlpPlan* plan) {
#if defined(FUSEDNN_WGMMA_BUILT)
  // sm_90a code runs on compute capability 9.0 alone.
  if (device.overrides.warpgroup == Forced::Off || device.major != 9 || device.minor != 0)
    return false;
  WarpgroupMlpPlan result;
  if (!lay_out_warpgroup_mlp(layers, math, tail, 1, 1, &result)) return false;
  // The most warpgroups whose input buffers fit, three stages each where they fit, else two.
  bool fits = false;
  for (int warpgroups = max_warpgroups(result.width_class); warpgroups >= 1 && !fits;
       --warpgroups) {
    for (int stages = 3; stages >= 2 && !fits; --stages) {
      lay_out_warpgroup_mlp(layers, math, tail, warpgroups, stages, &result);
      fits = result.shared_bytes <= device.shared_per_block_optin;
    }
  }
  if (!fits) return false;
  // The limit is the kernel's, shared by every chain that runs it in this process: the device's
  // (a chain's own size would refuse the larger chains planned before it). Both kernels of a
  // uniform chain (float32 and 16-bit output) get it.
  for (const bool math16_output : {false, true}) {
    const KernelFunction kernel = kernel_for(result, math16_output);
    int blocks = 0;
    if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(device.shared_per_block_optin)) != cudaSuccess ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, 128 * result.warpgroups,
                                                      result.shared_bytes) != cudaSuccess ||
        blocks < 1) {
      (void)cudaGetLastError();  // not sticky: the WarpRegisters form runs instead
      return false;
    }
  }
  // From 512 rows: from there on it beats WarpRegisters at every batch.
  result.min_rows = device.overrides.warpgroup == Forced::On ? 0 : kWarpgroupMinRows;
  *plan = result;
  return true;
#else
  (void)layers, (void)math, (void)device, (void)tail, (void)plan;
  return false;
#endif
}

bool warpgroup_mlp_writes(const WarpgroupMlpPlan& plan, ElementType output) {
  return output == ElementType::Float32 ||
         output ==
             (plan.math == TensorCoreMath::Fp16 ? ElementType::Float16 : ElementType::Bfloat16);
}

bool warpgroup_mlp_takes(const WarpgroupMlpPlan& plan, const void* x, int64_t rows) {
  return plan.layer_count > 0 && rows >= plan.min_rows && reinterpret_cast<uintptr_t>(x) % 16 == 0;
}

void launch_warpgroup_mlp(const WarpgroupMlpPlan& plan, const void* image, TypedInput x,
                          TypedOutput y, int64_t rows, const DeviceInfo& device,
                          cudaStream_t stream) {
  if (rows <= 0) return;
  WarpgroupParams p{};
  p.x = static_cast<const char*>(x.data);
  p.y = y.data;
  p.input_type = static_cast<int32_t>(x.type);
  p.output_type = static_cast<int32_t>(y.type);
  p.input_bytes = element_bytes(x.type);
  p.image = static_cast<const uint4*>(image);
  p.rows = rows;
  p.tiles = (rows + kWarpgroupTileRows - 1) / kWarpgroupTileRows;
  p.layer_count = plan.layer_count;
  p.input_width = plan.layers[0].in;
  p.stage_bytes = plan.stage_bytes;
  p.tile_bytes = static_cast<uint32_t>(kWarpgroupTileRows * plan.layers[0].in * p.input_bytes);
  // The input's rows are a multiple of 4 columns (the plan's condition): 16 bytes as float32, 8
  // as 16-bit elements.
  const auto last_bytes = static_cast<uint32_t>((rows - (p.tiles - 1) * kWarpgroupTileRows) *
                                                plan.layers[0].in * p.input_bytes);
  p.last_tile_bytes = last_bytes / 16 * 16;
  p.last_tile_rest = last_bytes % 16;
  p.input_steps = plan.input_steps;
  p.interleaved_columns = plan.interleaved_columns ? 1 : 0;
  p.stages = plan.stages;
  p.vector_output = plan.layers[plan.layer_count - 1].out % 2 == 0 &&
                    reinterpret_cast<uintptr_t>(y.data) % 16 == 0;
  p.image_chunks = plan.image_bytes / 16;
  p.stage_offset = plan.stage_offset;
  p.barrier_offset = plan.barrier_offset;
  p.tail_kind = static_cast<int32_t>(plan.tail.kind);
  p.tail_eps = plan.tail.eps;
  p.gamma_offset = plan.gamma_offset;
  p.beta_offset = plan.beta_offset;
  for (int l = 0; l < plan.layer_count; ++l) p.layers[l] = plan.layers[l];
  const int64_t blocks = (p.tiles + plan.warpgroups - 1) / plan.warpgroups;
  const unsigned grid = static_cast<unsigned>(std::min<int64_t>(blocks, device.sm_count));
  if (!warpgroup_mlp_writes(plan, y.type)) {
    fail(FDNN_STATUS_INTERNAL_ERROR,
         "the Warpgroup MLP writes float32 or its math's 16-bit type "
         "only; the backend must narrow other output types after it");
  }
  launch_dependent_kernel(kernel_for(plan, y.type != ElementType::Float32), "warpgroup_mlp_kernel",
                          dim3(grid), dim3(128 * plan.warpgroups), plan.shared_bytes, stream, p);
}

}  // namespace fusednn::cuda
