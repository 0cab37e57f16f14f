// SPDX-License-Identifier: Apache-2.0
// The WarpRegisters tensor-core MLP kernel (design, napkin math and fragment bookkeeping in
// fused_mlp_tensor_core_registers.cu), as a template that fused_mlp_tensor_core_registers_*.cu
// instantiate, one file per TensorCoreMath: the instantiations take ptxas minutes each, and one
// file per precision lets a parallel build compile them side by side.
#pragma once

#include <cuda_pipeline.h>

#include "backends/cuda/device/element_type.cuh"
#include "backends/cuda/device/epilogue.cuh"
#include "backends/cuda/device/row_tail.cuh"
#include "backends/cuda/mlp/tensor_core_mma.cuh"

namespace fusednn::cuda::warp_registers {

constexpr int kRowsPerWarp = kWarpRegisterTileRows;
constexpr int kTileGroup = 4;     // 8-column tiles multiplied together, loads in flight at once
constexpr int kStepsPerLoad = 2;  // k-steps of weights per 16-byte shared-memory load

struct RegisterParams {
  const void* x;  // input_type elements
  void* y;        // output_type elements
  const uint4* image;
  int64_t rows;
  int64_t tiles;  // of kRowsPerWarp rows
  int32_t layer_count;
  int32_t input_width;
  int32_t stage_stride;  // floats per staged input row: input_width rounded up to 4
  int32_t input_type;    // ElementType of x
  int32_t output_type;   // ElementType of y
  // float32 x: rows are whole, 16-byte aligned chunks, copied 16 bytes at a time. 16-bit x: x on
  // 16 bytes, so each tile's rows (a multiple of 32 bytes apart) start on 16 bytes.
  int32_t vector_copy;
  int32_t vector_input;   // unstaged kernels: rows start on 4 columns' (half forms) or 2's bytes
  int32_t vector_output;  // rows start on 2 elements' bytes
  uint32_t image_chunks;  // 16-byte chunks
  uint32_t stage_offset;  // bytes into shared memory of warp 0's input buffer
  int32_t tail_kind;      // RowTailKind
  float tail_eps;
  uint32_t gamma_offset;  // bytes into shared memory; 0: none (the image starts with weights)
  uint32_t beta_offset;
  TensorCoreMlpLayer layers[kFusedMlpMaxLayers];
};

__host__ __device__ constexpr int step_elements(TensorCoreMath math) {
  return is_half(math) ? 16 : 8;
}

// Block shape per kernel: as many warps as the registers ptxas needs allow (~125 for the half
// forms at width 64, ~170 for the half forms at 128 and the tf32 forms at 64, 255 for the rest).
// More warps per SM hide more of each warp's latency. Two blocks per SM where the weights of
// most chains leave room for two; where they often do not (the tf32 forms at 128, where one
// 128 x 128 layer takes 74 KB; the half forms at 256, 147 KB for a 256 x 256 layer), one block
// of 8 warps, which is never fewer warps per SM than two of 4 and twice one of 4.
__host__ __device__ constexpr int blocks_per_sm(TensorCoreMath math, int width_class) {
  return width_class > (is_half(math) ? 128 : 64) ? 1 : 2;
}
__host__ __device__ constexpr int warps_per_block(TensorCoreMath math, int width_class) {
  return blocks_per_sm(math, width_class) == 1 ? 8 : is_half(math) && width_class <= 64 ? 8 : 6;
}

// Whether the kernel stages each warp's next input rows in shared memory (cp.async, arriving
// while the warp computes). Not where the weights are large (the tf32 forms at width 128, the
// half forms at 256): two blocks' weights and buffers would not fit an SM; those read their
// input from global memory.
__host__ __device__ constexpr bool stages_input(TensorCoreMath math, int width_class) {
  return is_half(math) ? width_class <= 128 : width_class <= 64;
}

// Whether weight rows span the width class (zeros past each layer's input), so that the k loop
// has a fixed trip count and no branch per k-step: the half forms up to width 128. Elsewhere the
// padding would cost too much shared memory (the tf32 forms' words are twice as wide; at width
// 256, chains that fit with rows as wide as each layer's input would not), and the loop stops
// after the layer's k-steps.
__host__ __device__ constexpr bool full_width_rows(TensorCoreMath math, int width_class) {
  return is_half(math) && width_class <= 128;
}

// kSplit (Tf32x3 only, TensorCoreMlpPlan::split_weights): the weights come split at load into
// their tf32 big parts and fp32 rests, so the kernel splits only the activations. A thread's 16
// bytes of a k-step hold its two big words, then their two rests: twice the shared memory, so
// the plan takes it where that costs no resident block.

// The widest last layer a folded Softmax or LayerNorm takes: its whole row in registers at once
// (with 256 columns, ptxas spilled 5 KB).
constexpr int kMaxTailColumns = 128;

// A warp's operand fragments for one layer are uint32_t[kSteps][4]: [k-step][register]. The type
// is spelled out where used: CUDA 11.8's device front end (the Jetson builds) crashes on an alias
// template of an array type whose bound is the template parameter.

// What an operand register holds between layers: half pairs, tf32 bits (Tf32, rounded once
// here rather than at every use) or fp32 bits (Tf32x3 splits them at use).
template <TensorCoreMath kMath>
__device__ __forceinline__ uint32_t operand_bits(float value) {
  if constexpr (kMath == TensorCoreMath::Tf32) return to_tf32(value);
  return __float_as_uint(value);
}

// An input element widened: float32, float16 and bfloat16 as they are typed, or 16-bit bits
// (uint16_t) of bfloat16 where `bfloat16`, else of float16.
template <typename T>
__device__ __forceinline__ float widen_input(T value, bool) {
  return widen_element(value);
}
__device__ __forceinline__ float widen_input(uint16_t bits, bool bfloat16) {
  return bfloat16 ? __uint_as_float(uint32_t{bits} << 16) : __half2float(__ushort_as_half(bits));
}

// Copies the input rows of warp tile `tile` into the warp's shared-memory buffer by cp.async,
// so that they arrive while the warp computes the tile before. float32 rows: 16 bytes a lane at a
// time where the rows allow, else one float at a time into rows padded to 4 floats (the padding
// zeroed). 16-bit rows (T) lie as they do in memory, `width` elements apart: 16-byte copies of
// the tile's whole chunks where x is on 16 bytes, the rest (or, elsewhere, everything) by plain
// loads and stores, which the caller's __syncwarp publishes. The caller commits and waits.
template <typename T>
__device__ __forceinline__ void stage_input(const RegisterParams& p, int64_t tile, void* stage,
                                            int lane) {
  const int64_t first = tile * kRowsPerWarp;
  const int count = static_cast<int>(p.rows - first < kRowsPerWarp ? p.rows - first : kRowsPerWarp);
  const int width = p.input_width;
  const T* source = static_cast<const T*>(p.x) + first * width;
  T* staged = static_cast<T*>(stage);
  if constexpr (sizeof(T) == 2) {
    const int elements = count * width;
    const int chunks = p.vector_copy ? elements / 8 : 0;
    for (int i = lane; i < chunks; i += 32) {
      __pipeline_memcpy_async(staged + 8 * i, source + 8 * i, 16);
    }
    for (int i = 8 * chunks + lane; i < elements; i += 32) staged[i] = source[i];
    return;
  }
  if (p.vector_copy) {
    const int chunks = count * width / 4;
    for (int i = lane; i < chunks; i += 32) {
      __pipeline_memcpy_async(staged + 4 * i, source + 4 * i, 16);
    }
    return;
  }
  const int stride = p.stage_stride;
  for (int i = lane; i < count * stride; i += 32) {
    const int row = i / stride, column = i - row * stride;
    if (column < width) {
      __pipeline_memcpy_async(staged + i, source + row * width + column, 4);
    } else {
      staged[i] = T{};
    }
  }
}

// The first layer's operand fragments from the warp's input rows (rows[r * stride + c] is
// column c of the tile's row r: the staged copy, or the rows in global memory), zeros past the
// batch (`valid_rows`) and past `width`. kVector: width % kColumns == 0 and the rows aligned for
// one load per thread and k-step. T: the rows' element type, widened exactly as it is read.
template <TensorCoreMath kMath, int kSteps, bool kVector, typename T>
__device__ __forceinline__ void load_input(const T* rows, int stride, int width, int64_t valid_rows,
                                           int g, int t, uint32_t (&act)[kSteps][4],
                                           bool bfloat16 = false) {
  constexpr int kColumns = is_half(kMath) ? 4 : 2;  // consecutive columns per thread and step
  float v[kSteps][2][kColumns];
#pragma unroll
  for (int s = 0; s < kSteps; ++s) {
    const int column = s * step_elements(kMath) + kColumns * t;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = g + 8 * h;
      const T* source = rows + row * stride + column;
#pragma unroll
      for (int c = 0; c < kColumns; ++c) v[s][h][c] = 0.0f;
      if constexpr (!kVector) {
#pragma unroll
        for (int c = 0; c < kColumns; ++c) {
          if (row < valid_rows && column + c < width) v[s][h][c] = widen_input(source[c], bfloat16);
        }
      } else if (row < valid_rows && column < width) {
        const ElementPack<T, kColumns> pack =
            *reinterpret_cast<const ElementPack<T, kColumns>*>(source);
#pragma unroll
        for (int c = 0; c < kColumns; ++c) v[s][h][c] = widen_input(pack.values[c], bfloat16);
      }
    }
  }
#pragma unroll
  for (int s = 0; s < kSteps; ++s) {
    if constexpr (is_half(kMath)) {
      act[s][0] = pack_pair<kMath>(v[s][0][0], v[s][0][1]);
      act[s][1] = pack_pair<kMath>(v[s][1][0], v[s][1][1]);
      act[s][2] = pack_pair<kMath>(v[s][0][2], v[s][0][3]);
      act[s][3] = pack_pair<kMath>(v[s][1][2], v[s][1][3]);
    } else {
      act[s][0] = operand_bits<kMath>(v[s][0][0]);
      act[s][1] = operand_bits<kMath>(v[s][1][0]);
      act[s][2] = operand_bits<kMath>(v[s][0][1]);
      act[s][3] = operand_bits<kMath>(v[s][1][1]);
    }
  }
}

