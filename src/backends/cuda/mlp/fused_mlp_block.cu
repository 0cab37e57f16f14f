// SPDX-License-Identifier: Apache-2.0
// The fused MLP for a handful of rows on one block each, on any GPU. The chain's weights and
// biases live in one image in PyTorch's [out][in] order (rows padded to 4 floats), which the
// block stages whole into shared memory at its start, one cp.async group per layer, so that
// layer l waits only for its own. In a layer, each warp takes groups of 4 outputs: its lanes
// split k (16 bytes of a weight row and of an activation row each, conflict-free), and one
// butterfly across the warp sums the group's 4 x rows partial sums, halving the values a lane
// holds at each step. One block barrier per layer.
//
// Why: at batch 1 the work is tiny (21.6 K multiply-adds for the seed MLP) and the time is
// latency. Staging all the weights at once is cheap next to what a form with W^T split into
// k-chunks over threads costs, whose partial sums one thread per output adds one chunk after
// another: long dependent chains (42 partials for the seed's 10-wide last layer), runtime
// divisions and a second barrier per layer.
#include <cuda_pipeline.h>

#include <algorithm>

#include "backends/cuda/device/element_type.cuh"
#include "backends/cuda/device/epilogue.cuh"
#include "backends/cuda/device/kernel_timeline.cuh"
#include "backends/cuda/mlp/fused_mlp.hpp"
#include "backends/cuda/mlp/fused_mlp_row_image.hpp"
#include "backends/cuda/mlp/group_products.cuh"
#include "backends/cuda/platform/launch.hpp"

