// SPDX-License-Identifier: Apache-2.0
// The implicit-GEMM convolution kernel (conv2d_implicit_gemm.hpp).
//
// A block computes a 128-pixel x 64-channel tile of one group's output with 8 warps, 4 along the
// pixels and 2 along the channels, each warp 32 x 32 from mma.sync tiles (m16n8k8 tf32 or
// m16n8k16 fp16 / bf16). K goes by stages of 16 weight words (16 tf32 or 32 16-bit values) through
// a ring of kRing shared-memory buffers filled by cp.async, kRing - 1 stages ahead of the tensor
// cores: the patch elements 4 bytes at a time (zero-filled where the window leaves the input),
// the weights 16 bytes at a time. One barrier a stage.
//
// Patches stay fp32 in shared memory, [k][pixel], and become operands as fragments load them
// (tf32 rounding, half pairs, or the 3xTF32 split); weights arrive in the operands' format from
// the image, [channel][word]. The row strides put a fragment load's 32 lanes on 32 different
// banks: patch (k, pixel) with g = lane / 4 and t = lane % 4 reads k = t (tf32) or 2t (halves)
// and pixel g, at stride 136 (8 mod 32) or 132 (4 mod 32) floats; weight (g, t) at stride 20.
//
// Dense rows (kDenseRows: a 1 x 1 convolution over 1 x 1 images, which is a Linear layer, the
// first layer of a split MLP chain; fused_mlp_split.hpp): patch row `pixel` is x's row, K values
// in a row, so a stage copies 16-byte pieces of rows into [pixel][k] tiles instead of gathering
// 4-byte elements through the table. Row strides of kK + 4 floats (tf32: lane (g, t) reads row g,
// k t) and kK + 8 (halves: a float2 of k 2t, 2t + 1, conflict-free per half warp) keep fragment
// loads on distinct banks. Gathering a dense layer element by element through the table costs
// several times its tensor-core work, which is why these rows have their own copy.
//
// The gather keeps its integer work small: a form with registers carrying the next stage and a
// branch per element spent most of its instructions on integer and branch work and stalled at
// the stores waiting for the loads. Here the bounds of an element are one unsigned compare pair
// on a table entry (padded k and rows past the batch carry steps that no input holds) and the
// copy is predicated.
#include "backends/cuda/conv/conv2d_implicit_gemm.hpp"

#include <cuda_pipeline.h>

#include <cstdint>

#include "backends/cuda/device/epilogue.cuh"
#include "backends/cuda/mlp/tensor_core_mma.cuh"
#include "backends/cuda/platform/launch.hpp"
#include "common/error.hpp"

namespace fusednn::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kTilePixels = 128;
constexpr int kTileChannels = 64;
constexpr int kWords = kConvGemmStageWords;
constexpr int kRing = 3;  // stages in flight
constexpr int kWeightStride = kWords + 4;
constexpr int kWeightWords = kTileChannels * kWeightStride;

template <TensorCoreMath kMath, bool kDenseRows>
struct Layout {
  static constexpr int kK = is_half(kMath) ? 2 * kWords : kWords;              // k values a stage
  static constexpr int kPatchStride = kTilePixels + (is_half(kMath) ? 4 : 8);  // [k][pixel]
  static constexpr int kRowStride = kK + (is_half(kMath) ? 8 : 4);             // [pixel][k]
  static constexpr int kPatchFloats = kDenseRows ? kTilePixels * kRowStride : kK * kPatchStride;
  static constexpr int kStageWords = kPatchFloats + kWeightWords;
  static constexpr int kSharedBytes = kRing * kStageWords * 4;
};

struct ConvGemmParams {
  const float* x;
  const int2* table;       // [padded_k] {offset, row step << 16 | column step}
  const uint32_t* weight;  // [out_channels][row_words]
  const float* bias;       // [out_channels] or null
  float* y;
  int64_t pixels;  // batch x out_height x out_width
  int32_t out_plane, out_width;
  int32_t in_height, in_width, in_channels, out_channels;
  int32_t stride_height, stride_width, padding_height, padding_width;
  int32_t group_in, group_out;
  int32_t row_words, stages;
  DeviceEpilogue epilogue;
};

