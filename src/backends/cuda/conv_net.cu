// A whole convolutional network in one launch (see conv_net.hpp for when it applies).
//
// Napkin math, LeNet-5 at batch 1 (one block of 1024 threads on one SM):
//   conv1 117.6 K and conv2 240 K multiply-adds: ~2.8 K clocks of one SM's 128 fp32 lanes, so
//   ~1.4 us at 1.98 GHz if every issue slot were an FFMA. A thread computes one channel's 2 x 2
//   positions (one pooling window): conv1 1176 of them, 25 taps of ~10 instructions each; conv2
//   400, its 6 input channels split over two threads each, 75 taps per thread. Expected ~2-3 us
//   for both with barriers and latency.
//   head 400-120-84-10: 58 K multiply-adds, but 236 KB of weights from L2 into one SM (~64 B per
//   clock: ~1.9 us). The first layer's 192 KB are copied into shared memory with cp.async at the
//   start, so that they arrive while the convolutions run; the rest (44 KB) is read from L2.
//   Expected: ~4-5 us of kernel, against the ~2-3 us each of the three kernels it replaces plus
//   their launch gaps.
//   The first version of this kernel ran conv_pool.cu's unrolled register tiles (4 channels,
//   compile-time 5 x 5 taps) with 512 threads and took 29 us per call: at one sample each stage's
//   ~10 K instructions of straight-line code run once per warp, so instruction fetch, not
//   arithmetic, set the pace. The loops below keep the code small.
//
// The work, per block (one sample): cp.async every stage's filters (group 1), then as many rows
// of the head's first weight matrix as shared memory holds (group 2). Each stage stages its input
// planes (the model input, or the previous stage's output in shared memory) zero-padded as
// conv_pool.cu's kernel lays them out, then computes its patches; a stage whose patches are too
// few to busy the block splits its input channels over threads and sums the partial tiles in a
// fixed order through shared memory. The bias, epilogue and pooling of a patch are
// conv_pool_tile.cuh's. The head computes each layer with threads over (column, slice of the
// inputs), partial sums added in slice order.
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
using ChannelTile = conv_tile::Tile<1, 2, 2>;  // a thread's work: one channel, 2 x 2 positions

constexpr int kThreads = 1024;

