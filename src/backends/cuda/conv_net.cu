// A whole convolutional network in one launch (see conv_net.hpp for when it applies).
//
// Napkin math, LeNet-5 at batch 1 (one block of 512 threads on one SM):
//   conv1 117.6 K and conv2 240 K multiply-adds: ~2.8 K clocks of one SM's 128 fp32 lanes, so
//   ~1.4 us at 1.98 GHz if every issue slot were an FFMA; expected ~2-3 us with the small tile's
//   loads and conv2's split over input channels (100 patches x 4 channels alone would leave
//   three quarters of the threads idle).
//   head 400-120-84-10: 58 K multiply-adds, but 236 KB of weights from L2 into one SM (~64 B per
//   clock: ~1.9 us). The first layer's 192 KB are copied into shared memory with cp.async at the
//   start, so that they arrive while the convolutions run; the rest (44 KB) is read from L2.
//   Expected: ~4-5 us of kernel, against the ~2-3 us each of the three kernels it replaces plus
//   their launch gaps.
//
// The work, per block (one sample): cp.async every stage's filters (group 1), then as many rows
// of the head's first weight matrix as shared memory holds (group 2). Each stage stages its input
// planes (the model input, or the previous stage's output in shared memory) zero-padded as
// conv_pool.cu's kernel lays them out, then computes SmallTile patches with conv_pool_tile.cuh's
// code; a stage whose patches are too few to busy the block splits its input channels over
// threads and sums the partial tiles in a fixed order through shared memory. The head computes
// each layer with threads over (column, slice of the inputs), partial sums added in slice order.
#include "backends/cuda/conv_net.hpp"

#include <cuda_pipeline.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "backends/cuda/conv_pool_tile.cuh"
#include "backends/cuda/epilogue.cuh"
#include "backends/cuda/launch.hpp"
#include "common/error.hpp"

