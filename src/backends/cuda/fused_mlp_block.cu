// The fused MLP for a handful of rows on one block each, on any GPU: every layer's weights are
// put in flight at once (one cp.async group per layer, so layer l waits only for its own), and
// each dot product is split over up to 42 threads that each own a contiguous piece of k, with
// the pieces summed through shared memory. Two block barriers per layer.
//
// Why: at batch 1 the work is tiny (21.6 K multiply-adds for the seed MLP) and the time is
// latency: the weights' trip from L2 (86 KB into one SM, ~0.7 us) and each layer's dependent
// chain. Version 2 (one thread per dot product) had ~300 dependent steps per thread; the cluster
// form spreads the weights over 8 SMs but pays cluster barriers and 8-way bank conflicts on
// its column slices (bench/cuda/NOTES.md). Here a thread's chain is ~K/chunks steps (25 for
// the seed's first layer), lanes read consecutive columns of W^T (conflict-free), and the
// later layers' weights arrive while the first one is computed.
#include <cuda_pipeline.h>

#include <algorithm>

#include "backends/cuda/epilogue.cuh"
#include "backends/cuda/fused_mlp.hpp"
#include "backends/cuda/launch.hpp"

namespace fusednn::cuda {
namespace {

constexpr int kThreads = 512;

struct BlockLayer {
  const float* weight_t;  // [in][padded_out]
  const float* bias;
  int32_t in, out, padded_out;
  int32_t weight_offset;  // floats into shared memory
  DeviceEpilogue epilogue;
};

struct BlockParams {
  const float* x;
  float* y;
  int64_t rows;
  int32_t layer_count;
  int32_t width;           // activation row stride: the widest layer input
  int32_t weight_floats;   // all layers' W^T, each on 16 bytes
  BlockLayer layers[kFusedMlpMaxLayers];
};

template <int kRows>
__global__ void __launch_bounds__(kThreads) fused_mlp_block_kernel(const __grid_constant__ BlockParams p) {
  // Outputs one thread reduces: kRows x padded_out can exceed kThreads (the planner keeps
  // padded_out <= kFusedMlpMaxWidth).
  constexpr int kOutputsPerThread = (kRows * kFusedMlpMaxWidth + kThreads - 1) / kThreads;
  extern __shared__ float4 shared_memory[];
  float* const weights = reinterpret_cast<float*>(shared_memory);
  float* const act0 = weights + p.weight_floats;
  float* const act1 = act0 + kRows * p.width;
  float* const partials = act1 + kRows * p.width;  // kThreads x kRows
  const int tid = threadIdx.x;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kRows;
  const int valid_rows = static_cast<int>(min(static_cast<int64_t>(kRows), p.rows - row0));

  for (int l = 0; l < p.layer_count; ++l) {
    const BlockLayer& layer = p.layers[l];
    const int quads = layer.in * layer.padded_out / 4;
    for (int q = tid; q < quads; q += kThreads) {
      __pipeline_memcpy_async(weights + layer.weight_offset + 4 * q, layer.weight_t + 4 * q, 16);
    }
    __pipeline_commit();
  }
  {
    const int in0 = p.layers[0].in;
    for (int i = tid; i < kRows * in0; i += kThreads) {
      const int r = i / in0;
      act0[r * p.width + (i - r * in0)] = r < valid_rows ? p.x[(row0 + r) * in0 + (i - r * in0)] : 0.0f;
    }
  }

  for (int l = 0; l < p.layer_count; ++l) {
    const BlockLayer& layer = p.layers[l];
    const bool last = l + 1 == p.layer_count;
    const float* in = (l & 1) ? act1 : act0;
    float* next = (l & 1) ? act0 : act1;
    const int cols = layer.padded_out;
    const int chunks = kThreads / cols;  // padded_out <= kFusedMlpMaxWidth, so at least 2
    const int per_chunk = (layer.in + chunks - 1) / chunks;

    // This thread's outputs for the reduction below (kRows x cols of them, up to two per thread:
    // 4 rows x 256 columns are 1024): their biases now, off the critical path.
    float bias[kOutputsPerThread];
#pragma unroll
    for (int i = 0; i < kOutputsPerThread; ++i) {
      const int o = tid + i * kThreads;
      const int out_r = o / cols, out_n = o - out_r * cols;
      bias[i] = out_r < valid_rows && out_n < layer.out && layer.bias ? __ldg(layer.bias + out_n) : 0.0f;
    }

    __pipeline_wait_prior(p.layer_count - 1 - l);  // this layer's weights have landed
    __syncthreads();                               // ... for every thread, and so has `in`

    const int n = tid % cols, chunk = tid / cols;
    if (chunk < chunks) {
      const int k_begin = chunk * per_chunk;
      const int k_end = min(layer.in, k_begin + per_chunk);
      const float* w = weights + layer.weight_offset + n;
      float acc[kRows];
#pragma unroll
      for (int r = 0; r < kRows; ++r) acc[r] = 0.0f;
#pragma unroll 4
      for (int k = k_begin; k < k_end; ++k) {
        const float weight = w[k * cols];
#pragma unroll
        for (int r = 0; r < kRows; ++r) acc[r] = fmaf(in[r * p.width + k], weight, acc[r]);
      }
#pragma unroll
      for (int r = 0; r < kRows; ++r) partials[(chunk * kRows + r) * cols + n] = acc[r];
    }
    __syncthreads();

#pragma unroll
    for (int i = 0; i < kOutputsPerThread; ++i) {
      const int o = tid + i * kThreads;
      if (o < kRows * cols) {
        const int out_r = o / cols, out_n = o - out_r * cols;
        float sum = 0.0f;
        for (int c = 0; c < chunks; ++c) sum += partials[(c * kRows + out_r) * cols + out_n];
        if (out_r < valid_rows && out_n < layer.out) {
          const float value = apply_epilogue(layer.epilogue, sum + bias[i]);
          if (last) {
            p.y[(row0 + out_r) * layer.out + out_n] = value;
          } else {
            next[out_r * p.width + out_n] = value;
          }
        } else if (!last && out_n < layer.out) {
          next[out_r * p.width + out_n] = 0.0f;  // rows past the batch stay finite
        }
      }
    }
    // The next iteration's barrier orders these writes before their reads.
  }
}

template <int kRows>
size_t block_shared_bytes(const FusedMlpPlan& plan, int* weight_floats, int* width) {
  int floats = 0, widest = 0;
  for (const FusedMlpLayerDesc& layer : plan.layers) {
    floats += (layer.in * layer.padded_out + 3) / 4 * 4;
    widest = std::max(widest, layer.in);
  }
  *weight_floats = floats;
  *width = widest;
  return sizeof(float) * (static_cast<size_t>(floats) + 2 * kRows * widest + kThreads * kRows);
}

template <int kRows>
void launch_rows(const FusedMlpPlan& plan, const float* x, float* y, int64_t rows,
                 cudaStream_t stream, const char* name) {
  BlockParams p{};
  p.x = x;
  p.y = y;
  p.rows = rows;
  p.layer_count = static_cast<int32_t>(plan.layers.size());
  const size_t bytes = block_shared_bytes<kRows>(plan, &p.weight_floats, &p.width);
  int offset = 0;
  for (int l = 0; l < p.layer_count; ++l) {
    const FusedMlpLayerDesc& desc = plan.layers[l];
    BlockLayer& layer = p.layers[l];
    layer.weight_t = desc.weight_t;
    layer.bias = desc.bias;
    layer.in = desc.in;
    layer.out = desc.out;
    layer.padded_out = desc.padded_out;
    layer.weight_offset = offset;
    layer.epilogue = desc.epilogue;
    offset += (desc.in * desc.padded_out + 3) / 4 * 4;
  }
  const auto blocks = static_cast<unsigned>((rows + kRows - 1) / kRows);
  launch_kernel(fused_mlp_block_kernel<kRows>, name, blocks, kThreads, bytes, stream, p);
}

}  // namespace

size_t fused_mlp_block_shared_bytes(const FusedMlpPlan& plan) {
  int floats = 0, width = 0;
  return block_shared_bytes<kFusedMlpBlockRows>(plan, &floats, &width);
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

void launch_fused_mlp_block(const FusedMlpPlan& plan, const float* x, float* y, int64_t rows,
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
