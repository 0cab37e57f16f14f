// The fused MLP for small batches on Hopper and newer: a cluster of 8 blocks per 8 rows, each
// block owning one eighth of every layer's output columns. Each block prefetches only its
// column slice of every layer's weights (all layers at once, so 8 SMs pull the weights in
// parallel), computes its outputs with the dot products split across up to 32 threads (short
// dependent chains), and writes them into every block's copy of the next layer's input through
// distributed shared memory; one cluster barrier per layer.
//
// Why: version 1 ran batch 1 of the seed MLP on one block of one SM, ~9 us of GPU time: 86 KB of
// weights through one SM and ~300 dependent shared-load + FMA steps per thread. Here each SM
// loads ~11 KB and each thread's chain is ~K/16 steps plus a shuffle tree.
#include <cooperative_groups.h>
#include <cuda_pipeline.h>

#include <algorithm>

#include "backends/cuda/epilogue.cuh"
#include "backends/cuda/fused_mlp.hpp"
#include "backends/cuda/launch.hpp"

namespace fusednn::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kBlocks = kFusedMlpClusterBlocks;
constexpr int kRows = kFusedMlpClusterRows;
constexpr int kLd = kRows + 1;  // activation row stride: odd, so strided reads spread over banks

// Cluster dimensions are a property of the sm_90+ kernel; older targets compile an empty body
// (the launcher never runs it there).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#define FDNN_CLUSTER_DIMS
#else
#define FDNN_CLUSTER_DIMS __cluster_dims__(kFusedMlpClusterBlocks, 1, 1)
#endif

struct ClusterLayer {
  const float* weight_t;  // [in][padded_out]
  const float* bias;
  int32_t in, out, padded_out;
  int32_t slice;          // columns per block, a multiple of 4
  int32_t weight_offset;  // where this layer's slice starts in the block's weight area (floats)
  DeviceEpilogue epilogue;
};

struct ClusterParams {
  const float* x;
  float* y;
  int64_t rows;
  int32_t layer_count;
  int32_t even_width;
  int32_t odd_width;
  int32_t activation_floats;  // act0 + act1, rounded up to a multiple of 4
  ClusterLayer layers[kFusedMlpMaxLayers];
};

__global__ void FDNN_CLUSTER_DIMS __launch_bounds__(kThreads)
fused_mlp_cluster_kernel(const __grid_constant__ ClusterParams p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  const int rank = static_cast<int>(cluster.block_rank());
  extern __shared__ float4 shared_memory[];
  float* const act0 = reinterpret_cast<float*>(shared_memory);
  float* const act1 = act0 + p.even_width * kLd;
  float* const weights = act0 + p.activation_floats;
  const int tid = threadIdx.x;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x / kBlocks) * kRows;
  const int valid_rows = static_cast<int>(min(static_cast<int64_t>(kRows), p.rows - row0));

  // This block's column slice of every layer, all in flight at once.
  for (int l = 0; l < p.layer_count; ++l) {
    const ClusterLayer& layer = p.layers[l];
    const int c0 = rank * layer.slice;
    const int cols = min(layer.slice, layer.padded_out - c0);
    if (cols <= 0) continue;
    const int quads = cols / 4;
    for (int q = tid; q < layer.in * quads; q += kThreads) {
      const int r = q / quads;
      const int c = q - r * quads;
      __pipeline_memcpy_async(weights + layer.weight_offset + r * layer.slice + c * 4,
                              layer.weight_t + static_cast<int64_t>(r) * layer.padded_out + c0 + c * 4,
                              16);
    }
  }
  __pipeline_commit();
  {
    const int in0 = p.layers[0].in;
    const float* x = p.x + row0 * in0;
    for (int index = tid; index < kRows * in0; index += kThreads) {
      const int r = index / in0;
      const int k = index - r * in0;
      act0[k * kLd + r] = r < valid_rows ? x[static_cast<int64_t>(r) * in0 + k] : 0.0f;
    }
  }
  __pipeline_wait_prior(0);
  // Every block of the cluster is running (its shared memory may be written) and has its
  // weights and input.
  cluster.sync();

  const int lane = tid & 31;
  for (int l = 0; l < p.layer_count; ++l) {
    const ClusterLayer& layer = p.layers[l];
    const bool last = l + 1 == p.layer_count;
    const float* in = (l & 1) ? act1 : act0;
    float* next = (l & 1) ? act0 : act1;
    const int c0 = rank * layer.slice;
    const int cols = min(layer.slice, layer.padded_out - c0);
    const int units = cols > 0 ? valid_rows * cols : 0;
    if (units > 0) {
      // Threads per dot product: a power of two, at most a warp, as many as the block allows.
      int split = 1;
      while (split < 32 && units * split * 2 <= kThreads) split *= 2;
      const unsigned group_mask =
          split == 32 ? 0xffffffffu : ((1u << split) - 1u) << (lane & ~(split - 1));
      const int part = tid & (split - 1);
      const float* w_slice = weights + layer.weight_offset;
      for (int unit = tid / split; unit < units; unit += kThreads / split) {
        const int r = unit / cols;
        const int c = unit - r * cols;
        float sum = 0.0f;
        for (int k = part; k < layer.in; k += split) {
          sum = fmaf(in[k * kLd + r], w_slice[k * layer.slice + c], sum);
        }
        for (int offset = split / 2; offset > 0; offset /= 2) {
          sum += __shfl_xor_sync(group_mask, sum, offset);
        }
        const int col = c0 + c;
        if (part == 0 && col < layer.out) {
          const float value =
              apply_epilogue(layer.epilogue, sum + (layer.bias ? layer.bias[col] : 0.0f));
          if (last) {
            p.y[(row0 + r) * layer.out + col] = value;
          } else {
#pragma unroll
            for (int b = 0; b < kBlocks; ++b) {
              cluster.map_shared_rank(next, b)[col * kLd + r] = value;
            }
          }
        }
      }
    }
    // The next layer's input is complete in every block, and nobody still reads this one.
    if (!last) cluster.sync();
  }
