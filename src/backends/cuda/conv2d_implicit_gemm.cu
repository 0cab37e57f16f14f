// The implicit-GEMM convolution kernel (conv2d_implicit_gemm.hpp).
//
// A block computes a 128-pixel x 64-channel tile of one group's output with 8 warps, 4 along the
// pixels and 2 along the channels, each warp 32 x 32 from mma.sync tiles (m16n8k8 tf32 or
// m16n8k16 fp16 / bf16). K goes by stages of 16 words (16 tf32 or 32 16-bit values): while the
// tensor cores read stage s from shared memory, every thread holds its part of stage s + 1 in
// registers (8 gathered patch words, 4 weight words), stored into the other buffer afterwards, so
// one barrier a stage orders both buffers.
//
// Shared memory is kept in the operands' final format (tf32-rounded fp32, or half pairs, or plain
// fp32 for 3xTF32, which splits as it loads fragments), patches as [k word][pixel] and weights as
// [channel][k word]. Their row strides (136 and 20 words) put a fragment load's 32 lanes on 32
// different banks: the patch read is word (t, g) at t x 136 + g, the weight read (g, t) at
// g x 20 + t, with g = lane / 4 and t = lane % 4.
#include "backends/cuda/conv2d_implicit_gemm.hpp"

#include "backends/cuda/epilogue.cuh"
#include "backends/cuda/launch.hpp"
#include "backends/cuda/tensor_core_mma.cuh"
#include "common/error.hpp"

namespace fusednn::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kTilePixels = 128;
constexpr int kTileChannels = 64;
constexpr int kWords = kConvGemmStageWords;
constexpr int kPatchStride = kTilePixels + 8;
constexpr int kWeightStride = kWords + 4;
constexpr int kPatchWordsPerThread = kWords * kTilePixels / kThreads;     // 8
constexpr int kWeightWordsPerThread = kWords * kTileChannels / kThreads;  // 4

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
  int32_t k, row_words, stages;
  DeviceEpilogue epilogue;
};

// This thread's pixel of the tile, as the gather needs it.
struct PatchRow {
  const float* group_x;   // the pixel's sample, first channel of the block's group
  int64_t window_origin;  // (top row) x in_width + left column, possibly negative
  int top, left;          // the window's first input row and column
  bool valid;
};

template <TensorCoreMath kMath>
__device__ __forceinline__ float patch_value(const ConvGemmParams& p, const PatchRow& row, int k) {
  if (!row.valid || k >= p.k) return 0.0f;
  const int2 entry = __ldg(p.table + k);
  const int ih = row.top + (entry.y >> 16);
  const int iw = row.left + (entry.y & 0xffff);
  if (static_cast<unsigned>(ih) >= static_cast<unsigned>(p.in_height) ||
      static_cast<unsigned>(iw) >= static_cast<unsigned>(p.in_width)) {
    return 0.0f;
  }
  return __ldg(row.group_x + row.window_origin + entry.x);
}

// One word of the patch tile in its shared-memory format.
template <TensorCoreMath kMath>
__device__ __forceinline__ uint32_t patch_word(const ConvGemmParams& p, const PatchRow& row,
                                               int word) {
  if constexpr (is_half(kMath)) {
    return pack_pair<kMath>(patch_value<kMath>(p, row, 2 * word),
                            patch_value<kMath>(p, row, 2 * word + 1));
  } else if constexpr (kMath == TensorCoreMath::Tf32) {
    return to_tf32(patch_value<kMath>(p, row, word));
  } else {
    return __float_as_uint(patch_value<kMath>(p, row, word));
  }
}

template <TensorCoreMath kMath>
__device__ __forceinline__ uint32_t weight_word(uint32_t stored) {
  if constexpr (kMath == TensorCoreMath::Tf32) return to_tf32(__uint_as_float(stored));
  return stored;
}

// An operand fragment as the products read it: for 3xTF32 its big and small tf32 parts, split
// once per load (split_tf32), otherwise the words as stored.
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

