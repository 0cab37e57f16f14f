// SPDX-License-Identifier: Apache-2.0
// Conv2d + bias + epilogue + pooling in one launch, for LeNet-class layers: a block stages a tile
// of samples (zero-padded) and every filter in shared memory, each thread computes a register
// tile of output channels x conv positions and reduces its pooling windows in registers, so the
// convolution's output never reaches global memory. The same kernel runs a Conv2d with no pooling
// after it (a 1x1 "window").
//
// Query, then run: plan_conv_pool() says at load whether a layer fits (groups 1, dilation 1,
// kernels up to kConvPoolMaxKernel, one sample's padded input planes and the filters in shared
// memory; pooling windows equal to their stride, 1 or 2 on both axes) and picks the register
// tiles; build_conv_pool_weights() lays the filters out as the chosen kernels read them;
// launch_conv_pool() picks samples per block and row slabs for the batch and launches.
//
// On unless the override fused_conv=0 (selection_overrides.hpp). The register-tile code itself
// is in conv_pool_tile.cuh, which conv_net.cu shares.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "backends/cuda/device/device_epilogue.hpp"
#include "backends/cuda/platform/device_info.hpp"

namespace fusednn::cuda {

constexpr int kConvPoolMaxKernel = 7;

enum class ConvPoolKind : int32_t {
  None = 0,     // the convolution alone (pool_window 1)
  Max = 1,      // MaxPool2d, PyTorch semantics (a NaN wins)
  Average = 2,  // AvgPool2d, count_include_pad as given
};

// One Conv2d step and the pooling step it absorbs, as the plan gives them.
struct ConvPoolDesc {
  int32_t in_channels = 0, in_height = 0, in_width = 0;
  int32_t out_channels = 0, conv_height = 0, conv_width = 0;
  int32_t kernel_height = 1, kernel_width = 1;
  int32_t stride_height = 1, stride_width = 1;
  int32_t padding_height = 0, padding_width = 0;
  int32_t dilation_height = 1, dilation_width = 1;
  int32_t groups = 1;
  ConvPoolKind pool = ConvPoolKind::None;
  int32_t pool_window = 1;  // the pooling kernel, equal to its stride on both axes: 1 or 2
  int32_t pool_padding_height = 0, pool_padding_width = 0;
  int32_t pooled_height = 0, pooled_width = 0;  // the conv's output size when pool is None
  bool count_include_pad = true;
  DeviceEpilogue epilogue;  // applied to every conv output, before pooling
};

// One register-tile kernel's fit for a layer.
struct ConvPoolShape {
  int variant = -1;            // index into conv_pool.cu's kernel table; -1: none
  int32_t channel_groups = 0;  // ceil(out_channels / channels per thread)
  int32_t patch_rows = 0;      // thread patches down and across one sample's (padded) output
  int32_t patch_cols = 0;
  int32_t staged_width = 0;   // input columns a block stages
  int32_t row_pitch = 0;      // floats per staged row (multiple of 4, picked for few conflicts)
  int32_t weight_floats = 0;  // this kernel's filter image (multiple of 4)
  int32_t weight_offset = 0;  // where that image starts in build_conv_pool_weights()'s result
  int32_t max_samples = 1;    // samples per block the shared-memory budget allows
};

struct ConvPoolPlan {
  ConvPoolDesc desc;
  ConvPoolShape large;  // batches that give every SM a block: the widest register tile
  ConvPoolShape small;  // smaller batches: 4 channels x 2 x 2 per thread, rows split over blocks
};

// Whether `desc` runs fused on this device; fills *plan when it does. Never throws.
bool plan_conv_pool(const ConvPoolDesc& desc, const DeviceInfo& device, ConvPoolPlan* plan);

// Lets the kernels `plan` launches for batches up to max_batch use the device's opt-in shared
// memory (at load). Only those: setting the attribute loads a kernel, and a first model in a
// process waits for each kernel it loads, so setting it on every conv kernel would multiply the
// first model's start-up time. false when the device refuses: the layer then runs on the
// separate kernels, which report the device's state.
bool prepare_conv_pool_kernels(const ConvPoolPlan& plan, int64_t max_batch,
                               const DeviceInfo& device);

// The filters ([out][in][kh][kw], as the plan holds them) in the layouts the plan's kernels read,
// one after the other, zeros for channels past out_channels.
std::vector<float> build_conv_pool_weights(const ConvPoolPlan& plan,
                                           const std::vector<float>& weight);

// Whether launch_conv_pool() runs `batch` samples with the plan's large tile (enough samples for
// a block per SM) rather than its small one.
inline bool conv_pool_takes_large_tile(int64_t batch, const DeviceInfo& device) {
  return batch >= int64_t{device.sm_count > 1 ? device.sm_count : 1};
}

// y[batch][out][pooled h][pooled w] from x[batch][in][h][w]; weights from
// build_conv_pool_weights() (16-byte aligned), bias [out] or null.
void launch_conv_pool(const ConvPoolPlan& plan, const float* x, const float* weights,
                      const float* bias, float* y, int64_t batch, const DeviceInfo& device,
                      cudaStream_t stream);

}  // namespace fusednn::cuda