struct Stage {
  ConvPoolParams conv;    // geometry of the small tile over a whole sample, filters, bias
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

// One output channel's 2 x 2 conv positions (patch (ty, tx)) over input channels
// [c_begin, c_end), the filters read from the SmallTile image (channel o at lane o % 4 of group
// o / 4). Loops rather than conv_pool.cu's unrolled taps: at one sample the code runs a few
// times per warp, and the unrolled form's ~10 K instructions per stage streamed through the
// instruction cache for each use (27 us per call for LeNet-5 at batch 1 as the first version of
// this kernel, H100, 2026-11-23).
__device__ __forceinline__ void accumulate_channel(const ConvPoolParams& p, const float* staged,
                                                   const float* filters, int o, int ty, int tx,
                                                   int c_begin, int c_end, float (&acc)[4]) {
  const int kernel_height = p.kernel_height, kernel_width = p.kernel_width;
  const int across = p.stride_width;             // the patch's second column
  const int down = p.stride_height * p.row_pitch;  // its second row
  const int taps = kernel_height * kernel_width;
  const int channel_floats = p.channel_groups * taps * SmallTile::kTapStride;
  const float* input =
      staged + c_begin * p.plane_floats + ty * 2 * down + tx * 2 * across;
  const float* weight = filters + (c_begin * p.channel_groups + o / SmallTile::kCo) * taps *
                                      SmallTile::kTapStride + o % SmallTile::kCo;
  for (int c = c_begin; c < c_end; ++c) {
    const float* row = input;
    const float* tap = weight;
#pragma unroll 1
    for (int kh = 0; kh < kernel_height; ++kh) {
      for (int kw = 0; kw < kernel_width; ++kw) {
        const float f = tap[kw * SmallTile::kTapStride];
        acc[0] = fmaf(row[kw], f, acc[0]);
        acc[1] = fmaf(row[kw + across], f, acc[1]);
        acc[2] = fmaf(row[down + kw], f, acc[2]);
        acc[3] = fmaf(row[down + kw + across], f, acc[3]);
      }
      row += p.row_pitch;
      tap += kernel_width * SmallTile::kTapStride;
    }
    input += p.plane_floats;
    weight += channel_floats;
  }
}

// The stage's patches from its staged input into `output` (the sample's output planes): thread
// (slice, channel, patch) sums its slice of the input channels; slices are added in order.
__device__ void run_stage(const Stage& stage, const float* staged, const float* filters,
                          float* scratch, float* output) {
  const ConvPoolParams& p = stage.conv;
  const int per_channel = p.patch_rows * p.patch_cols;
  const int items = p.out_channels * per_channel;
  const int units = items * stage.splits;
  for (int u = threadIdx.x; u < units; u += kThreads) {
    const int split = u / items;
    const int item = u - split * items;
    const int o = item / per_channel;
    const int rest = item - o * per_channel;
    const int ty = rest / p.patch_cols;
    const int c_begin = split * stage.channels_per_split;
    const int c_end = min(p.in_channels, c_begin + stage.channels_per_split);
    float acc[ChannelTile::kValues] = {0.0f, 0.0f, 0.0f, 0.0f};
    accumulate_channel(p, staged, filters, o, ty, rest - ty * p.patch_cols, c_begin, c_end, acc);
    if (stage.splits == 1) {
      conv_tile::finish_patch<ChannelTile>(p, acc, output, o, ty, rest - ty * p.patch_cols);
    } else {
      // [value][unit]: consecutive threads store to consecutive words.
#pragma unroll
      for (int v = 0; v < ChannelTile::kValues; ++v) scratch[v * units + u] = acc[v];
    }
  }
  if (stage.splits == 1) return;
  __syncthreads();
  for (int item = threadIdx.x; item < items; item += kThreads) {
    float acc[ChannelTile::kValues];
#pragma unroll
    for (int v = 0; v < ChannelTile::kValues; ++v) {
      float sum = scratch[v * units + item];
      for (int split = 1; split < stage.splits; ++split) {
        sum += scratch[v * units + split * items + item];
      }
      acc[v] = sum;
    }
    const int o = item / per_channel;
    const int rest = item - o * per_channel;
    const int ty = rest / p.patch_cols;
    conv_tile::finish_patch<ChannelTile>(p, acc, output, o, ty, rest - ty * p.patch_cols);
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
    run_stage(stage, smem + p.staged, smem + stage.filters, smem + p.scratch, output);
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
    stage.staged_height = static_cast<int32_t>(
        (int64_t{shape.patch_rows} * SmallTile::kR - 1) * d.stride_height + d.kernel_height);
    // Enough slices of the input channels to give every thread a patch, when there are few.
    const int64_t items = int64_t{d.out_channels} * shape.patch_rows * shape.patch_cols;
    const int64_t wanted = std::max<int64_t>(1, std::min<int64_t>(d.in_channels, kThreads / items));
    const int64_t per_split = (d.in_channels + wanted - 1) / wanted;
    stage.channels_per_split = static_cast<int32_t>(per_split);
    stage.splits = static_cast<int32_t>((d.in_channels + per_split - 1) / per_split);
    stage.filters = static_cast<uint32_t>(filter_floats);
    filter_floats += shape.weight_floats;  // a multiple of 4
    staged_floats = std::max<int64_t>(staged_floats, int64_t{d.in_channels} * stage.conv.plane_floats);
    if (stage.splits > 1) {
      scratch_floats = std::max<int64_t>(scratch_floats, items * stage.splits * ChannelTile::kValues);
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