// A patch operand fragment word from fp32 shared memory: tf32-rounded, a half pair (k and k + 1,
// `next` floats apart), or the fp32 bits for 3xTF32 to split.
template <TensorCoreMath kMath>
__device__ __forceinline__ uint32_t patch_operand(const float* at, int next) {
  if constexpr (is_half(kMath)) {
    return pack_pair<kMath>(at[0], at[next]);
  } else if constexpr (kMath == TensorCoreMath::Tf32) {
    return to_tf32(at[0]);
  } else {
    return __float_as_uint(at[0]);
  }
}

// The same from a dense [pixel][k] tile, where k and k + 1 are adjacent: one 8-byte load for a
// half pair (`at` is on 8 bytes: k is even and the row stride a multiple of 4).
template <TensorCoreMath kMath>
__device__ __forceinline__ uint32_t dense_operand(const float* at) {
  if constexpr (is_half(kMath)) {
    const float2 pair = *reinterpret_cast<const float2*>(at);
    return pack_pair<kMath>(pair.x, pair.y);
  } else {
    return patch_operand<kMath>(at, 1);
  }
}

// An operand fragment as the products read it: for 3xTF32 its big and small tf32 parts, split
// once per load (split_tf32), otherwise the words as loaded.
template <TensorCoreMath kMath, int kWordsPerFragment>
struct Fragment {
  static constexpr bool kSplit = kMath == TensorCoreMath::Tf32x3;
  uint32_t big[kWordsPerFragment];
  uint32_t small[kSplit ? kWordsPerFragment : 1];

  __device__ __forceinline__ void set(int i, uint32_t word) {
    if constexpr (kSplit) {
      split_tf32(__uint_as_float(word), big[i], small[i]);
    } else {
      big[i] = word;
    }
  }
};

// d += a b; 3xTF32 adds the two cross products of the small parts first.
template <TensorCoreMath kMath>
__device__ __forceinline__ void multiply(float (&d)[4], const Fragment<kMath, 4>& a,
                                         const Fragment<kMath, 2>& b) {
  if constexpr (kMath == TensorCoreMath::Tf32x3) {
    mma<TensorCoreMath::Tf32>(d, a.small, b.big[0], b.big[1]);
    mma<TensorCoreMath::Tf32>(d, a.big, b.small[0], b.small[1]);
    mma<TensorCoreMath::Tf32>(d, a.big, b.big[0], b.big[1]);
  } else {
    mma<kMath>(d, a.big, b.big[0], b.big[1]);
  }
}