#endif
}

}  // namespace

size_t fused_mlp_cluster_shared_bytes(const FusedMlpPlan& plan) {
  size_t floats = (static_cast<size_t>(plan.even_width + plan.odd_width) * kLd + 3) / 4 * 4;
  for (const FusedMlpLayerDesc& layer : plan.layers) {
    const int slice = ((layer.padded_out + kBlocks - 1) / kBlocks + 3) / 4 * 4;
    floats += static_cast<size_t>(layer.in) * slice;
  }
  return floats * sizeof(float);
}

bool fused_mlp_cluster_fits(size_t shared_bytes) {
  // Whether a cluster of 8 blocks with this much shared memory each can be resident at all. The
  // query answers for the kernel's current limit, 48 KB until it is raised: without raising it
  // first, chains past 48 KB per block (LeNet-5's 400-120-84-10 head) never took this form once
  // kernels were readied per plan, and LeNet-5 at batch 1 ran its head on one block of the
  // tiled kernel (20 us of 30 per call, H100, 2026-11-23).
  if (cudaFuncSetAttribute(fused_mlp_cluster_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           static_cast<int>(shared_bytes)) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(kBlocks);
  config.blockDim = dim3(kThreads);
  config.dynamicSmemBytes = shared_bytes;
  int clusters = 0;
  if (cudaOccupancyMaxActiveClusters(&clusters, fused_mlp_cluster_kernel, &config) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return clusters > 0;
}

void prepare_fused_mlp_cluster_kernel(const DeviceInfo& device) {
  if (device.major < 9) return;
  FDNN_CUDA_CHECK(cudaFuncSetAttribute(fused_mlp_cluster_kernel,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(device.shared_per_block_optin)));
}

void launch_fused_mlp_cluster(const FusedMlpPlan& plan, const float* x, float* y, int64_t rows,
                              cudaStream_t stream) {
  ClusterParams p{};
  p.x = x;
  p.y = y;
  p.rows = rows;
  p.layer_count = static_cast<int32_t>(plan.layers.size());
  p.even_width = plan.even_width;
  p.odd_width = plan.odd_width;
  p.activation_floats = ((plan.even_width + plan.odd_width) * kLd + 3) / 4 * 4;
  int offset = 0;
  for (int l = 0; l < p.layer_count; ++l) {
    const FusedMlpLayerDesc& desc = plan.layers[l];
    ClusterLayer& layer = p.layers[l];
    layer.weight_t = desc.weight_t;
    layer.bias = desc.bias;
    layer.in = desc.in;
    layer.out = desc.out;
    layer.padded_out = desc.padded_out;
    layer.slice = ((desc.padded_out + kBlocks - 1) / kBlocks + 3) / 4 * 4;
    layer.weight_offset = offset;
    layer.epilogue = desc.epilogue;
    offset += desc.in * layer.slice;
  }
  const auto clusters = static_cast<unsigned>((rows + kRows - 1) / kRows);
  launch_kernel(fused_mlp_cluster_kernel, "fused_mlp_cluster_kernel", clusters * kBlocks, kThreads,
                plan.cluster_shared_bytes, stream, p);
}

}  // namespace fusednn::cuda