// acc[n0 + j] += act x W^T over the k-steps of the width class for the kTileGroup 8-column
// tiles whose weight rows start at `rows` (this thread's 16-byte column; tile j at
// rows + j * tile_stride). Where full_width_rows(), weight rows are zero past the layer's input
// and operands are finite there, so a fixed trip count costs a few zero products and saves a
// branch per k-step; elsewhere the loop stops after the layer's `pairs` (Tf32x3's split products
// unrolled over the whole width also spilled 3 KB).
template <TensorCoreMath kMath, bool kSplit, int kSteps, int kN>
__device__ __forceinline__ void multiply_group(const uint4* rows, int tile_stride, int pairs,
                                               const uint32_t (&act)[kSteps][4], int n0,
                                               float (&acc)[kN][4]) {
#pragma unroll
  for (int q = 0; q < kSteps / kStepsPerLoad; ++q) {
    if (!full_width_rows(kMath, kSteps * step_elements(kMath)) && q >= pairs) break;
    // A thread's 16 bytes of weights: two k-steps' words, or (kSplit) one k-step's two big
    // words and their two rests.
    uint4 b[kTileGroup];
    if constexpr (!kSplit) {
#pragma unroll
      for (int j = 0; j < kTileGroup; ++j) b[j] = rows[j * tile_stride + 4 * q];
    }
#pragma unroll
    for (int half = 0; half < kStepsPerLoad; ++half) {
      const int k = kStepsPerLoad * q + half;
      if constexpr (kSplit) {
#pragma unroll
        for (int j = 0; j < kTileGroup; ++j) b[j] = rows[j * tile_stride + 4 * k];
      }
      if constexpr (kMath == TensorCoreMath::Tf32x3) {
        uint32_t big[4], small[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) split_tf32(__uint_as_float(act[k][i]), big[i], small[i]);
#pragma unroll
        for (int j = 0; j < kTileGroup; ++j) {
          uint32_t b0, b1, s0, s1;
          if constexpr (kSplit) {
            b0 = b[j].x, b1 = b[j].y, s0 = b[j].z, s1 = b[j].w;
          } else {
            split_tf32(__uint_as_float(half == 0 ? b[j].x : b[j].z), b0, s0);
            split_tf32(__uint_as_float(half == 0 ? b[j].y : b[j].w), b1, s1);
          }
          // Small terms first so that they are not lost below the big product's rounding.
          mma<kMath>(acc[n0 + j], small, b0, b1);
          mma<kMath>(acc[n0 + j], big, s0, s1);
          mma<kMath>(acc[n0 + j], big, b0, b1);
        }
      } else {
#pragma unroll
        for (int j = 0; j < kTileGroup; ++j) {
          // tf32 weights are rounded to tf32 in the image; half weights are stored as halves.
          mma<kMath>(acc[n0 + j], act[k], half == 0 ? b[j].x : b[j].z, half == 0 ? b[j].y : b[j].w);
        }
      }
    }
  }
}

