// SPDX-License-Identifier: Apache-2.0
// Conv2d + bias + epilogue + pooling in one launch (see conv_pool.hpp for what fits).
//
// Napkin math, LeNet-5 (per sample):
//   conv1 1->6, 5x5, pad 2, 28x28: 6 x 784 x 25 = 117.6 K multiply-adds; conv2 6->16, 5x5,
//   14x14 -> 10x10: 16 x 100 x 150 = 240 K. Together 358 K multiply-adds = 715 KFLOP, and
//   4704 + 1600 tanh. Bytes: conv1 reads 784 floats and writes its pooled 1176, conv2 reads
//   those and writes 400: 14 KB per sample, where the unfused kernels also write and re-read
//   the 4704 + 1600 conv outputs (+50 KB).
//   Large batches: the arithmetic takes a few times as long as the bytes at the device's fp32
//     rate and copy rate, so the kernel is arithmetic-bound, and what counts is the share of
//     issue slots that are FFMAs. The plan
//     picks 6 channels x 2 x 4 positions per thread for conv1 (no padded channels) and
//     8 x 2 x 2 for conv2 (no ragged columns on its 5-wide output); per input channel a conv1
//     thread issues 1200 FFMAs against 62 shared loads (12 x 16-byte input rows, 25 x (16 + 8)
//     byte filter broadcasts), a conv2 thread 800 against 68. Per sample that is ~360 K FFMAs,
//     ~26 K shared loads, ~126 K instructions of tanh (~20 each), ~23 K of staging and ~15 K
//     of pooling and stores: ~550 K thread instructions, 17 K warp instructions.
//   Batch 1: 358 K multiply-adds are nothing for the device; the time is the launch, the trip
//     of the input and the filters from L2, and each thread's dependent chain. The small tile
//     (4 channels x 2 x 2 positions) and row slabs spread one sample over 7 blocks (conv1, 400
//     FFMAs per thread) and 3 blocks (conv2, 2400) to shorten those chains.
//
// The work. A block owns `samples_per_block` samples and a slab of patch rows (grid.y splits a
// sample's rows across blocks when the batch is small). It stages its samples' input planes with
// every zero it will read (convolution padding, pooling padding, the ragged last patch) and all
// filters in shared memory (cp.async), then one barrier; after that a thread's reads need no
// bounds checks. A thread owns kCo output channels x kR x kC conv positions (a "patch") and keeps
// them in registers; for 3x3 and 5x5 stride-1 kernels (compile-time taps) each input row segment
// of the patch is loaded once per kernel row with vector loads and slides across the kernel
// columns, and each filter tap is one or two broadcast vector loads (kCo channels padded to a
// multiple of 4). Then bias, epilogue, and the pooling windows (window = stride = 2, or 1 for
// no pooling) are reduced in registers in the CPU backend's order (rows top to bottom, columns
// left to right), divided as it divides. The 3x3 / 5x5 kernels unroll a whole input channel
// (up to ~1700 instructions, 27 KB of code for 5x5 at 8 x 2 x 4); the generic one loops over taps.
//
// Threads are numbered channel group slowest, then sample, patch row, patch column, so a warp
// shares its filter reads (broadcasts); the staged row pitch is picked at plan time by counting
// the bank wavefronts of the first input loads of two warps.
#include "backends/cuda/conv/conv_pool.hpp"

#include <cuda_pipeline.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <string>

#include "backends/cuda/conv/conv_pool_kernel.cuh"
#include "backends/cuda/platform/launch.hpp"
#include "common/error.hpp"

