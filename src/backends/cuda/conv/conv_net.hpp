// SPDX-License-Identifier: Apache-2.0
// A whole LeNet-class network in one launch: Conv2d (+ bias + epilogue + 2x2 pooling) stages
// followed by an optional fp32 MLP head, one sample per cluster of blocks, every intermediate in
// shared memory (conv_net.cu). At small batches the separate launches (one per conv + pool
// layer, one for the head) cost more than their arithmetic. Larger batches keep the per-layer
// kernels, which share filters and head weights across the samples of a block. The head runs in
// fp32 whatever the model's precision (the convolutions already do), so a reduced-precision
// model is more exact at the batches this takes.
//
// Query, then run: plan_conv_net() says at load whether the stages and the head fit a block's
// shared memory on this device (and readies the kernel); launch_conv_net() runs the batches
// plan.takes().
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "backends/cuda/conv/conv_pool.hpp"
#include "backends/cuda/mlp/fused_mlp.hpp"
#include "backends/cuda/platform/device_info.hpp"

namespace fusednn::cuda {

constexpr int kConvNetMaxStages = 4;

// One conv (+ pool) layer as the per-layer kernel has it: its plan (the small tile's filter image
// is the one read), the device image of build_conv_pool_weights() and the bias (or null).
struct ConvNetStageDesc {
  const ConvPoolPlan* plan = nullptr;
  const float* weights = nullptr;
  const float* bias = nullptr;
};

struct ConvNetLaunch;  // the kernel's parameters and launch shape (conv_net.cu)

struct ConvNetPlan {
  int64_t min_batch = 1;  // batches in [min_batch, max_batch] run as one launch
  int64_t max_batch = 0;
  std::shared_ptr<const ConvNetLaunch> launch;
  bool takes(int64_t batch) const {
    return launch != nullptr && batch >= min_batch && batch <= max_batch;
  }
};

// The batches the single launch takes unless the override single_launch says otherwise: those
// where it beats the per-layer kernels. It wins while every sample's cluster is resident at once
// (up to a dozen samples); from 16 the clusters of 8 blocks no longer fit together and run in
// waves, and the per-layer kernels are faster. Batch 1 is included because the kernel is a
// dependent launch with a short preamble.
constexpr int64_t kConvNetDefaultMinBatch = 1;
constexpr int64_t kConvNetDefaultMaxBatch = 12;

// Whether `stages` then `head` (fp32 layers as the fused MLP has them, weights on the device;
// empty for none) run as one kernel on this device (compute capability 9.0 and newer), for
// batches from min_batch to min(max_batch, SM count). The stages must feed one another and the
// head must read the last stage's output. Fills *plan and readies the kernel; false when
// anything does not fit. Never throws.
bool plan_conv_net(const std::vector<ConvNetStageDesc>& stages,
                   const std::vector<FusedMlpLayerDesc>& head, int64_t min_batch, int64_t max_batch,
                   const DeviceInfo& device, ConvNetPlan* plan);

// y[batch][output] = network(x[batch][input]) for a batch plan.takes().
void launch_conv_net(const ConvNetPlan& plan, const float* x, float* y, int64_t batch,
                     cudaStream_t stream);

}  // namespace fusednn::cuda