// Columns col, col+1 of rows row_lo and row_lo + 8 (v: row_lo's pair, then row_lo + 8's), in
// the output's element type (narrowed to nearest even). The tf32 forms write float32 only: the
// 16-bit paths cost the 3xTF32 kernels register spills.
template <TensorCoreMath kMath>
__device__ __forceinline__ void store_output(const RegisterParams& p, int out, int64_t row_lo,
                                             int col, const float (&v)[4]) {
  auto store = [&](auto element) {
    using T = decltype(element);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t row = row_lo + 8 * h;
      if (row >= p.rows) continue;
      T* destination = static_cast<T*>(p.y) + row * out + col;
      if (p.vector_output && col + 1 < out) {
        store_pair_narrowed(destination, v[2 * h], v[2 * h + 1]);
      } else {
        if (col < out) destination[0] = narrow_element<T>(v[2 * h]);
        if (col + 1 < out) destination[1] = narrow_element<T>(v[2 * h + 1]);
      }
    }
  };
  if constexpr (is_half(kMath)) {
    with_element_type(p.output_type, store);
  } else {
    store(float{});
  }
}

// The layer's activation on a group's values: none and ReLU inline and without a branch, any
// other epilogue in a loop marked unlikely, so that its formulas are compiled once per group and
// laid out away from the common path (the jumps over them stalled instruction fetch).
__device__ __forceinline__ void activate(const DeviceEpilogue& epilogue,
                                         float (&v)[kTileGroup][4]) {
  const bool relu = epilogue.count == 1 && epilogue.kind[0] == kOpReLU;
#pragma unroll
  for (int j = 0; j < kTileGroup; ++j) {
#pragma unroll
    for (int i = 0; i < 4; ++i) v[j][i] = relu ? relu_keeping_nan(v[j][i]) : v[j][i];
  }
  if (__builtin_expect(epilogue.count == 0 || relu, 1)) return;
  float values[kTileGroup * 4];
#pragma unroll
  for (int i = 0; i < kTileGroup * 4; ++i) values[i] = v[i / 4][i % 4];
#pragma unroll 1
  for (int i = 0; i < kTileGroup * 4; ++i) values[i] = apply_epilogue<true>(epilogue, values[i]);
#pragma unroll
  for (int i = 0; i < kTileGroup * 4; ++i) v[i / 4][i % 4] = values[i];
}

