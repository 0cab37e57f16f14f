// A whole LeNet-class network in one launch: Conv2d (+ bias + epilogue + 2x2 pooling) stages
// followed by an optional fp32 MLP head, one sample per block, every intermediate in shared
// memory. At small batches the separate launches (one per conv + pool layer, one for the head)
// cost more than their arithmetic: LeNet-5 at batch 1 took 21.7 us as a graph of three kernels
// (H100, 2026-11-23). Larger batches keep the per-layer kernels, which share filters and head
// weights across the samples of a block.
//
// Query, then run: plan_conv_net() says at load whether the stages and the head fit one block's
// shared memory on this device (and readies the kernel); launch_conv_net() runs batches up to
// plan.max_batch, one block per sample.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "backends/cuda/conv_pool.hpp"
#include "backends/cuda/device_info.hpp"
#include "backends/cuda/fused_mlp.hpp"

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
  int64_t max_batch = 0;  // batches up to this run as one launch; 0: never
  std::shared_ptr<const ConvNetLaunch> launch;
};

// The knob: on unless FUSEDNN_CUDA_SINGLE_LAUNCH=0, for comparing (read when a backend is created).
bool conv_net_enabled();

// Whether `stages` then `head` (fp32 layers as the fused MLP has them, weights on the device;
// empty for none) run as one kernel on this device, for batches up to min(max_batch, SM count).
// The stages must feed one another and the head must read the last stage's output. Fills *plan
// and sets the kernel's shared-memory attribute; false when anything does not fit. Never throws.
bool plan_conv_net(const std::vector<ConvNetStageDesc>& stages,
                   const std::vector<FusedMlpLayerDesc>& head, int64_t max_batch,
                   const DeviceInfo& device, ConvNetPlan* plan);

// y[batch][output] = network(x[batch][input]) for 1 <= batch <= plan.max_batch.
void launch_conv_net(const ConvNetPlan& plan, const float* x, float* y, int64_t batch,
                     cudaStream_t stream);

}  // namespace fusednn::cuda
