// SPDX-License-Identifier: Apache-2.0
// Conv2d, direct, in two forms.
//
// Staged (when a sample's input planes and a block's filters fit in 48 KB of shared memory,
// which covers LeNet-class models): one block per (sample, group of output channels) copies the
// sample's input, zero-padded, and its filters into shared memory once, then each thread computes
// outputs with no bounds checks and every operand from shared memory. Reading the input once per
// block instead of once per tap is what lets a LeNet-class convolution run near the fp32 rate.
//
// Global (anything larger): one thread per output element sums its window from global memory
// through L1; neighbouring threads compute neighbouring columns, so reads coalesce and the
// filter is a broadcast. Correct for every geometry, not fast for wide ResNets (an implicit GEMM
// would be the next step there).
#include "backends/cuda/conv/conv2d.hpp"

#include <algorithm>

#include "backends/cuda/device/epilogue.cuh"
#include "backends/cuda/platform/launch.hpp"

namespace fusednn::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads) conv2d_kernel(Conv2dArgs args) {
  const int64_t per_plane = static_cast<int64_t>(args.out_height) * args.out_width;
  const int64_t per_sample = per_plane * args.out_channels;
  const int64_t count = per_sample * args.batch;
  const int group_in = args.in_channels / args.groups;
  const int group_out = args.out_channels / args.groups;
  const int64_t in_plane = static_cast<int64_t>(args.in_height) * args.in_width;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride) {
    const int64_t n = i / per_sample;
    const int64_t within_sample = i - n * per_sample;
    const int oc = static_cast<int>(within_sample / per_plane);
    const int within_plane = static_cast<int>(within_sample - oc * per_plane);
    const int oh = within_plane / args.out_width;
    const int ow = within_plane - oh * args.out_width;
    const int first_in = (oc / group_out) * group_in;
    const int row0 = oh * args.stride_height - args.padding_height;
    const int col0 = ow * args.stride_width - args.padding_width;
    const float* w =
        args.weight + static_cast<int64_t>(oc) * group_in * args.kernel_height * args.kernel_width;
    const float* x = args.x + (n * args.in_channels + first_in) * in_plane;
    float acc = 0.0f;
    for (int c = 0; c < group_in; ++c) {
      for (int kh = 0; kh < args.kernel_height; ++kh) {
        const int ih = row0 + kh * args.dilation_height;
        const bool row_inside = ih >= 0 && ih < args.in_height;
        for (int kw = 0; kw < args.kernel_width; ++kw) {
          const int iw = col0 + kw * args.dilation_width;
          const float weight = w[kw];
          if (row_inside && iw >= 0 && iw < args.in_width) {
            acc = fmaf(x[static_cast<int64_t>(ih) * args.in_width + iw], weight, acc);
          }
        }
        w += args.kernel_width;
      }
      x += in_plane;
    }
    if (args.bias) acc += args.bias[oc];
    args.y[i] = apply_epilogue(args.epilogue, acc);
  }
}

constexpr int kStagedSharedBytes = 48 * 1024;

struct StagedConv {
  Conv2dArgs args;
  int32_t padded_height, padded_width;  // the input plane with its zero border
  int32_t channels_per_block;           // output channels one block computes
};