// One layer that is not followed by a folded row op, a group of tiles at a time: multiply into
// accumulators that start from the bias (no zeroing, no bias pass), then the activation, then
// the next layer's operand fragments or, for the last layer, the output rows. Columns past
// `out` come from zero weights and a zero bias (every activation maps 0 to a finite value);
// groups past the layer's tiles leave zero operands for the next layer.
template <TensorCoreMath kMath, bool kSplit, int kSteps>
__device__ __forceinline__ void run_layer(const RegisterParams& p, const TensorCoreMlpLayer& layer,
                                          bool last, const char* smem, int64_t row_lo, int g, int t,
                                          const uint32_t (&act)[kSteps][4],
                                          uint32_t (&next)[kSteps][4]) {
  constexpr int kTiles = kSteps * step_elements(kMath) / 8;
  const uint4* rows = reinterpret_cast<const uint4*>(smem + layer.weight_offset) +
                      g * (layer.weight_stride / 4) + t;
  const int tile_stride = 2 * layer.weight_stride;  // 8 rows, in 16-byte units
  const int pairs = (layer.k_steps + kStepsPerLoad - 1) / kStepsPerLoad;
  const float4* bias = reinterpret_cast<const float4*>(smem + layer.bias_offset) + t;
#pragma unroll
  for (int n0 = 0; n0 < kTiles; n0 += kTileGroup) {
    const bool inside = n0 < layer.n_frags;
    float v[kTileGroup][4] = {};
    if (inside) {
#pragma unroll
      for (int j = 0; j < kTileGroup; ++j) {
        const float4 b = bias[4 * (n0 + j)];
        v[j][0] = b.x, v[j][1] = b.y, v[j][2] = b.z, v[j][3] = b.w;
      }
      multiply_group<kMath, kSplit, kSteps>(rows + n0 * tile_stride, tile_stride, pairs, act, 0, v);
      activate(layer.epilogue, v);
    }
    if (last && inside) {
#pragma unroll
      for (int j = 0; j < kTileGroup; ++j) {
        store_output<kMath>(p, layer.out, row_lo, (n0 + j) * 8 + 2 * t, v[j]);
      }
    }
#pragma unroll
    for (int j = 0; j < kTileGroup; ++j) {
      const int n = n0 + j;
      if constexpr (is_half(kMath)) {
        next[n / 2][(n % 2) * 2] = pack_pair<kMath>(v[j][0], v[j][1]);
        next[n / 2][(n % 2) * 2 + 1] = pack_pair<kMath>(v[j][2], v[j][3]);
      } else {
        next[n][0] = operand_bits<kMath>(v[j][0]);
        next[n][1] = operand_bits<kMath>(v[j][2]);
        next[n][2] = operand_bits<kMath>(v[j][1]);
        next[n][3] = operand_bits<kMath>(v[j][3]);
      }
    }
  }
}