template <TensorCoreMath kMath, bool kDenseRows>
__global__ void __launch_bounds__(kThreads)
    conv2d_implicit_gemm_kernel(const __grid_constant__ ConvGemmParams p) {
  using L = Layout<kMath, kDenseRows>;
  extern __shared__ float4 shared_words[];
  float* const shared = reinterpret_cast<float*>(shared_words);
  const int group = blockIdx.z;
  const int64_t first_pixel = static_cast<int64_t>(blockIdx.x) * kTilePixels;
  const int first_channel = blockIdx.y * kTileChannels;  // within the group

  // The gather: this thread's pixel, and its rows of each stage's patch tile (every other k from
  // gather_row). A pixel past the batch starts its window far above the input, so that no table
  // step reaches a row inside it.
  const int gather_pixel = threadIdx.x % kTilePixels;
  const int gather_row = threadIdx.x / kTilePixels;
  const float* group_x = p.x;
  int window_origin = 0, top = -(1 << 20), left = 0;
  {
    const int64_t pixel = first_pixel + gather_pixel;
    if (pixel < p.pixels) {
      const int64_t sample = pixel / p.out_plane;
      const int within = static_cast<int>(pixel - sample * p.out_plane);
      const int oh = within / p.out_width;
      const int ow = within - oh * p.out_width;
      top = oh * p.stride_height - p.padding_height;
      left = ow * p.stride_width - p.padding_width;
      window_origin = top * p.in_width + left;
      group_x = p.x + (sample * p.in_channels + static_cast<int64_t>(group) * p.group_in) *
                          p.in_height * p.in_width;
    }
  }
  const unsigned height = static_cast<unsigned>(p.in_height);
  const unsigned width = static_cast<unsigned>(p.in_width);
  // The weight copies: channel row threadIdx / 4, 16 bytes (4 words) at threadIdx % 4.
  const int load_channel = threadIdx.x / 4;
  const int load_word = (threadIdx.x % 4) * 4;
  const bool channel_inside = first_channel + load_channel < p.group_out;
  const uint32_t* weight_row = p.weight +
                               (static_cast<int64_t>(group) * p.group_out + first_channel +
                                (channel_inside ? load_channel : 0)) *
                                   p.row_words +
                               load_word;

  auto issue_stage = [&](int stage, int buffer) {
    float* patches = shared + buffer * L::kStageWords;
    if constexpr (kDenseRows) {
      // The tile's 16-byte pieces, a row's consecutive ones in consecutive threads.
      constexpr int kPiecesPerRow = L::kK / 4;
      constexpr int kPiecesPerThread = kTilePixels * kPiecesPerRow / kThreads;
#pragma unroll
      for (int j = 0; j < kPiecesPerThread; ++j) {
        const int piece = threadIdx.x + j * kThreads;
        const int row = piece / kPiecesPerRow;
        const int k = stage * L::kK + (piece % kPiecesPerRow) * 4;
        const int64_t pixel = first_pixel + row;
        const bool inside = pixel < p.pixels && k < p.group_in;
        const float* source = inside ? p.x + pixel * p.group_in + k : p.x;
        __pipeline_memcpy_async(patches + row * L::kRowStride + (k - stage * L::kK), source, 16,
                                inside ? 0 : 16);
      }
    } else {
      constexpr int kGatherRows = L::kK * kTilePixels / kThreads;  // patch elements a thread
      const int2* entries = p.table + stage * L::kK + gather_row;
#pragma unroll
      for (int j = 0; j < kGatherRows; ++j) {
        const int2 entry = __ldg(entries + 2 * j);
        const unsigned ih = static_cast<unsigned>(top + (entry.y >> 16));
        const unsigned iw = static_cast<unsigned>(left + (entry.y & 0xffff));
        const bool inside = ih < height && iw < width;
        const float* source = inside ? group_x + (window_origin + entry.x) : p.x;
        __pipeline_memcpy_async(patches + (gather_row + 2 * j) * L::kPatchStride + gather_pixel,
                                source, 4, inside ? 0 : 4);
      }
    }
    uint32_t* weights = reinterpret_cast<uint32_t*>(patches + L::kPatchFloats);
    __pipeline_memcpy_async(weights + load_channel * kWeightStride + load_word,
                            weight_row + stage * kWords, 16, channel_inside ? 0 : 16);
  };

  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int g = lane / 4;
  const int t = lane % 4;
  const int warp_pixel = (warp % 4) * 32;
  const int warp_channel = (warp / 4) * 32;
  float acc[2][4][4] = {};

  for (int stage = 0; stage < kRing - 1; ++stage) {
    if (stage < p.stages) issue_stage(stage, stage);
    __pipeline_commit();
  }
  for (int stage = 0; stage < p.stages; ++stage) {
    __pipeline_wait_prior(kRing - 2);
    __syncthreads();
    const int ahead = stage + kRing - 1;
    if (ahead < p.stages) issue_stage(ahead, ahead % kRing);
    __pipeline_commit();
    const float* patches = shared + (stage % kRing) * L::kStageWords;
    const uint32_t* weights = reinterpret_cast<const uint32_t*>(patches + L::kPatchFloats);
#pragma unroll
    for (int step = 0; step < kWords / 8; ++step) {
      // Patch rows of this k-step: t and t + 4 (tf32), or 2t, 2t + 1 and 2t + 8, 2t + 9.
      constexpr int kHigh = is_half(kMath) ? 8 : 4;
      const int k = is_half(kMath) ? 16 * step + 2 * t : 8 * step + t;
      Fragment<kMath, 4> a[2];
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        if constexpr (kDenseRows) {
          const float* at = patches + (warp_pixel + 16 * i + g) * L::kRowStride + k;
          a[i].set(0, dense_operand<kMath>(at));
          a[i].set(1, dense_operand<kMath>(at + 8 * L::kRowStride));
          a[i].set(2, dense_operand<kMath>(at + kHigh));
          a[i].set(3, dense_operand<kMath>(at + 8 * L::kRowStride + kHigh));
        } else {
          const float* at = patches + k * L::kPatchStride + warp_pixel + 16 * i + g;
          a[i].set(0, patch_operand<kMath>(at, L::kPatchStride));
          a[i].set(1, patch_operand<kMath>(at + 8, L::kPatchStride));
          a[i].set(2, patch_operand<kMath>(at + kHigh * L::kPatchStride, L::kPatchStride));
          a[i].set(3, patch_operand<kMath>(at + kHigh * L::kPatchStride + 8, L::kPatchStride));
        }
      }
      const int w = step * 8 + t;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int c = warp_channel + 8 * j + g;
        Fragment<kMath, 2> b;
        b.set(0, weights[c * kWeightStride + w]);
        b.set(1, weights[c * kWeightStride + w + 4]);
#pragma unroll
        for (int i = 0; i < 2; ++i) {
          if constexpr (kMath == TensorCoreMath::Tf32x3) {
            // The tensor core's own fp32 sums truncate, so a long K chained through mma drifts
            // (host emulation: 5.7e-6 at K = 576, 4.8e-5 at 4608); each k-step's products are
            // summed from zero and added to the accumulators with rounding FADDs instead.
            float part[4] = {0.0f, 0.0f, 0.0f, 0.0f};
            multiply<kMath>(part, a[i], b);
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[i][j][e] += part[e];
          } else {
            multiply<kMath>(acc[i][j], a[i], b);
          }
        }
      }
    }
  }
  // Epilogue: accumulator (i, j, e) is pixel warp_pixel + 16 i + g (+ 8 for e >= 2) and channel
  // warp_channel + 8 j + 2 t (+ 1 for odd e).