namespace fusednn::cuda {
namespace {

// Phase stamps of block 0 for bench/cuda/small_batch_mlp_timeline.cu (kernel_timeline.cuh):
// entry, staging issued, x stored, then each layer's start and end.
#define FDNN_BLOCK_TIMELINE(phase) \
  FDNN_TIMELINE(blockIdx.x == 0, phase, 4 + 2 * (p.layer_count - 1))

constexpr int kThreads = 512;
constexpr int kWarps = kThreads / 32;
constexpr int kGroup = 4;  // outputs a warp computes together

struct BlockParams {
  const void* x;                    // input_type's elements
  void* y;                          // output_type's elements
  int32_t input_type, output_type;  // ElementType values
  const float* image;               // build_fused_mlp_row_image's layout
  int64_t rows;
  int32_t layer_count;
  int32_t width4;        // activation row stride: the widest in4
  int32_t image_floats;  // all layers' weights and biases
  RowImageLayer layers[kFusedMlpMaxLayers];
};

template <int kRows>
__global__ void __launch_bounds__(kThreads)
    fused_mlp_block_kernel(const __grid_constant__ BlockParams p) {
  constexpr int kValues = kRows * kGroup;  // partial sums a lane holds per group
  constexpr int kLanesPerValue = 32 / kValues;
  extern __shared__ float4 shared_memory[];
  float* const image = reinterpret_cast<float*>(shared_memory);
  float* const act0 = image + p.image_floats;
  float* const act1 = act0 + kRows * p.width4;
  const int tid = threadIdx.x;
  const int lane = tid % 32, warp = tid / 32;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kRows;
  const int valid_rows = static_cast<int>(min(static_cast<int64_t>(kRows), p.rows - row0));
  FDNN_BLOCK_TIMELINE(0);

  for (int l = 0; l < p.layer_count; ++l) {
    const int begin = p.layers[l].weight_offset / 4;
    const int end = (l + 1 < p.layer_count ? p.layers[l + 1].weight_offset : p.image_floats) / 4;
    for (int q = begin + tid; q < end; q += kThreads) {
      __pipeline_memcpy_async(image + 4 * q, p.image + 4 * q, 16);
    }
    __pipeline_commit();
  }
  FDNN_BLOCK_TIMELINE(1);
  {
    // The rows of x, zero past the batch and in the row's padding (the padded weight columns
    // are zero, so these need only be finite).
    const int in = p.layers[0].in, in4 = p.layers[0].in4;
    for (int i = tid; i < kRows * in4; i += kThreads) {
      const int r = i / in4, k = i - r * in4;
      act0[r * p.width4 + k] =
          r < valid_rows && k < in ? load_widened(p.x, p.input_type, (row0 + r) * in + k) : 0.0f;
    }
  }
  FDNN_BLOCK_TIMELINE(2);

  for (int l = 0; l < p.layer_count; ++l) {
    const RowImageLayer& layer = p.layers[l];
    const bool last = l + 1 == p.layer_count;
    const float* in = (l & 1) ? act1 : act0;
    float* next = (l & 1) ? act0 : act1;
    const float* weight = image + layer.weight_offset;
    const float* bias = image + layer.bias_offset;

    __pipeline_wait_prior(p.layer_count - 1 - l);  // this layer's weights have landed
    __syncthreads();                               // ... for every thread, and so has `in`
    FDNN_BLOCK_TIMELINE(3 + 2 * l);

    for (int o0 = warp * kGroup; o0 < layer.out4; o0 += kWarps * kGroup) {
      const float total =
          group_products<kRows, kGroup>(weight + o0 * layer.in4, layer.in4, in, p.width4, lane);
      const int value = lane / kLanesPerValue;
      if (lane % kLanesPerValue == 0) {
        const int r = value / kGroup, o = o0 + value % kGroup;
        const float result = o < layer.out ? apply_epilogue(layer.epilogue, total + bias[o]) : 0.0f;
        if (last) {
          if (r < valid_rows && o < layer.out) {
            store_narrowed(p.y, p.output_type, (row0 + r) * layer.out + o, result);
          }
        } else {
          next[r * p.width4 + o] = r < valid_rows ? result : 0.0f;  // rows past the batch: zero
        }
      }
    }
    FDNN_BLOCK_TIMELINE(4 + 2 * l);
    // The next iteration's barrier orders these writes before their reads.
  }
}

template <int kRows>
size_t block_shared_bytes(int image_floats, int width4) {
  return sizeof(float) * (static_cast<size_t>(image_floats) + 2 * kRows * width4);
}

template <int kRows>
void launch_rows(const FusedMlpPlan& plan, TypedInput x, TypedOutput y, int64_t rows,
                 cudaStream_t stream, const char* name) {
  BlockParams p{};
  p.image_floats = fill_row_image_params(plan, plan.block_image, x, y, rows, &p);
  const size_t bytes = block_shared_bytes<kRows>(p.image_floats, p.width4);
  const auto blocks = static_cast<unsigned>((rows + kRows - 1) / kRows);
  launch_kernel(fused_mlp_block_kernel<kRows>, name, blocks, kThreads, bytes, stream, p);
}

}  // namespace

size_t fused_mlp_block_shared_bytes(const FusedMlpPlan& plan) {
  if (plan.layers.empty() || plan.layers.size() > static_cast<size_t>(kFusedMlpMaxLayers)) {
    return 0;
  }
  RowImageLayer layers[kFusedMlpMaxLayers];
  int width4 = 0;
  const int image_floats = row_image_layout(plan.layers, layers, &width4);
  return block_shared_bytes<kFusedMlpBlockRows>(image_floats, width4);
}

void prepare_fused_mlp_block_kernels(int64_t max_rows, const DeviceInfo& device) {
  // launch_fused_mlp_block's choice by rows.
  const int bytes = static_cast<int>(device.shared_per_block_optin);
  FDNN_CUDA_CHECK(cudaFuncSetAttribute(fused_mlp_block_kernel<1>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  if (max_rows >= 2) {
    FDNN_CUDA_CHECK(cudaFuncSetAttribute(fused_mlp_block_kernel<2>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  }
  if (max_rows >= 3) {
    FDNN_CUDA_CHECK(cudaFuncSetAttribute(fused_mlp_block_kernel<kFusedMlpBlockRows>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  }
}

void launch_fused_mlp_block(const FusedMlpPlan& plan, TypedInput x, TypedOutput y, int64_t rows,
                            cudaStream_t stream) {
  if (rows <= 1) {
    launch_rows<1>(plan, x, y, rows, stream, "fused_mlp_block_kernel<1 row>");
  } else if (rows == 2) {
    launch_rows<2>(plan, x, y, rows, stream, "fused_mlp_block_kernel<2 rows>");
  } else {
    launch_rows<kFusedMlpBlockRows>(plan, x, y, rows, stream, "fused_mlp_block_kernel<4 rows>");
  }
}

}  // namespace fusednn::cuda