// The last layer (bias, then ReLU or nothing) followed by the folded Softmax or LayerNorm over
// each output row (row_tail.cuh), for rows of at most kMaxTailColumns. An activation after the
// LayerNorm runs as an in-place pass (cuda_backend.cpp): inlining the general epilogue here for
// every value quadrupled this file's compile time.
template <TensorCoreMath kMath, bool kSplit, int kSteps>
__device__ __forceinline__ void run_last_layer_with_row_op(const RegisterParams& p,
                                                           const TensorCoreMlpLayer& layer,
                                                           const char* smem, int64_t row_lo, int g,
                                                           int t,
                                                           const uint32_t (&act)[kSteps][4]) {
  constexpr int kWidth = kSteps * step_elements(kMath);
  constexpr int kTiles = (kWidth < kMaxTailColumns ? kWidth : kMaxTailColumns) / 8;
  const uint4* rows = reinterpret_cast<const uint4*>(smem + layer.weight_offset) +
                      g * (layer.weight_stride / 4) + t;
  const int tile_stride = 2 * layer.weight_stride;
  const int pairs = (layer.k_steps + kStepsPerLoad - 1) / kStepsPerLoad;
  float acc[kTiles][4] = {};
#pragma unroll
  for (int n0 = 0; n0 < kTiles; n0 += kTileGroup) {
    if (n0 >= layer.n_frags) break;
    multiply_group<kMath, kSplit, kSteps>(rows + n0 * tile_stride, tile_stride, pairs, act, n0,
                                          acc);
  }
  const float4* bias = reinterpret_cast<const float4*>(smem + layer.bias_offset) + t;
  const bool relu = layer.epilogue.count == 1;  // the planner folds after none or ReLU only
  const int out = layer.out;
  const bool softmax = p.tail_kind == static_cast<int32_t>(RowTailKind::Softmax);
  const float* gamma = reinterpret_cast<const float*>(smem + p.gamma_offset);
  const float* beta = reinterpret_cast<const float*>(smem + p.beta_offset);
  normalize_rows(acc, layer.out_frags, out, t, bias, relu, softmax, p.tail_eps,
                 p.gamma_offset != 0 ? gamma : nullptr, p.beta_offset != 0 ? beta : nullptr);
#pragma unroll
  for (int n = 0; n < kTiles; ++n) {
    if (n >= layer.out_frags) break;
    store_output<kMath>(p, out, row_lo, n * 8 + 2 * t, acc[n]);
  }
}