__global__ void __launch_bounds__(kThreads)
    conv2d_staged_kernel(const __grid_constant__ StagedConv staged) {
  extern __shared__ float shared[];
  const Conv2dArgs& args = staged.args;
  const int n = blockIdx.x;
  const int oc0 = blockIdx.y * staged.channels_per_block;
  const int oc_count = min(staged.channels_per_block, args.out_channels - oc0);
  const int group_in = args.in_channels / args.groups;
  const int group_out = args.out_channels / args.groups;
  const int taps = args.kernel_height * args.kernel_width;
  const int plane = staged.padded_height * staged.padded_width;
  float* input = shared;                               // [in_channels][padded h][padded w]
  float* filters = shared + args.in_channels * plane;  // [oc_count][group_in][kh][kw]

  const float* x =
      args.x + static_cast<int64_t>(n) * args.in_channels * args.in_height * args.in_width;
  for (int index = threadIdx.x; index < args.in_channels * plane; index += blockDim.x) {
    const int c = index / plane;
    const int within = index - c * plane;
    const int row = within / staged.padded_width - args.padding_height;
    const int col = within % staged.padded_width - args.padding_width;
    const bool inside = row >= 0 && row < args.in_height && col >= 0 && col < args.in_width;
    input[index] =
        inside ? x[(static_cast<int64_t>(c) * args.in_height + row) * args.in_width + col] : 0.0f;
  }
  const float* w = args.weight + static_cast<int64_t>(oc0) * group_in * taps;
  for (int index = threadIdx.x; index < oc_count * group_in * taps; index += blockDim.x) {
    filters[index] = w[index];
  }
  __syncthreads();

  const int per_plane = args.out_height * args.out_width;
  float* y = args.y + (static_cast<int64_t>(n) * args.out_channels + oc0) * per_plane;
  for (int index = threadIdx.x; index < oc_count * per_plane; index += blockDim.x) {
    const int o = index / per_plane;
    const int within = index - o * per_plane;
    const int oh = within / args.out_width;
    const int ow = within - oh * args.out_width;
    const int oc = oc0 + o;
    const float* in = input + (oc / group_out) * group_in * plane +
                      oh * args.stride_height * staged.padded_width + ow * args.stride_width;
    const float* f = filters + o * group_in * taps;
    float acc = 0.0f;
    for (int c = 0; c < group_in; ++c) {
      for (int kh = 0; kh < args.kernel_height; ++kh) {
        const float* row = in + kh * args.dilation_height * staged.padded_width;
        for (int kw = 0; kw < args.kernel_width; ++kw) {
          acc = fmaf(row[kw * args.dilation_width], f[kw], acc);
        }
        f += args.kernel_width;
      }
      in += plane;
    }
    if (args.bias) acc += args.bias[oc];
    y[index] = apply_epilogue(args.epilogue, acc);
  }
}

// A sample's padded input and one output channel's filters, in floats.
int64_t staged_input_floats(const Conv2dArgs& args) {
  return static_cast<int64_t>(args.in_channels) * (args.in_height + 2 * args.padding_height) *
         (args.in_width + 2 * args.padding_width);
}
int64_t staged_filter_floats(const Conv2dArgs& args) {
  return static_cast<int64_t>(args.in_channels / args.groups) * args.kernel_height *
         args.kernel_width;
}

}  // namespace

bool conv2d_fits_staged(const Conv2dArgs& args) {
  return (staged_input_floats(args) + staged_filter_floats(args)) * int64_t{sizeof(float)} <=
         kStagedSharedBytes;
}

void launch_conv2d(const Conv2dArgs& args, const DeviceInfo& device, cudaStream_t stream) {
  const int64_t count =
      args.batch * args.out_channels * static_cast<int64_t>(args.out_height) * args.out_width;
  if (count <= 0) return;
  StagedConv staged;
  staged.args = args;
  staged.padded_height = args.in_height + 2 * args.padding_height;
  staged.padded_width = args.in_width + 2 * args.padding_width;
  const int64_t input_floats = staged_input_floats(args);
  const int64_t filter_floats = staged_filter_floats(args);
  // Enough blocks to cover the SMs when the batch is small: split the output channels.
  const int64_t wanted_groups =
      std::max<int64_t>(1, (device.sm_count + args.batch - 1) / args.batch);
  int64_t per_block = std::max<int64_t>(1, (args.out_channels + wanted_groups - 1) / wanted_groups);
  while (per_block > 1 &&
         (input_floats + per_block * filter_floats) * int64_t{sizeof(float)} > kStagedSharedBytes) {
    per_block = (per_block + 1) / 2;
  }
  const int64_t shared_bytes = (input_floats + per_block * filter_floats) * int64_t{sizeof(float)};
  if (shared_bytes <= kStagedSharedBytes && args.batch <= 0x7fffffff) {
    staged.channels_per_block = static_cast<int32_t>(per_block);
    const dim3 grid(static_cast<unsigned>(args.batch),
                    static_cast<unsigned>((args.out_channels + per_block - 1) / per_block));
    launch_kernel(conv2d_staged_kernel, "conv2d_staged_kernel", grid, kThreads,
                  static_cast<size_t>(shared_bytes), stream, staged);
    return;
  }
  const unsigned blocks = grid_for(count, kThreads, static_cast<long long>(device.sm_count) * 16);
  launch_kernel(conv2d_kernel, "conv2d_kernel", blocks, kThreads, 0, stream, args);
}

}  // namespace fusednn::cuda