#pragma unroll
  for (int i = 0; i < 2; ++i) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int64_t pixel = first_pixel + warp_pixel + 16 * i + 8 * half + g;
      if (pixel >= p.pixels) continue;
      const int64_t sample = pixel / p.out_plane;
      const int64_t within = pixel - sample * p.out_plane;
      const int64_t group_first = static_cast<int64_t>(group) * p.group_out;
      float* y = p.y + (sample * p.out_channels + group_first) * p.out_plane + within;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
#pragma unroll
        for (int odd = 0; odd < 2; ++odd) {
          const int channel = first_channel + warp_channel + 8 * j + 2 * t + odd;
          if (channel >= p.group_out) continue;
          float value = acc[i][j][2 * half + odd];
          if (p.bias != nullptr) value += __ldg(p.bias + group_first + channel);
          y[static_cast<int64_t>(channel) * p.out_plane] = apply_epilogue(p.epilogue, value);
        }
      }
    }
  }
}

template <TensorCoreMath kMath>
void launch_form(const ConvGemmParams& params, bool dense_rows, dim3 grid, const char* name,
                 cudaStream_t stream) {
  if (dense_rows) {
    launch_kernel(conv2d_implicit_gemm_kernel<kMath, true>, name, grid, kThreads,
                  static_cast<size_t>(Layout<kMath, true>::kSharedBytes), stream, params);
  } else {
    launch_kernel(conv2d_implicit_gemm_kernel<kMath, false>, name, grid, kThreads,
                  static_cast<size_t>(Layout<kMath, false>::kSharedBytes), stream, params);
  }
}

template <TensorCoreMath kMath, bool kDenseRows>
bool allow_shared_memory(const DeviceInfo& device) {
  constexpr int bytes = Layout<kMath, kDenseRows>::kSharedBytes;
  if (static_cast<size_t>(bytes) > device.shared_per_block_optin) return false;
  return cudaFuncSetAttribute(conv2d_implicit_gemm_kernel<kMath, kDenseRows>,
                              cudaFuncAttributeMaxDynamicSharedMemorySize, bytes) == cudaSuccess;
}