// Layer l from `act` into `next`; true when it was the last.
template <TensorCoreMath kMath, bool kSplit, int kSteps>
__device__ __forceinline__ bool run_layer_at(const RegisterParams& p, int l, const char* smem,
                                             int64_t row_lo, int g, int t,
                                             const uint32_t (&act)[kSteps][4],
                                             uint32_t (&next)[kSteps][4]) {
  const TensorCoreMlpLayer& layer = p.layers[l];
  const bool last = l + 1 == p.layer_count;
  if (last && p.tail_kind != static_cast<int32_t>(RowTailKind::None)) {
    run_last_layer_with_row_op<kMath, kSplit, kSteps>(p, layer, smem, row_lo, g, t, act);
  } else {
    run_layer<kMath, kSplit, kSteps>(p, layer, last, smem, row_lo, g, t, act, next);
  }
  return last;
}

template <TensorCoreMath kMath, int kWidth, bool kSplit>
__global__ void __launch_bounds__(warps_per_block(kMath, kWidth) * 32, blocks_per_sm(kMath, kWidth))
    warp_register_mlp_kernel(const __grid_constant__ RegisterParams p) {
  constexpr int kWarpsPerBlock = warps_per_block(kMath, kWidth);
  constexpr int kSteps = kWidth / step_elements(kMath);
  static_assert(kSteps % kStepsPerLoad == 0 && (kWidth / 8) % kTileGroup == 0, "whole groups");
  extern __shared__ uint4 shared_memory[];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int64_t warps = int64_t{gridDim.x} * kWarpsPerBlock;
  int64_t tile = int64_t{blockIdx.x} * kWarpsPerBlock + warp;
  for (uint32_t i = threadIdx.x; i < p.image_chunks; i += kWarpsPerBlock * 32) {
    __pipeline_memcpy_async(shared_memory + i, p.image + i, 16);
  }
  constexpr bool kStaged = stages_input(kMath, kWidth);
  // The buffer holds 16 rows of stage_stride floats: room for 16-bit rows as they lie in memory.
  void* const stage = reinterpret_cast<char*>(shared_memory) + p.stage_offset +
                      size_t{4} * warp * kRowsPerWarp * p.stage_stride;
  if (kStaged && tile < p.tiles) {
    // Bits are bits: 16-bit rows of either type are staged alike.
    if (!is_half(kMath) || p.input_type == static_cast<int32_t>(ElementType::Float32)) {
      stage_input<float>(p, tile, stage, lane);
    } else if constexpr (is_half(kMath)) {
      stage_input<uint16_t>(p, tile, stage, lane);
    }
  }
  __pipeline_commit();
  __pipeline_wait_prior(0);
  __syncthreads();  // the only block barrier: from here on each warp runs on its own

  const char* const smem = reinterpret_cast<const char*>(shared_memory);
  for (; tile < p.tiles; tile += warps) {
    const int64_t first_row = tile * kRowsPerWarp;
    const int64_t row_lo = first_row + g;
    const int64_t valid_rows = p.rows - first_row;
    uint32_t a[kSteps][4], b[kSteps][4];
    // The tile's input, in the caller's element type: one branch per tile. The width-256 kernels
    // take one path for both 16-bit types, told apart at each conversion (a path per type
    // spills more registers there, one path for both spills more in the narrower kernels). The
    // tf32 forms read float32 only.
    const bool bfloat16 = p.input_type == static_cast<int32_t>(ElementType::Bfloat16);
    auto load = [&](auto element) {
      using T = decltype(element);
      if constexpr (kStaged) {
        constexpr bool kWide = sizeof(T) == 4;
        [[maybe_unused]] constexpr int kColumns = is_half(kMath) ? 4 : 2;
        __pipeline_wait_prior(0);
        __syncwarp();  // every lane's copies (and padding zeros or plain stores) have landed
        const T* staged = static_cast<const T*>(stage);
        if constexpr (kWide) {
          load_input<kMath, kSteps, true>(staged, p.stage_stride, p.stage_stride, valid_rows, g, t,
                                          a);
        } else if (p.input_width % kColumns == 0) {
          load_input<kMath, kSteps, true>(staged, p.input_width, p.input_width, valid_rows, g, t, a,
                                          bfloat16);
        } else {
          load_input<kMath, kSteps, false>(staged, p.input_width, p.input_width, valid_rows, g, t,
                                           a, bfloat16);
        }
        __syncwarp();  // every lane has read the buffer before it is refilled
        if (tile + warps < p.tiles) stage_input<T>(p, tile + warps, stage, lane);
        __pipeline_commit();
      } else {
        const T* rows = static_cast<const T*>(p.x) + first_row * p.input_width;
        if (p.vector_input) {
          load_input<kMath, kSteps, true>(rows, p.input_width, p.input_width, valid_rows, g, t, a,
                                          bfloat16);
        } else {
          load_input<kMath, kSteps, false>(rows, p.input_width, p.input_width, valid_rows, g, t, a,
                                           bfloat16);
        }
      }
    };
    if constexpr (!is_half(kMath)) {
      load(float{});
    } else if constexpr (kWidth > 128) {
      if (p.input_type == static_cast<int32_t>(ElementType::Float32)) {
        load(float{});
      } else {
        load(uint16_t{});
      }
    } else {
      with_element_type(p.input_type, load);
    }
    if constexpr (is_half(kMath)) {
      // Two layers per trip, each writing the other's operands: no copy between layers.
      for (int l = 0; l < p.layer_count; l += 2) {
        if (run_layer_at<kMath, kSplit, kSteps>(p, l, smem, row_lo, g, t, a, b)) break;
        if (run_layer_at<kMath, kSplit, kSteps>(p, l + 1, smem, row_lo, g, t, b, a)) break;
      }
    } else {
      // One copy of the layer code and a register copy between layers: the tf32 forms' layer
      // code is ~3x larger (Tf32x3 split products), and two copies of it ran slower.
      for (int l = 0; l < p.layer_count; ++l) {
        if (run_layer_at<kMath, kSplit, kSteps>(p, l, smem, row_lo, g, t, a, b)) break;
#pragma unroll
        for (int s = 0; s < kSteps; ++s) {
#pragma unroll
          for (int i = 0; i < 4; ++i) a[s][i] = b[s][i];
        }
      }
    }
  }
}

using KernelFunction = void (*)(RegisterParams);

// The kernel for a width class; `split_weights` (kSplit above) only for Tf32x3.
template <TensorCoreMath kMath>
KernelFunction kernel_for_width(int width_class, bool split_weights) {
  if constexpr (kMath == TensorCoreMath::Tf32x3) {
    if (split_weights) {
      return width_class <= 64 ? warp_register_mlp_kernel<kMath, 64, true>
                               : warp_register_mlp_kernel<kMath, 128, true>;
    }
  }
  (void)split_weights;
  if (width_class <= 64) return warp_register_mlp_kernel<kMath, 64, false>;
  if constexpr (is_half(kMath)) {
    if (width_class > 128) return warp_register_mlp_kernel<kMath, 256, false>;
  }
  return warp_register_mlp_kernel<kMath, 128, false>;
}

extern template KernelFunction kernel_for_width<TensorCoreMath::Tf32>(int, bool);
extern template KernelFunction kernel_for_width<TensorCoreMath::Tf32x3>(int, bool);
extern template KernelFunction kernel_for_width<TensorCoreMath::Fp16>(int, bool);
extern template KernelFunction kernel_for_width<TensorCoreMath::Bf16>(int, bool);

}  // namespace fusednn::cuda::warp_registers