namespace fusednn::cuda {
namespace {

using namespace conv_tile;

constexpr int kMaxThreads = kConvPoolThreads;
constexpr int kMaxSamplesPerBlock = 16;

// ------------------------------------------------------------------------------------------
// Host side: the kernel table, the fit of each kernel to a layer, and the launch.

struct Variant {
  void (*kernel)(ConvPoolParams);
  const char* name;
  int kernel_size;  // 3 or 5: square kernels at stride 1; 0: any up to kConvPoolMaxKernel
  int channels, rows, cols;
  bool small;         // the small-batch tile of its kernel size
  int blocks_per_sm;  // its Tile's kBlocksPerSm
};

using Tile6x2x4 = Tile<6, 2, 4>;
using Tile8x2x4 = Tile<8, 2, 4>;
using Tile8x2x2 = Tile<8, 2, 2>;

// A table row from the tile type itself, so that its shape and blocks per SM cannot drift from
// the kernel's: conv_pool_kernel<kKernel, T>, or (small) the SmallTile kernel of that size built
// in its own file.
template <int kKernel, class T>
constexpr Variant variant(const char* name) {
  return {
      conv_pool_kernel<kKernel, T>, name, kKernel, T::kCo, T::kR, T::kC, false, T::kBlocksPerSm};
}
Variant small_variant(void (*kernel)(ConvPoolParams), const char* name, int kernel_size) {
  return {kernel,        name,          kernel_size, SmallTile::kCo,
          SmallTile::kR, SmallTile::kC, true,        SmallTile::kBlocksPerSm};
}

const Variant kVariants[] = {
    variant<5, Tile6x2x4>("conv_pool_kernel<5x5, 6x2x4>"),
    variant<5, Tile8x2x4>("conv_pool_kernel<5x5, 8x2x4>"),
    variant<5, Tile8x2x2>("conv_pool_kernel<5x5, 8x2x2>"),
    small_variant(small_tile_conv_pool_kernel_5x5(), "conv_pool_kernel<5x5, 4x2x2>", 5),
    variant<3, Tile6x2x4>("conv_pool_kernel<3x3, 6x2x4>"),
    variant<3, Tile8x2x4>("conv_pool_kernel<3x3, 8x2x4>"),
    variant<3, Tile8x2x2>("conv_pool_kernel<3x3, 8x2x2>"),
    small_variant(small_tile_conv_pool_kernel_3x3(), "conv_pool_kernel<3x3, 4x2x2>", 3),
    variant<0, Tile8x2x4>("conv_pool_kernel<any, 8x2x4>"),
    small_variant(small_tile_conv_pool_kernel_any(), "conv_pool_kernel<any, 4x2x2>", 0),
};
constexpr int kVariantCount = static_cast<int>(sizeof(kVariants) / sizeof(kVariants[0]));

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t round_up(int64_t a, int64_t b) { return ceil_div(a, b) * b; }

int align_of(int count) { return count % 4 == 0 ? 4 : (count % 2 == 0 ? 2 : 1); }
int tap_stride(const Variant& v) { return (v.channels + 3) / 4 * 4; }

// Loads of `count` floats in load_floats()'s pieces at that alignment.
int vector_loads(int count, int align) {
  if (align >= 4) return count / 4 + (count % 4) / 2 + count % 2;
  if (align >= 2) return count / 2 + count % 2;
  return count;
}

// The kernel's fixed-size path applies (square 3x3 or 5x5 at stride 1).
int fixed_kernel_size(const ConvPoolDesc& d) {
  const bool square = d.kernel_height == d.kernel_width;
  const bool unit_stride = d.stride_height == 1 && d.stride_width == 1;
  if (square && unit_stride && (d.kernel_height == 3 || d.kernel_height == 5))
    return d.kernel_height;
  return 0;
}

int64_t staged_rows(const ConvPoolDesc& d, const Variant& v, int64_t patch_rows) {
  return (patch_rows * v.rows - 1) * d.stride_height + d.kernel_height;
}

int64_t shared_bytes(const ConvPoolDesc& d, const Variant& v, const ConvPoolShape& s,
                     int64_t samples, int64_t patch_rows) {
  return int64_t{sizeof(float)} *
         (s.weight_floats + samples * d.in_channels * staged_rows(d, v, patch_rows) * s.row_pitch);
}

// Shared-memory wavefronts of the first input load (kernel tap 0, patch row 0) of the first two
// warps of a block with many samples, as the hardware splits a warp's request: phases of
// 32 / width lanes, each costing as many wavefronts as the most distinct words one bank holds.
int simulated_wavefronts(const ConvPoolDesc& d, const Variant& v, const ConvPoolShape& s,
                         int64_t row_pitch) {
  const int width = v.kernel_size > 0 ? align_of(v.cols) : 1;
  const int64_t per_sample = int64_t{s.patch_rows} * s.patch_cols;
  const int64_t sample_floats = d.in_channels * staged_rows(d, v, s.patch_rows) * row_pitch;
  const int lanes_per_phase = 32 / width;
  int total = 0;
  // A phase reads 32 words at most (lanes_per_phase x width): sorted and deduplicated in place,
  // then counted per bank. The planner runs this for every variant and pitch at load, so it
  // allocates nothing (a map of sets per phase would add noticeably to every layer's load).
  std::array<int64_t, 32> words;
  for (int phase_start = 0; phase_start < 64; phase_start += lanes_per_phase) {
    size_t count = 0;
    for (int lane = phase_start; lane < phase_start + lanes_per_phase; ++lane) {
      const int64_t t = lane / per_sample;
      const int64_t rest = lane % per_sample;
      const int64_t tyl = rest / s.patch_cols;
      const int64_t tx = rest % s.patch_cols;
      const int64_t address = t * sample_floats + tyl * v.rows * d.stride_height * row_pitch +
                              tx * v.cols * d.stride_width;
      for (int k = 0; k < width; ++k) words[count++] = address + k;
    }
    std::sort(words.begin(), words.begin() + count);
    const size_t distinct = std::unique(words.begin(), words.begin() + count) - words.begin();
    std::array<int, 32> words_in_bank{};
    int worst = 0;
    for (size_t i = 0; i < distinct; ++i) {
      worst = std::max(worst, ++words_in_bank[static_cast<size_t>(words[i] % 32)]);
    }
    total += worst;
  }
  return total;
}

// Issue slots per sample, roughly: FFMAs (padding channels and ragged patches included), shared
// loads, and ~16 instructions per epilogue value.
double estimated_cost(const ConvPoolDesc& d, const Variant& v, const ConvPoolShape& s) {
  const double taps = double(d.kernel_height) * d.kernel_width;
  const double positions = double(s.patch_rows) * v.rows * s.patch_cols * v.cols;
  const double channels = double(s.channel_groups) * v.channels;
  const double items = double(s.channel_groups) * s.patch_rows * s.patch_cols;
  const int weight_loads = vector_loads(v.channels, 4);
  double loads;  // per item and input channel
  if (v.kernel_size > 0) {
    loads = double(d.kernel_height) * v.rows *
                vector_loads(v.cols + v.kernel_size - 1, align_of(v.cols)) +
            taps * weight_loads;
  } else {
    loads = taps * (v.rows * v.cols + weight_loads);
  }
  const double fma = channels * positions * d.in_channels * taps;
  const double epilogue = 16.0 * d.epilogue.count * channels * positions;
  return fma + items * d.in_channels * loads + epilogue;
}

// Of the threads a block of `samples` launches, the share that has work in every round.
double busy_share(int64_t items_per_sample, int64_t samples) {
  const int64_t work = items_per_sample * samples;
  const int64_t threads = std::min<int64_t>(kMaxThreads, round_up(work, 32));
  return double(work) / double(ceil_div(work, threads) * threads);
}

int64_t best_samples_for(int64_t items_per_sample, int64_t max_samples) {
  int64_t best = 1;
  for (int64_t t = 2; t <= max_samples; ++t) {
    if (busy_share(items_per_sample, t) > busy_share(items_per_sample, best) + 1e-9) best = t;
  }
  return best;
}

ConvPoolShape fit_variant(const ConvPoolDesc& d, int index, const DeviceInfo& device) {
  const Variant& v = kVariants[index];
  ConvPoolShape s;
  const int64_t groups = ceil_div(d.out_channels, v.channels);
  // The patches tile the conv rows and columns the pooling windows cover, from -padding on.
  const int64_t patch_rows = ceil_div(int64_t{d.pooled_height} * d.pool_window, v.rows);
  const int64_t patch_cols = ceil_div(int64_t{d.pooled_width} * d.pool_window, v.cols);
  const int64_t staged_width = (patch_cols * v.cols - 1) * d.stride_width + d.kernel_width;
  const int64_t taps = int64_t{d.kernel_height} * d.kernel_width;
  const int64_t weight_floats = d.in_channels * groups * taps * tap_stride(v);
  if (staged_width > 4096 || weight_floats > (int64_t{1} << 24)) return s;
  s.channel_groups = static_cast<int32_t>(groups);
  s.patch_rows = static_cast<int32_t>(patch_rows);
  s.patch_cols = static_cast<int32_t>(patch_cols);
  s.staged_width = static_cast<int32_t>(staged_width);
  s.weight_floats = static_cast<int32_t>(weight_floats);

  // The row pitch: a multiple of 4 floats (16-byte rows), the fewest simulated wavefronts.
  int64_t best_pitch = round_up(staged_width, 4);
  int best_wavefronts = INT_MAX;
  for (int64_t pitch = round_up(staged_width, 4); pitch < round_up(staged_width, 4) + 32;
       pitch += 4) {
    const int wavefronts = simulated_wavefronts(d, v, s, pitch);
    if (wavefronts < best_wavefronts) {
      best_wavefronts = wavefronts;
      best_pitch = pitch;
    }
  }
  s.row_pitch = static_cast<int32_t>(best_pitch);

  const int64_t one = shared_bytes(d, v, s, 1, patch_rows);
  if (one > static_cast<int64_t>(device.shared_per_block_optin)) return s;  // variant stays -1
  // As many blocks per SM as the kernel's launch bounds plan for, each with its 1 KB reserve.
  const int64_t occupancy_budget =
      std::min(static_cast<int64_t>(device.shared_per_block_optin),
               static_cast<int64_t>(device.shared_per_sm) / v.blocks_per_sm - 1024);
  const int64_t budget = std::max(one, occupancy_budget);
  int64_t max_samples = 1;
  while (max_samples < kMaxSamplesPerBlock &&
         shared_bytes(d, v, s, max_samples + 1, patch_rows) <= budget) {
    ++max_samples;
  }
  s.max_samples = static_cast<int32_t>(max_samples);
  s.variant = index;
  return s;
}

// The geometry of `s` for slabs of slab_rows patch rows (pointers, batch and samples per block
// are the caller's).
ConvPoolParams params_for(const ConvPoolPlan& plan, const ConvPoolShape& s, int64_t slab_rows) {
  const ConvPoolDesc& d = plan.desc;
  const Variant& v = kVariants[s.variant];
  ConvPoolParams p{};
  p.in_channels = d.in_channels;
  p.in_height = d.in_height;
  p.in_width = d.in_width;
  p.out_channels = d.out_channels;
  p.conv_height = d.conv_height;
  p.conv_width = d.conv_width;
  p.kernel_height = d.kernel_height;
  p.kernel_width = d.kernel_width;
  p.stride_height = d.stride_height;
  p.stride_width = d.stride_width;
  p.pool_window = d.pool_window;
  p.pool_max = d.pool == ConvPoolKind::Max ? 1 : 0;
  p.count_include_pad = d.count_include_pad ? 1 : 0;
  p.pool_padding_height = d.pool_padding_height;
  p.pool_padding_width = d.pool_padding_width;
  p.pooled_height = d.pooled_height;
  p.pooled_width = d.pooled_width;
  p.channel_groups = s.channel_groups;
  p.patch_rows = s.patch_rows;
  p.patch_cols = s.patch_cols;
  p.slab_rows = static_cast<int32_t>(slab_rows);
  p.staged_width = s.staged_width;
  p.row_pitch = s.row_pitch;
  p.plane_floats = static_cast<int32_t>(staged_rows(d, v, slab_rows) * s.row_pitch);
  p.origin_row = -d.pool_padding_height * d.stride_height - d.padding_height;
  p.origin_col = -d.pool_padding_width * d.stride_width - d.padding_width;
  p.weight_floats = s.weight_floats;
  p.epilogue = d.epilogue;
  return p;
}

}  // namespace

bool plan_conv_pool(const ConvPoolDesc& d, const DeviceInfo& device, ConvPoolPlan* plan) {
  // What the kernels implement.
  if (d.groups != 1 || d.dilation_height != 1 || d.dilation_width != 1) return false;
  if (d.kernel_height < 1 || d.kernel_height > kConvPoolMaxKernel || d.kernel_width < 1 ||
      d.kernel_width > kConvPoolMaxKernel) {
    return false;
  }
  if (d.stride_height < 1 || d.stride_width < 1 || d.padding_height < 0 || d.padding_width < 0) {
    return false;
  }
  constexpr int32_t kLargest = 1 << 14;  // keeps every in-kernel index in 32 bits
  for (int32_t extent : {d.in_channels, d.in_height, d.in_width, d.out_channels, d.conv_height,
                         d.conv_width, d.padding_height, d.padding_width}) {
    if (extent > kLargest) return false;
  }
  if (d.in_channels < 1 || d.out_channels < 1 || d.conv_height < 1 || d.conv_width < 1) {
    return false;
  }
  // The conv's output size must be the one the geometry gives (floor mode).
  if ((d.in_height + 2 * d.padding_height - d.kernel_height) / d.stride_height + 1 !=
          d.conv_height ||
      (d.in_width + 2 * d.padding_width - d.kernel_width) / d.stride_width + 1 != d.conv_width ||
      d.in_height + 2 * d.padding_height < d.kernel_height ||
      d.in_width + 2 * d.padding_width < d.kernel_width) {
    return false;
  }
  if (d.pool_window == 1) {
    if (d.pool_padding_height != 0 || d.pool_padding_width != 0 ||
        d.pooled_height != d.conv_height || d.pooled_width != d.conv_width) {
      return false;
    }
  } else if (d.pool_window == 2 && d.pool != ConvPoolKind::None) {
    if (d.pool_padding_height < 0 || d.pool_padding_height > 1 || d.pool_padding_width < 0 ||
        d.pool_padding_width > 1 ||
        d.pooled_height != (d.conv_height + 2 * d.pool_padding_height - 2) / 2 + 1 ||
        d.pooled_width != (d.conv_width + 2 * d.pool_padding_width - 2) / 2 + 1 ||
        d.conv_height + 2 * d.pool_padding_height < 2 ||
        d.conv_width + 2 * d.pool_padding_width < 2) {
      return false;
    }
  } else {
    return false;
  }
  if (d.epilogue.count < 0 || d.epilogue.count > kMaxEpilogueOps) return false;

  const int kernel_size = fixed_kernel_size(d);
  // The override conv_tile ("8x2x2": channels x rows x columns) takes that tile for large batches
  // where the layer has it, instead of the cheapest estimate.
  const std::string& forced_tile = device.overrides.conv_tile;
  ConvPoolPlan result;
  result.desc = d;
  double best_cost = 0.0;
  bool forced = false;
  for (int index = 0; index < kVariantCount; ++index) {
    const Variant& v = kVariants[index];
    if (v.kernel_size != kernel_size) continue;
    const ConvPoolShape shape = fit_variant(d, index, device);
    if (shape.variant < 0) continue;
    if (v.small) result.small = shape;
    const std::string tile =
        std::to_string(v.channels) + "x" + std::to_string(v.rows) + "x" + std::to_string(v.cols);
    if (forced) continue;
    if (tile == forced_tile) {
      result.large = shape;
      forced = true;
      continue;
    }
    const double cost = estimated_cost(d, v, shape);
    if (result.large.variant < 0 || cost < best_cost) {
      result.large = shape;
      best_cost = cost;
    }
  }
  if (result.large.variant < 0 || result.small.variant < 0) return false;
  result.small.weight_offset = result.large.weight_floats;
  *plan = result;
  return true;
}

bool prepare_conv_pool_kernels(const ConvPoolPlan& plan, int64_t max_batch,
                               const DeviceInfo& device) {
  const int bytes = static_cast<int>(device.shared_per_block_optin);
  // launch_conv_pool's choice: the large tile from sm_count samples on, the small one below.
  std::vector<const ConvPoolShape*> shapes = {&plan.small};
  if (max_batch >= std::max(1, device.sm_count)) shapes.push_back(&plan.large);
  for (const ConvPoolShape* shape : shapes) {
    if (cudaFuncSetAttribute(kVariants[shape->variant].kernel,
                             cudaFuncAttributeMaxDynamicSharedMemorySize, bytes) != cudaSuccess) {
      cudaGetLastError();
      return false;
    }
  }
  return true;
}

std::vector<float> build_conv_pool_weights(const ConvPoolPlan& plan,
                                           const std::vector<float>& weight) {
  const ConvPoolDesc& d = plan.desc;
  const int64_t taps = int64_t{d.kernel_height} * d.kernel_width;
  if (static_cast<int64_t>(weight.size()) != int64_t{d.out_channels} * d.in_channels * taps) {
    fail(FDNN_STATUS_INTERNAL_ERROR, "conv_pool: the filter has ", weight.size(),
         " values where out x in x kh x kw is ", int64_t{d.out_channels} * d.in_channels * taps);
  }
  std::vector<float> image(static_cast<size_t>(plan.large.weight_floats + plan.small.weight_floats),
                           0.0f);
  for (const ConvPoolShape* shape : {&plan.large, &plan.small}) {
    const Variant& v = kVariants[shape->variant];
    const int64_t channels = v.channels;
    const int64_t stride = tap_stride(v);
    float* out = image.data() + shape->weight_offset;
    // [in][channel group][tap][channel within the group, padded to a multiple of 4]
    for (int64_t c = 0; c < d.in_channels; ++c) {
      for (int64_t g = 0; g < shape->channel_groups; ++g) {
        for (int64_t tap = 0; tap < taps; ++tap) {
          for (int64_t j = 0; j < channels; ++j) {
            const int64_t o = g * channels + j;
            if (o >= d.out_channels) continue;
            out[((c * shape->channel_groups + g) * taps + tap) * stride + j] =
                weight[static_cast<size_t>((o * d.in_channels + c) * taps + tap)];
          }
        }
      }
    }
  }
  return image;
}

conv_tile::ConvPoolParams small_tile_whole_sample_params(const ConvPoolPlan& plan,
                                                         const float* weights, const float* bias) {
  conv_tile::ConvPoolParams p = params_for(plan, plan.small, plan.small.patch_rows);
  p.weight = weights + plan.small.weight_offset;
  p.bias = bias;
  p.samples_per_block = 1;
  return p;
}

void launch_conv_pool(const ConvPoolPlan& plan, const float* x, const float* weights,
                      const float* bias, float* y, int64_t batch, const DeviceInfo& device,
                      cudaStream_t stream) {
  if (batch <= 0) return;
  const ConvPoolDesc& d = plan.desc;
  const int64_t sms = std::max(1, device.sm_count);
  // Enough samples for a block per SM: the widest tile, as many samples per block as keep its
  // threads busy while still leaving its blocks per SM. Fewer: the small tile, one sample per
  // block, its rows split into slabs so that the blocks cover the SMs (with a warp's work each).
  const bool large = conv_pool_takes_large_tile(batch, device);
  const ConvPoolShape& s = large ? plan.large : plan.small;
  const Variant& v = kVariants[s.variant];
  const int64_t items_per_row = int64_t{s.channel_groups} * s.patch_cols;
  int64_t samples = 1;
  int64_t slab_rows = s.patch_rows;
  if (large) {
    const int64_t cap = std::min<int64_t>(
        s.max_samples, std::max<int64_t>(1, batch / (int64_t{v.blocks_per_sm} * sms)));
    samples = best_samples_for(items_per_row * s.patch_rows, cap);
  } else {
    const int64_t wanted_slabs = ceil_div(sms, batch);
    const int64_t fewest_rows = ceil_div(32, items_per_row);  // at least a warp's patches
    slab_rows = std::max(ceil_div(s.patch_rows, wanted_slabs), fewest_rows);
    slab_rows = std::min<int64_t>(slab_rows, s.patch_rows);
  }
  const int64_t blocks = ceil_div(batch, samples);
  const int64_t slabs = ceil_div(s.patch_rows, slab_rows);
  if (blocks > INT_MAX) {
    fail(FDNN_STATUS_UNSUPPORTED, "conv_pool: a batch of ", batch,
         " needs more blocks than one launch has; run smaller batches");
  }

  ConvPoolParams p = params_for(plan, s, slab_rows);
  p.x = x;
  p.weight = weights + s.weight_offset;
  p.bias = bias;
  p.y = y;
  p.batch = batch;
  p.samples_per_block = static_cast<int32_t>(samples);

  const int64_t items = int64_t{s.channel_groups} * samples * slab_rows * s.patch_cols;
  const int threads = static_cast<int>(std::min<int64_t>(kMaxThreads, round_up(items, 32)));
  const int64_t bytes = shared_bytes(d, v, s, samples, slab_rows);
  const dim3 grid(static_cast<unsigned>(blocks), static_cast<unsigned>(slabs));
  launch_kernel(v.kernel, v.name, grid, dim3(threads), static_cast<size_t>(bytes), stream, p);
}

}  // namespace fusednn::cuda
