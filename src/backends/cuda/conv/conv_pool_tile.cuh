// SPDX-License-Identifier: Apache-2.0
// The register-tile pieces of the fused conv + pool kernels, shared by conv_pool.cu (one layer per
// launch) and conv_net.cu (a whole convolutional network per launch): the kernel parameters,
// the tile shapes, the per-input-channel accumulation (compile-time 3x3 / 5x5 taps, or any
// kernel), and the bias + epilogue + pooling + stores of a finished patch. The design notes are
// in conv_pool.cu.
#pragma once

#include <cstdint>

#include "backends/cuda/conv/conv_pool.hpp"
#include "backends/cuda/device/device_epilogue.hpp"
#include "backends/cuda/device/epilogue.cuh"

namespace fusednn::cuda::conv_tile {

struct ConvPoolParams {
  const float* x;
  const float* weight;  // this kernel's image: [in][channel group][kh][kw][kTapStride]
  const float* bias;    // [out_channels] or null
  float* y;
  int64_t batch;
  int32_t in_channels, in_height, in_width;
  int32_t out_channels, conv_height, conv_width;
  int32_t kernel_height, kernel_width, stride_height, stride_width;
  int32_t pool_window;  // 1: none, 2: 2x2 windows with stride 2
  int32_t pool_max;     // 1: max, 0: average
  int32_t count_include_pad;
  int32_t pool_padding_height, pool_padding_width;
  int32_t pooled_height, pooled_width;
  int32_t channel_groups, patch_rows, patch_cols;
  int32_t samples_per_block;
  int32_t slab_rows;  // patch rows per block
  int32_t staged_width, row_pitch;
  int32_t plane_floats;  // one staged input plane (row_pitch x staged rows of a full slab)
  int32_t origin_row, origin_col;  // input coordinates of staged element (0, 0) of slab 0
  int32_t weight_floats;
  DeviceEpilogue epilogue;
};

template <int kChannels, int kRows, int kCols>
struct Tile {
  static constexpr int kCo = kChannels;  // output channels per thread
  static constexpr int kR = kRows;       // conv rows per thread
  static constexpr int kC = kCols;       // conv columns per thread
  static constexpr int kValues = kCo * kR * kC;
  static constexpr int kInputAlign = kC % 4 == 0 ? 4 : (kC % 2 == 0 ? 2 : 1);
  // A tap's kCo filter values start on 16 bytes (padded to kTapStride), so they load as float4s.
  static constexpr int kTapStride = (kCo + 3) / 4 * 4;
  // Blocks of 256 threads an SM holds (the kernel's launch bounds; the planner sizes shared
  // memory to match): three for tiles of up to 32 accumulators (80 registers for 8 x 2 x 2 at
  // 5 x 5, no spills), two above (LeNet-5's conv2 tile needs 92 registers: 16 warps an SM).
  static constexpr int kBlocksPerSm = kValues <= 32 ? 3 : 2;
  static_assert(kR % 2 == 0 && kC % 2 == 0, "a patch holds whole 2x2 pooling windows");
};

// The tile every small-batch variant uses (and conv_net.cu's whole-network kernel).
using SmallTile = Tile<4, 2, 2>;

// values[kStart, kLen) = source[kStart, kLen), in 16-byte then 8-byte then 4-byte loads;
// source + kStart must be aligned to kAlign floats.
template <int kLen, int kAlign, int kStart = 0>
__device__ __forceinline__ void load_floats(const float* source, float (&values)[kLen]) {
  if constexpr (kStart < kLen) {
    if constexpr (kAlign >= 4 && kLen - kStart >= 4) {
      const float4 v = *reinterpret_cast<const float4*>(source + kStart);
      values[kStart] = v.x;
      values[kStart + 1] = v.y;
      values[kStart + 2] = v.z;
      values[kStart + 3] = v.w;
      load_floats<kLen, kAlign, kStart + 4>(source, values);
    } else if constexpr (kAlign >= 2 && kLen - kStart >= 2) {
      const float2 v = *reinterpret_cast<const float2*>(source + kStart);
      values[kStart] = v.x;
      values[kStart + 1] = v.y;
      load_floats<kLen, kAlign, kStart + 2>(source, values);
    } else {
      values[kStart] = source[kStart];
      load_floats<kLen, kAlign, kStart + 1>(source, values);
    }
  }
}

template <class T>
__device__ __forceinline__ constexpr int at(int dy, int dx, int j) {
  return (dy * T::kC + dx) * T::kCo + j;
}

// One input channel, kK x kK taps at stride 1. `input` is the patch's top-left staged element,
// `weight` the channel group's taps ([kh][kw][kTapStride]).
template <int kK, class T>
__device__ __forceinline__ void accumulate_fixed(const float* input, int pitch, const float* weight,
                                                 float (&acc)[T::kValues]) {
  constexpr int kLen = T::kC + kK - 1;
#pragma unroll
  for (int kh = 0; kh < kK; ++kh) {
    float row[T::kR][kLen];
#pragma unroll
    for (int dy = 0; dy < T::kR; ++dy) {
      load_floats<kLen, T::kInputAlign>(input + (kh + dy) * pitch, row[dy]);
    }
#pragma unroll
    for (int kw = 0; kw < kK; ++kw) {
      float w[T::kCo];
      load_floats<T::kCo, 4>(weight + (kh * kK + kw) * T::kTapStride, w);
#pragma unroll
      for (int dy = 0; dy < T::kR; ++dy)
#pragma unroll
        for (int dx = 0; dx < T::kC; ++dx)
#pragma unroll
          for (int j = 0; j < T::kCo; ++j) {
            acc[at<T>(dy, dx, j)] = fmaf(row[dy][dx + kw], w[j], acc[at<T>(dy, dx, j)]);
          }
    }
  }
}

// One input channel, any kernel size and stride: kR x kC scalar loads per tap.
template <class T>
__device__ __forceinline__ void accumulate_generic(const float* input, int pitch,
                                                   const float* weight, int kernel_height,
                                                   int kernel_width,
                                                   const int (&offset)[T::kR][T::kC],
                                                   float (&acc)[T::kValues]) {
  for (int kh = 0; kh < kernel_height; ++kh) {
    const float* row = input + kh * pitch;
    for (int kw = 0; kw < kernel_width; ++kw) {
      float w[T::kCo];
      load_floats<T::kCo, 4>(weight, w);
      weight += T::kTapStride;
      float v[T::kR][T::kC];
#pragma unroll
      for (int dy = 0; dy < T::kR; ++dy)
#pragma unroll
        for (int dx = 0; dx < T::kC; ++dx) v[dy][dx] = row[offset[dy][dx] + kw];
#pragma unroll
      for (int dy = 0; dy < T::kR; ++dy)
#pragma unroll
        for (int dx = 0; dx < T::kC; ++dx)
#pragma unroll
          for (int j = 0; j < T::kCo; ++j) {
            acc[at<T>(dy, dx, j)] = fmaf(v[dy][dx], w[j], acc[at<T>(dy, dx, j)]);
          }
    }
  }
}

template <int kOp, int kN>
__device__ __forceinline__ void apply_op_to_all(float parameter, float (&values)[kN]) {
#pragma unroll
  for (int i = 0; i < kN; ++i) values[i] = apply_op(kOp, parameter, values[i]);
}

// apply_epilogue() on every value, with the op's switch outside the loop over the values: one
// copy of each op's code per value, and only the taken op's copies run.
template <int kN>
__device__ __forceinline__ void apply_epilogue_to_all(const DeviceEpilogue& epilogue,
                                                      float (&values)[kN]) {
#pragma unroll 1
  for (int op = 0; op < epilogue.count; ++op) {
    const float parameter = epilogue.parameter[op];
    switch (epilogue.kind[op]) {
      case kOpReLU: apply_op_to_all<kOpReLU>(parameter, values); break;
      case kOpLeakyReLU: apply_op_to_all<kOpLeakyReLU>(parameter, values); break;
      case kOpGeluErf: apply_op_to_all<kOpGeluErf>(parameter, values); break;
      case kOpGeluTanh: apply_op_to_all<kOpGeluTanh>(parameter, values); break;
      case kOpSiLU: apply_op_to_all<kOpSiLU>(parameter, values); break;
      case kOpSigmoid: apply_op_to_all<kOpSigmoid>(parameter, values); break;
      case kOpTanh: apply_op_to_all<kOpTanh>(parameter, values); break;
      case kOpScale: apply_op_to_all<kOpScale>(parameter, values); break;
      default: break;
    }
  }
}

// Bias, epilogue and pooling of one patch, channel group g, patch (ty, tx) of a whole sample:
// store(channel, row, column, value) for each of its outputs inside the (pooled) output planes.
// `bias` is [out_channels] (global or shared memory) or null. One channel at a time, so that the
// epilogue's temporaries sit next to one channel's kR x kC values (the whole tile at once
// spilled) and channels past out_channels (the group's padding) skip it.
template <class T, class Store>
__device__ __forceinline__ void finish_patch_to(const ConvPoolParams& p, const float* bias,
                                                const float (&acc)[T::kValues], int g, int ty,
                                                int tx, Store&& store) {
  constexpr int kPositions = T::kR * T::kC;
  constexpr int kWindowRows = T::kR / 2, kWindowCols = T::kC / 2;  // 2x2 windows in the patch
  const int co0 = g * T::kCo;
  // Conv coordinates of the patch's top-left position (negative inside the pooling padding).
  const int r0 = ty * T::kR - p.pool_padding_height;
  const int c0 = tx * T::kC - p.pool_padding_width;

  // Where each position or window lands, the same for every channel. Window (pi, pj) covers
  // conv rows r0 + 2 pi + {0, 1} and columns c0 + 2 pj + {0, 1}; inside[] says which of the
  // patch's rows and columns lie in the conv output, divisor[] is PyTorch's (the CPU backend's)
  // average divisor; offset < 0 marks a window or position past the output.
  bool row_inside[T::kR], col_inside[T::kC];
#pragma unroll
  for (int dy = 0; dy < T::kR; ++dy) row_inside[dy] = r0 + dy >= 0 && r0 + dy < p.conv_height;
#pragma unroll
  for (int dx = 0; dx < T::kC; ++dx) col_inside[dx] = c0 + dx >= 0 && c0 + dx < p.conv_width;
  const bool pooled = p.pool_window == 2;
  // Each window's or position's output row and column; row < 0 marks one past the output.
  // Pooled: only the first kWindowRows x kWindowCols are used.
  int out_row[kPositions], out_col[kPositions];
  float divisor[kWindowRows * kWindowCols];
  // 1 / divisor where that is exact (divisors 1, 2 and 4: every window but those the pooling
  // padding or a ragged edge cuts to 3), else 0. A product by it rounds as the division does,
  // without the division's ~10 instructions a window and channel.
  float exact_reciprocal[kWindowRows * kWindowCols];
  if (pooled) {
#pragma unroll
    for (int pi = 0; pi < kWindowRows; ++pi)
#pragma unroll
      for (int pj = 0; pj < kWindowCols; ++pj) {
        const int py = ty * kWindowRows + pi;
        const int px = tx * kWindowCols + pj;
        const int w = pi * kWindowCols + pj;
        out_row[w] = (py < p.pooled_height && px < p.pooled_width) ? py : -1;
        out_col[w] = px;
        const int row_start = r0 + 2 * pi, col_start = c0 + 2 * pj;
        const int row_begin = max(row_start, 0), row_end = min(row_start + 2, p.conv_height);
        const int col_begin = max(col_start, 0), col_end = min(col_start + 2, p.conv_width);
        int count = 0;
        if (row_begin < row_end && col_begin < col_end) {
          if (p.count_include_pad) {
            const int padded_row_end = min(row_start + 2, p.conv_height + p.pool_padding_height);
            const int padded_col_end = min(col_start + 2, p.conv_width + p.pool_padding_width);
            count = (padded_row_end - row_start) * (padded_col_end - col_start);
          } else {
            count = (row_end - row_begin) * (col_end - col_begin);
          }
        }
        divisor[w] = static_cast<float>(count);
        exact_reciprocal[w] = count == 4 ? 0.25f : count == 2 ? 0.5f : count == 1 ? 1.0f : 0.0f;
      }
  } else {
#pragma unroll
    for (int dy = 0; dy < T::kR; ++dy)
#pragma unroll
      for (int dx = 0; dx < T::kC; ++dx) {
        out_row[dy * T::kC + dx] = (row_inside[dy] && col_inside[dx]) ? r0 + dy : -1;
        out_col[dy * T::kC + dx] = c0 + dx;
      }
  }

#pragma unroll
  for (int j = 0; j < T::kCo; ++j) {
    if (co0 + j >= p.out_channels) continue;
    const float b = bias != nullptr ? bias[co0 + j] : 0.0f;
    float values[kPositions];
#pragma unroll
    for (int v = 0; v < kPositions; ++v) values[v] = acc[v * T::kCo + j] + b;
    apply_epilogue_to_all(p.epilogue, values);
    if (!pooled) {
#pragma unroll
      for (int v = 0; v < kPositions; ++v) {
        if (out_row[v] >= 0) store(co0 + j, out_row[v], out_col[v], values[v]);
      }
      continue;
    }
#pragma unroll
    for (int pi = 0; pi < kWindowRows; ++pi)
#pragma unroll
      for (int pj = 0; pj < kWindowCols; ++pj) {
        const int w = pi * kWindowCols + pj;
        if (out_row[w] < 0) continue;
        // The window's conv outputs in the CPU backend's order: rows top to bottom, columns
        // left to right, only those inside the output.
        float result;
        if (p.pool_max) {
          result = -INFINITY;
#pragma unroll
          for (int a = 0; a < 2; ++a)
#pragma unroll
            for (int c = 0; c < 2; ++c) {
              const float value = values[(2 * pi + a) * T::kC + 2 * pj + c];
              if (row_inside[2 * pi + a] && col_inside[2 * pj + c] &&
                  ((value > result) | (value != value))) {
                result = value;
              }
            }
        } else {
          float sum = 0.0f;
#pragma unroll
          for (int a = 0; a < 2; ++a)
#pragma unroll
            for (int c = 0; c < 2; ++c) {
              if (row_inside[2 * pi + a] && col_inside[2 * pj + c]) {
                sum += values[(2 * pi + a) * T::kC + 2 * pj + c];
              }
            }
          if (exact_reciprocal[w] != 0.0f) {
            result = sum * exact_reciprocal[w];
          } else {
            result = divisor[w] == 0.0f ? 0.0f : sum / divisor[w];
          }
        }
        store(co0 + j, out_row[w], out_col[w], result);
      }
  }
}

// finish_patch_to() into the sample's output planes at `y_sample` (global or shared memory),
// with the parameters' bias.
template <class T>
__device__ __forceinline__ void finish_patch(const ConvPoolParams& p,
                                             const float (&acc)[T::kValues], float* y_sample, int g,
                                             int ty, int tx) {
  const int plane = p.pooled_height * p.pooled_width;
  const int width = p.pooled_width;
  finish_patch_to<T>(p, p.bias, acc, g, ty, tx, [&](int channel, int row, int col, float value) {
    y_sample[channel * static_cast<int64_t>(plane) + row * width + col] = value;
  });
}

}  // namespace fusednn::cuda::conv_tile

namespace fusednn::cuda {

// The parameters of plan.small (a SmallTile kernel) for one whole sample per block, no row slabs:
// filters at weights + plan.small.weight_offset (build_conv_pool_weights()' image), bias or null;
// x, y and batch left for the caller (conv_pool.cu).
conv_tile::ConvPoolParams small_tile_whole_sample_params(const ConvPoolPlan& plan,
                                                         const float* weights, const float* bias);

}  // namespace fusednn::cuda