// Both forms of kMath, the dense one where the plan may take it.
template <TensorCoreMath kMath>
bool allow_shared_memory(const DeviceInfo& device, bool dense_rows) {
  return allow_shared_memory<kMath, false>(device) &&
         (!dense_rows || allow_shared_memory<kMath, true>(device));
}

}  // namespace

bool prepare_conv2d_implicit_gemm(const ConvGemmPlan& plan, const DeviceInfo& device) {
  switch (plan.math) {
    case TensorCoreMath::Tf32:
      return allow_shared_memory<TensorCoreMath::Tf32>(device, plan.dense_rows);
    case TensorCoreMath::Tf32x3:
      return allow_shared_memory<TensorCoreMath::Tf32x3>(device, plan.dense_rows);
    case TensorCoreMath::Fp16:
      return allow_shared_memory<TensorCoreMath::Fp16>(device, plan.dense_rows);
    case TensorCoreMath::Bf16:
      return allow_shared_memory<TensorCoreMath::Bf16>(device, plan.dense_rows);
  }
  return false;
}

void launch_conv2d_implicit_gemm(const ConvGemmPlan& plan, const Conv2dArgs& args,
                                 cudaStream_t stream) {
  ConvGemmParams p;
  p.x = args.x;
  p.table = reinterpret_cast<const int2*>(plan.image);
  p.weight = plan.image + 2 * static_cast<int64_t>(plan.padded_k);
  p.bias = args.bias;
  p.y = args.y;
  p.out_plane = args.out_height * args.out_width;
  p.pixels = args.batch * p.out_plane;
  if (p.pixels <= 0) return;
  p.out_width = args.out_width;
  p.in_height = args.in_height;
  p.in_width = args.in_width;
  p.in_channels = args.in_channels;
  p.out_channels = args.out_channels;
  p.stride_height = args.stride_height;
  p.stride_width = args.stride_width;
  p.padding_height = args.padding_height;
  p.padding_width = args.padding_width;
  p.group_in = args.in_channels / args.groups;
  p.group_out = args.out_channels / args.groups;
  p.row_words = plan.row_words;
  p.stages = plan.row_words / kWords;
  p.epilogue = args.epilogue;
  const int64_t pixel_tiles = (p.pixels + kTilePixels - 1) / kTilePixels;
  if (pixel_tiles > 0x7fffffff) {
    fail(FDNN_STATUS_INVALID_ARGUMENT, "a batch of ", args.batch,
         " samples is too many for the implicit-GEMM convolution's grid");
  }
  const dim3 grid(static_cast<unsigned>(pixel_tiles),
                  static_cast<unsigned>((p.group_out + kTileChannels - 1) / kTileChannels),
                  static_cast<unsigned>(args.groups));
  // Dense rows need x on 16 bytes (the context keys its graphs by that alignment).
  const bool dense = plan.dense_rows && reinterpret_cast<uintptr_t>(args.x) % 16 == 0;
  switch (plan.math) {
    case TensorCoreMath::Tf32:
      launch_form<TensorCoreMath::Tf32>(p, dense, grid, "conv2d_implicit_gemm_kernel<tf32>",
                                        stream);
      break;
    case TensorCoreMath::Tf32x3:
      launch_form<TensorCoreMath::Tf32x3>(p, dense, grid, "conv2d_implicit_gemm_kernel<3xtf32>",
                                          stream);
      break;
    case TensorCoreMath::Fp16:
      launch_form<TensorCoreMath::Fp16>(p, dense, grid, "conv2d_implicit_gemm_kernel<fp16>",
                                        stream);
      break;
    case TensorCoreMath::Bf16:
      launch_form<TensorCoreMath::Bf16>(p, dense, grid, "conv2d_implicit_gemm_kernel<bf16>",
                                        stream);
      break;
  }
}

}  // namespace fusednn::cuda