namespace fusednn::cuda {

namespace {

using conv_tile::ConvPoolParams;
using conv_tile::SmallTile;

constexpr int kThreads = 512;

struct Stage {
  ConvPoolParams conv;    // geometry of the small tile over a whole sample, filters, bias
  int32_t kernel_size;    // 5 or 3: compile-time taps at stride 1; 0: any
  int32_t staged_height;  // rows of one staged input plane
  int32_t splits;         // slices of the input channels, each summed by its own thread
  int32_t channels_per_split;
  uint32_t filters;  // float offset of this stage's filter image in shared memory
};

struct HeadLayer {
  const float* weight_t;  // [in][padded_out]
  const float* bias;      // [out] or null
  int32_t in, out, padded_out;
  int32_t columns;  // out rounded up to a whole warp
  int32_t slices;   // kThreads / columns: threads per column, each over a slice of the inputs
  DeviceEpilogue epilogue;
};

struct ConvNetParams {
  const float* x;
  float* y;
  int32_t input_floats;   // per sample
  int32_t output_floats;  // per sample
  int32_t stage_count;
  int32_t head_count;
  // Float offsets into shared memory.
  uint32_t staged;   // the current stage's zero-padded input planes
  uint32_t act[2];   // stage and layer outputs, alternating
  uint32_t scratch;  // partial sums (split stages, head layers)
  uint32_t prefetched;
  int32_t prefetched_rows;  // rows of head[0].weight_t held at `prefetched`
  Stage stages[kConvNetMaxStages];
  HeadLayer head[kFusedMlpMaxLayers];
};

// Input plane c of a whole sample ([channels][height][width] at `source`, global or shared) into
// the staged layout: staged (c, i, j) = input (origin_row + i, origin_col + j), zero outside.
__device__ void stage_input(const ConvPoolParams& p, int staged_height, const float* source,
                            float* staged) {
  const int rows = p.in_channels * staged_height;
  const int per_row = p.row_pitch;
  for (int q = threadIdx.x; q < rows * per_row; q += kThreads) {
    const int row_index = q / per_row;
    const int j = q - row_index * per_row;
    const int c = row_index / staged_height;
    const int i = row_index - c * staged_height;
    const int row = p.origin_row + i;
    const int col = p.origin_col + j;
    float value = 0.0f;
    if (j < p.staged_width && row >= 0 && row < p.in_height && col >= 0 && col < p.in_width) {
      value = source[(c * p.in_height + row) * p.in_width + col];
    }
    staged[c * p.plane_floats + i * p.row_pitch + j] = value;
  }
}

// One stage: SmallTile patches over input channels [c_begin, c_end) into acc.
template <int kK>
__device__ __forceinline__ void accumulate_channels(const ConvPoolParams& p, const float* staged,
                                                    const float* filters, int g, int ty, int tx,
                                                    int c_begin, int c_end,
                                                    float (&acc)[SmallTile::kValues]) {
  using T = SmallTile;
  const int taps = p.kernel_height * p.kernel_width;
  const int stride_height = kK > 0 ? 1 : p.stride_height;
  const int stride_width = kK > 0 ? 1 : p.stride_width;
  const float* input = staged + c_begin * p.plane_floats +
                       ty * T::kR * stride_height * p.row_pitch + tx * T::kC * stride_width;
  const int weight_step = p.channel_groups * taps * T::kTapStride;
  const float* weight = filters + (c_begin * p.channel_groups + g) * taps * T::kTapStride;
  if constexpr (kK > 0) {
    for (int c = c_begin; c < c_end; ++c) {
      conv_tile::accumulate_fixed<kK, T>(input, p.row_pitch, weight, acc);
      input += p.plane_floats;
      weight += weight_step;
    }
  } else {
    int offset[T::kR][T::kC];
#pragma unroll
    for (int dy = 0; dy < T::kR; ++dy)
#pragma unroll
      for (int dx = 0; dx < T::kC; ++dx) {
        offset[dy][dx] = dy * stride_height * p.row_pitch + dx * stride_width;
      }
    for (int c = c_begin; c < c_end; ++c) {
      conv_tile::accumulate_generic<T>(input, p.row_pitch, weight, p.kernel_height,
                                       p.kernel_width, offset, acc);
      input += p.plane_floats;
      weight += weight_step;
    }
  }
}

// The stage's patches from its staged input into `output` (the sample's output planes).
template <int kK>
__device__ void run_stage(const Stage& stage, const float* staged, const float* filters,
                          float* scratch, float* output) {
  using T = SmallTile;
  const ConvPoolParams& p = stage.conv;
  const int per_group = p.patch_rows * p.patch_cols;
  const int items = p.channel_groups * per_group;
  const int units = items * stage.splits;
  for (int u = threadIdx.x; u < units; u += kThreads) {
    const int split = u / items;
    const int item = u - split * items;
    const int g = item / per_group;
    const int rest = item - g * per_group;
    const int ty = rest / p.patch_cols;
    const int tx = rest - ty * p.patch_cols;
    const int c_begin = split * stage.channels_per_split;
    const int c_end = min(p.in_channels, c_begin + stage.channels_per_split);
    float acc[T::kValues];
#pragma unroll
    for (int v = 0; v < T::kValues; ++v) acc[v] = 0.0f;
    accumulate_channels<kK>(p, staged, filters, g, ty, tx, c_begin, c_end, acc);
    if (stage.splits == 1) {
      conv_tile::finish_patch<T>(p, acc, output, g, ty, tx);
    } else {
      // [value][unit]: consecutive threads store to consecutive words.
#pragma unroll
      for (int v = 0; v < T::kValues; ++v) scratch[v * units + u] = acc[v];
    }
  }
  if (stage.splits == 1) return;
  __syncthreads();
  for (int item = threadIdx.x; item < items; item += kThreads) {
    float acc[T::kValues];
#pragma unroll
    for (int v = 0; v < T::kValues; ++v) {
      float sum = scratch[v * units + item];
      for (int split = 1; split < stage.splits; ++split) sum += scratch[v * units + split * items + item];
      acc[v] = sum;
    }
    const int g = item / per_group;
    const int rest = item - g * per_group;
    const int ty = rest / p.patch_cols;
    conv_tile::finish_patch<T>(p, acc, output, g, ty, rest - ty * p.patch_cols);
  }
}

// One head layer: output[o] = epilogue(bias[o] + sum_i input[i] * W_t[i][o]). Thread (slice, o)
// sums its slice of the inputs; the slices' sums are added in order. Rows of W_t below
// `held_rows` come from shared memory (`held`), the rest from global memory.
__device__ void run_head_layer(const HeadLayer& layer, const float* input, const float* held,
                               int held_rows, float* scratch, float* output) {
  const int o = threadIdx.x % layer.columns;
  const int slice = threadIdx.x / layer.columns;
  if (slice < layer.slices && o < layer.out) {
    const int per_slice = (layer.in + layer.slices - 1) / layer.slices;
    const int begin = slice * per_slice;
    const int end = min(layer.in, begin + per_slice);
    const int held_end = min(end, held_rows);
    float sum = 0.0f;
    int i = begin;
    for (; i < held_end; ++i) sum = fmaf(input[i], held[i * layer.padded_out + o], sum);
#pragma unroll 8
    for (; i < end; ++i) sum = fmaf(input[i], __ldg(layer.weight_t + i * layer.padded_out + o), sum);
    scratch[slice * layer.columns + o] = sum;
  }
  __syncthreads();
  if (threadIdx.x < layer.out) {
    float sum = scratch[threadIdx.x];
    for (int s = 1; s < layer.slices; ++s) sum += scratch[s * layer.columns + threadIdx.x];
    if (layer.bias != nullptr) sum += layer.bias[threadIdx.x];
    output[threadIdx.x] = apply_epilogue(layer.epilogue, sum);
  }
}

__global__ void __launch_bounds__(kThreads, 1) conv_net_kernel(const __grid_constant__ ConvNetParams p) {
  extern __shared__ float4 shared_memory[];
  float* const smem = reinterpret_cast<float*>(shared_memory);
  const int64_t n = blockIdx.x;

  // Filters (group 1), then the head's first rows (group 2): the stages wait for the first only.
  {
    float4* destination = shared_memory;
    for (int s = 0; s < p.stage_count; ++s) {
      const ConvPoolParams& conv = p.stages[s].conv;
      const float4* source = reinterpret_cast<const float4*>(conv.weight);
      for (int i = threadIdx.x; i < conv.weight_floats / 4; i += kThreads) {
        __pipeline_memcpy_async(destination + i, source + i, 16);
      }
      destination += conv.weight_floats / 4;
    }
    __pipeline_commit();
    if (p.prefetched_rows > 0) {
      const int chunks = p.prefetched_rows * p.head[0].padded_out / 4;
      const float4* source = reinterpret_cast<const float4*>(p.head[0].weight_t);
      float4* held = reinterpret_cast<float4*>(smem + p.prefetched);
      for (int i = threadIdx.x; i < chunks; i += kThreads) {
        __pipeline_memcpy_async(held + i, source + i, 16);
      }
    }
    __pipeline_commit();
  }

  const float* source = p.x + n * p.input_floats;
  int current = 0;  // the act[] buffer the next output goes to
  for (int s = 0; s < p.stage_count; ++s) {
    const Stage& stage = p.stages[s];
    stage_input(stage.conv, stage.staged_height, source, smem + p.staged);
    if (s == 0) __pipeline_wait_prior(1);
    __syncthreads();
    const bool last = s + 1 == p.stage_count && p.head_count == 0;
    float* output = last ? p.y + n * p.output_floats : smem + p.act[current];
    const float* filters = smem + stage.filters;
    float* scratch = smem + p.scratch;
    if (stage.kernel_size == 5) {
      run_stage<5>(stage, smem + p.staged, filters, scratch, output);
    } else if (stage.kernel_size == 3) {
      run_stage<3>(stage, smem + p.staged, filters, scratch, output);
    } else {
      run_stage<0>(stage, smem + p.staged, filters, scratch, output);
    }
    __syncthreads();
    source = output;
    current ^= 1;
  }
  __pipeline_wait_prior(0);
  __syncthreads();
  for (int l = 0; l < p.head_count; ++l) {
    const bool last = l + 1 == p.head_count;
    float* output = last ? p.y + n * p.output_floats : smem + p.act[current];
    run_head_layer(p.head[l], source, smem + p.prefetched, l == 0 ? p.prefetched_rows : 0,
                   smem + p.scratch, output);
    __syncthreads();
    source = output;
    current ^= 1;
  }
}

int64_t round_up(int64_t a, int64_t b) { return (a + b - 1) / b * b; }

}  // namespace

struct ConvNetLaunch {
  ConvNetParams params;
  size_t shared_bytes = 0;
};

bool conv_net_enabled() {
  const char* knob = std::getenv("FUSEDNN_CUDA_SINGLE_LAUNCH");
  return knob == nullptr || std::string(knob) != "0";
}

bool plan_conv_net(const std::vector<ConvNetStageDesc>& stages,
                   const std::vector<FusedMlpLayerDesc>& head, int64_t max_batch,
                   const DeviceInfo& device, ConvNetPlan* plan) {
  if (stages.empty() || stages.size() > static_cast<size_t>(kConvNetMaxStages) ||
      head.size() > static_cast<size_t>(kFusedMlpMaxLayers) || max_batch < 1) {
    return false;
  }
  auto launch = std::make_shared<ConvNetLaunch>();
  ConvNetParams& p = launch->params;
  p = ConvNetParams{};
  int64_t filter_floats = 0, staged_floats = 0, act_floats = 0, scratch_floats = kThreads;
  int64_t previous_output = -1;  // floats per sample of the previous stage's output
  for (size_t s = 0; s < stages.size(); ++s) {
    const ConvNetStageDesc& desc = stages[s];
    if (desc.plan == nullptr || desc.weights == nullptr || desc.plan->small.variant < 0) {
      return false;
    }
    const ConvPoolDesc& d = desc.plan->desc;
    const ConvPoolShape& shape = desc.plan->small;
    Stage& stage = p.stages[s];
    stage.conv = small_tile_whole_sample_params(*desc.plan, desc.weights, desc.bias);
    const int64_t input = int64_t{d.in_channels} * d.in_height * d.in_width;
    if (s == 0) {
      p.input_floats = static_cast<int32_t>(input);
    } else if (input != previous_output) {
      return false;
    }
    previous_output = int64_t{d.out_channels} * d.pooled_height * d.pooled_width;
    stage.kernel_size =
        d.kernel_height == d.kernel_width && d.stride_height == 1 && d.stride_width == 1 &&
                (d.kernel_height == 3 || d.kernel_height == 5)
            ? d.kernel_height
            : 0;
    stage.staged_height = static_cast<int32_t>(
        (int64_t{shape.patch_rows} * SmallTile::kR - 1) * d.stride_height + d.kernel_height);
    // Enough slices of the input channels to give every thread a patch, when there are few.
    const int64_t items = int64_t{shape.channel_groups} * shape.patch_rows * shape.patch_cols;
    const int64_t wanted = std::max<int64_t>(1, std::min<int64_t>(d.in_channels, kThreads / items));
    const int64_t per_split = (d.in_channels + wanted - 1) / wanted;
    stage.channels_per_split = static_cast<int32_t>(per_split);
    stage.splits = static_cast<int32_t>((d.in_channels + per_split - 1) / per_split);
    stage.filters = static_cast<uint32_t>(filter_floats);
    filter_floats += shape.weight_floats;  // a multiple of 4
    staged_floats = std::max<int64_t>(staged_floats, int64_t{d.in_channels} * stage.conv.plane_floats);
    if (stage.splits > 1) {
      scratch_floats = std::max<int64_t>(scratch_floats, items * stage.splits * SmallTile::kValues);
    }
    if (s + 1 < stages.size() || !head.empty()) act_floats = std::max(act_floats, previous_output);
  }
  p.stage_count = static_cast<int32_t>(stages.size());
  p.output_floats = static_cast<int32_t>(previous_output);
  for (size_t l = 0; l < head.size(); ++l) {
    const FusedMlpLayerDesc& layer = head[l];
    if (layer.weight_t == nullptr || layer.in != previous_output || layer.out < 1 ||
        layer.out > kThreads || layer.padded_out < layer.out || layer.padded_out % 4 != 0) {
      return false;
    }
    HeadLayer& h = p.head[l];
    h.weight_t = layer.weight_t;
    h.bias = layer.bias;
    h.in = layer.in;
    h.out = layer.out;
    h.padded_out = layer.padded_out;
    h.columns = static_cast<int32_t>(round_up(layer.out, 32));
    h.slices = kThreads / h.columns;
    h.epilogue = layer.epilogue;
    previous_output = layer.out;
    if (l + 1 < head.size()) act_floats = std::max<int64_t>(act_floats, layer.out);
  }
  p.head_count = static_cast<int32_t>(head.size());
  if (!head.empty()) p.output_floats = static_cast<int32_t>(previous_output);

  // Shared memory: filters, staged input, two activation buffers, scratch, then the head's
  // first rows in what is left.
  int64_t offset = filter_floats;
  p.staged = static_cast<uint32_t>(offset);
  offset += round_up(staged_floats, 4);
  for (uint32_t& act : p.act) {
    act = static_cast<uint32_t>(offset);
    offset += round_up(act_floats, 4);
  }
  p.scratch = static_cast<uint32_t>(offset);
  offset += round_up(scratch_floats, 4);
  p.prefetched = static_cast<uint32_t>(offset);
  const int64_t budget = static_cast<int64_t>(device.shared_per_block_optin / sizeof(float));
  if (offset > budget) return false;
  if (!head.empty()) {
    const int64_t rows = std::min<int64_t>(head[0].in, (budget - offset) / head[0].padded_out);
    p.prefetched_rows = static_cast<int32_t>(rows);
    offset += rows * head[0].padded_out;
  }
  launch->shared_bytes = static_cast<size_t>(offset) * sizeof(float);
  if (cudaFuncSetAttribute(conv_net_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           static_cast<int>(launch->shared_bytes)) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  plan->max_batch = std::min<int64_t>(max_batch, std::max(1, device.sm_count));
  plan->launch = std::move(launch);
  return true;
}

void launch_conv_net(const ConvNetPlan& plan, const float* x, float* y, int64_t batch,
                     cudaStream_t stream) {
  if (batch <= 0) return;
  if (plan.launch == nullptr || batch > plan.max_batch) {
    fail(FDNN_STATUS_INTERNAL_ERROR, "conv_net: a batch of ", batch, " is past the plan's ",
         plan.max_batch);
  }
  ConvNetParams p = plan.launch->params;
  p.x = x;
  p.y = y;
  launch_kernel(conv_net_kernel, "conv_net_kernel", dim3(static_cast<unsigned>(batch)),
                dim3(kThreads), plan.launch->shared_bytes, stream, p);
}

}  // namespace fusednn::cuda