template <TensorCoreMath kMath>
__global__ void __launch_bounds__(kThreads)
    conv2d_implicit_gemm_kernel(const __grid_constant__ ConvGemmParams p) {
  __shared__ uint32_t patches[2][kWords][kPatchStride];
  __shared__ uint32_t weights[2][kTileChannels][kWeightStride];
  const int group = blockIdx.z;
  const int64_t first_pixel = static_cast<int64_t>(blockIdx.x) * kTilePixels;
  const int first_channel = blockIdx.y * kTileChannels;  // within the group

  // The gather: this thread's pixel, and the words of each stage it loads.
  const int gather_pixel = threadIdx.x % kTilePixels;
  const int gather_word = threadIdx.x / kTilePixels;  // then every other word
  PatchRow row{};
  {
    const int64_t pixel = first_pixel + gather_pixel;
    row.valid = pixel < p.pixels;
    if (row.valid) {
      const int64_t sample = pixel / p.out_plane;
      const int within = static_cast<int>(pixel - sample * p.out_plane);
      const int oh = within / p.out_width;
      const int ow = within - oh * p.out_width;
      row.top = oh * p.stride_height - p.padding_height;
      row.left = ow * p.stride_width - p.padding_width;
      row.window_origin = static_cast<int64_t>(row.top) * p.in_width + row.left;
      row.group_x = p.x + (sample * p.in_channels + static_cast<int64_t>(group) * p.group_in) *
                              p.in_height * p.in_width;
    }
  }
  // The weight loads: channel rows threadIdx / 16 + 16 j, word threadIdx % 16.
  const int load_channel = threadIdx.x / kWords;
  const int load_word = threadIdx.x % kWords;
  const uint32_t* weight_rows =
      p.weight + (static_cast<int64_t>(group) * p.group_out + first_channel) * p.row_words;

  uint32_t patch_words[kPatchWordsPerThread];
  uint32_t weight_words[kWeightWordsPerThread];
  auto load_stage = [&](int stage) {
    const int base = stage * kWords;
#pragma unroll
    for (int j = 0; j < kPatchWordsPerThread; ++j) {
      patch_words[j] = patch_word<kMath>(p, row, base + gather_word + 2 * j);
    }
#pragma unroll
    for (int j = 0; j < kWeightWordsPerThread; ++j) {
      const int channel = load_channel + 16 * j;
      weight_words[j] =
          first_channel + channel < p.group_out
              ? weight_word<kMath>(__ldg(weight_rows + channel * p.row_words + base + load_word))
              : 0u;
    }
  };
  auto store_stage = [&](int buffer) {
#pragma unroll
    for (int j = 0; j < kPatchWordsPerThread; ++j) {
      patches[buffer][gather_word + 2 * j][gather_pixel] = patch_words[j];
    }
#pragma unroll
    for (int j = 0; j < kWeightWordsPerThread; ++j) {
      weights[buffer][load_channel + 16 * j][load_word] = weight_words[j];
    }
  };

  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int g = lane / 4;
  const int t = lane % 4;
  const int warp_pixel = (warp % 4) * 32;
  const int warp_channel = (warp / 4) * 32;
  float acc[2][4][4] = {};

  load_stage(0);
  store_stage(0);
  __syncthreads();
  for (int stage = 0; stage < p.stages; ++stage) {
    const int buffer = stage & 1;
    if (stage + 1 < p.stages) load_stage(stage + 1);
#pragma unroll
    for (int step = 0; step < kWords / 8; ++step) {
      const int w = step * 8 + t;
      Fragment<kMath, 4> a[2];
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const int r = warp_pixel + 16 * i + g;
        a[i].set(0, patches[buffer][w][r]);
        a[i].set(1, patches[buffer][w][r + 8]);
        a[i].set(2, patches[buffer][w + 4][r]);
        a[i].set(3, patches[buffer][w + 4][r + 8]);
      }
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int c = warp_channel + 8 * j + g;
        Fragment<kMath, 2> b;
        b.set(0, weights[buffer][c][w]);
        b.set(1, weights[buffer][c][w + 4]);
#pragma unroll
        for (int i = 0; i < 2; ++i) multiply<kMath>(acc[i][j], a[i], b);
      }
    }
    if (stage + 1 < p.stages) store_stage(buffer ^ 1);
    __syncthreads();
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
void launch_form(const ConvGemmParams& params, dim3 grid, const char* name, cudaStream_t stream) {
  launch_kernel(conv2d_implicit_gemm_kernel<kMath>, name, grid, kThreads, 0, stream, params);
}

}  // namespace

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
  p.k = plan.k;
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
  switch (plan.math) {
    case TensorCoreMath::Tf32:
      launch_form<TensorCoreMath::Tf32>(p, grid, "conv2d_implicit_gemm_kernel<tf32>", stream);
      break;
    case TensorCoreMath::Tf32x3:
      launch_form<TensorCoreMath::Tf32x3>(p, grid, "conv2d_implicit_gemm_kernel<3xtf32>", stream);
      break;
    case TensorCoreMath::Fp16:
      launch_form<TensorCoreMath::Fp16>(p, grid, "conv2d_implicit_gemm_kernel<fp16>", stream);
      break;
    case TensorCoreMath::Bf16:
      launch_form<TensorCoreMath::Bf16>(p, grid, "conv2d_implicit_gemm_kernel<bf16>", stream);
      break;
  }
}

}  // namespace fusednn::cuda
