// A whole convolutional network in one launch (see conv_net.hpp for when it applies).
//
// One sample per cluster of kBlocks blocks (compute capability 9.0 and newer), each block on its
// own SM with a kBlocks-th of every layer's work:
// - a conv stage's patches (one output channel x 2 x 2 conv positions each) are split into
//   kBlocks ranges; a block computes its range into its own copy of the stage's output, zeros
//   elsewhere;
// - a head layer's columns are split the same way; each block holds only its columns' weights;
// - after each layer a cluster barrier, then every block gathers the full output by adding the
//   kBlocks copies through distributed shared memory (exactly one copy holds each value, the
//   others zero, so the sum is that value).
//
// Napkin math, LeNet-5 at batch 1:
//   conv1 117.6 K and conv2 240 K multiply-adds over 8 SMs: ~350 clocks each of 128 fp32 lanes.
//   The time is each thread's dependent chain. A patch is one output channel x 2 x 2 conv
//   positions; its reduction rows (input channel x kernel row: 5 for conv1, 30 for conv2) are
//   shared by as many threads as the block has to spare (conv1: 147 patches per block, 3
//   threads each; conv2: 50 patches, 10 threads each), so a chain is ~10 taps of ~10
//   instructions, then the sum of the shares, bias, tanh and the pooling window (~200).
//   ~1000 instructions on the longest chain over both stages and the head, plus 5 cluster
//   barriers and gathers. Head: 236 KB of weights, 30 KB per SM, copied with cp.async while the
//   convolutions run.
//   Two earlier versions ran everything on one SM (one block of 512 or 1024 threads) and took
//   29 us and 37 us per call: ncu showed shared-memory issue throttling (mio) and barrier waits
//   as the main stalls, and one SM pulling the head's 236 KB from L2. The first cluster version
//   (256 threads, a thread per patch over whole input channels, a thread per staged element)
//   took 22.3 us: 4.1 K instructions per warp at ~11 clocks each (H100, 2026-11-23).
#include "backends/cuda/conv_net.hpp"

#include <cooperative_groups.h>
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
using ChannelTile = conv_tile::Tile<1, 2, 2>;  // a thread's patch: one channel, 2 x 2 positions

constexpr int kBlocks = 8;  // blocks per cluster (per sample): the portable cluster size
constexpr int kThreads = 512;

// Cluster dimensions are a property of the sm_90+ kernel; older targets compile an empty body
// (plan_conv_net() never plans it there).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#define FDNN_CONV_NET_CLUSTER
#else
#define FDNN_CONV_NET_CLUSTER __cluster_dims__(kBlocks, 1, 1)
#endif

struct Stage {
  ConvPoolParams conv;    // geometry of the small tile over a whole sample, filters, bias
  int32_t staged_height;  // rows of one staged input plane
  int32_t items;          // patches: out_channels x patch rows x patch columns
  int32_t items_per_block;
  // A patch sums over in_channels x kernel_height rows of taps; when a block has few patches,
  // `splits` threads share one, each over rows_per_split of those rows.
  int32_t splits;
  int32_t rows_per_split;
  int32_t output_floats;  // per sample
  uint32_t filters;       // float offset of this stage's SmallTile image in shared memory
};

struct HeadLayer {
  const float* weight_t;  // [in][padded_out]
  const float* bias;      // [out] or null
  int32_t in, out, padded_out;
  int32_t slice;     // columns per block, a multiple of 4
  int32_t per_column;  // threads per column (kThreads / slice), each over a piece of the inputs
  uint32_t weights;  // float offset of this block's [in][slice] columns in shared memory
  DeviceEpilogue epilogue;
};

struct ConvNetParams {
  const float* x;
  float* y;
  int32_t input_floats;   // per sample
  int32_t output_floats;  // per sample
  int32_t stage_count;
  int32_t head_count;
  // Float offsets into shared memory (every stage's filter image first, from 0).
  uint32_t staged;   // the current stage's zero-padded input planes
  uint32_t vector;   // a head layer's whole input
  uint32_t out[2];   // this block's copy of each layer's output, alternating
  uint32_t scratch;  // partial sums (split stages, head layers)
  Stage stages[kConvNetMaxStages];
  HeadLayer head[kFusedMlpMaxLayers];
};

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900  // the kernel's pieces, sm_90+ only

constexpr int kWarps = kThreads / 32;

// Element e of a layer's output: the sum of the cluster's copies of `buffer` (this block's
// offset); exactly one of them is not zero there.
__device__ __forceinline__ float gathered(const float* buffer, int e) {
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  float sum = 0.0f;
#pragma unroll
  for (int b = 0; b < kBlocks; ++b) sum += cluster.map_shared_rank(buffer, b)[e];
  return sum;
}

// A stage's input planes ([channels][height][width], from global memory for the first stage or
// gathered from the cluster's copies of the previous output) into the staged layout:
// staged (c, i, j) = input (origin_row + i, origin_col + j), zero outside. A warp per staged row.
__device__ void stage_input(const ConvPoolParams& p, int staged_height, const float* global,
                            const float* copies, float* staged) {
  const int rows = p.in_channels * staged_height;
  const int lane = threadIdx.x % 32;
  for (int row_index = threadIdx.x / 32; row_index < rows; row_index += kWarps) {
    const int c = row_index / staged_height;
    const int i = row_index - c * staged_height;
    const int row = p.origin_row + i;
    const bool row_inside = row >= 0 && row < p.in_height;
    const int base = (c * p.in_height + row) * p.in_width;
    float* destination = staged + c * p.plane_floats + i * p.row_pitch;
    for (int j = lane; j < p.row_pitch; j += 32) {
      const int col = p.origin_col + j;
      float value = 0.0f;
      if (row_inside && j < p.staged_width && col >= 0 && col < p.in_width) {
        value = global != nullptr ? global[base + col] : gathered(copies, base + col);
      }
      destination[j] = value;
    }
  }
}

// One output channel's 2 x 2 conv positions (patch (ty, tx)) over reduction rows
// [r_begin, r_end) (row r: input channel r / kernel_height, kernel row r % kernel_height), the
// filters read from the SmallTile image (channel o at lane o % 4 of group o / 4). Loops rather
// than conv_pool.cu's unrolled register tiles: a thread here has a piece of one patch, and a
// short chain matters more than fewer loads.
__device__ __forceinline__ void accumulate_channel(const ConvPoolParams& p, const float* staged,
                                                   const float* filters, int o, int ty, int tx,
                                                   int r_begin, int r_end, float (&acc)[4]) {
  const int kernel_height = p.kernel_height, kernel_width = p.kernel_width;
  const int across = p.stride_width;               // the patch's second column
  const int down = p.stride_height * p.row_pitch;  // its second row
  const int taps = kernel_height * kernel_width;
  int c = r_begin / kernel_height;
  int kh = r_begin - c * kernel_height;
  const float* patch = staged + ty * 2 * down + tx * 2 * across;
  const float* lane_filters = filters + (o / SmallTile::kCo) * taps * SmallTile::kTapStride +
                              o % SmallTile::kCo;
  const int channel_floats = p.channel_groups * taps * SmallTile::kTapStride;
#pragma unroll 1
  for (int r = r_begin; r < r_end; ++r) {
    const float* row = patch + c * p.plane_floats + kh * p.row_pitch;
    const float* tap =
        lane_filters + c * channel_floats + kh * kernel_width * SmallTile::kTapStride;
    for (int kw = 0; kw < kernel_width; ++kw) {
      const float f = tap[kw * SmallTile::kTapStride];
      acc[0] = fmaf(row[kw], f, acc[0]);
      acc[1] = fmaf(row[kw + across], f, acc[1]);
      acc[2] = fmaf(row[down + kw], f, acc[2]);
      acc[3] = fmaf(row[down + kw + across], f, acc[3]);
    }
    if (++kh == kernel_height) {
      kh = 0;
      ++c;
    }
  }
}

// This block's patches of the stage, from its staged input into `output` (the sample's output
// planes, zero where other blocks' patches land): thread (split, patch) sums its share of the
// reduction rows; the shares are added in order.
__device__ void run_stage(const Stage& stage, int rank, const float* staged, const float* filters,
                          float* scratch, float* output) {
  const ConvPoolParams& p = stage.conv;
  const int per_channel = p.patch_rows * p.patch_cols;
  const int first = rank * stage.items_per_block;
  const int count = max(0, min(stage.items, first + stage.items_per_block) - first);
  const int units = count * stage.splits;
  for (int u = threadIdx.x; u < units; u += kThreads) {
    const int split = u / count;
    const int item = first + u - split * count;
    const int o = item / per_channel;
    const int rest = item - o * per_channel;
    const int ty = rest / p.patch_cols;
    const int tx = rest - ty * p.patch_cols;
    const int r_begin = split * stage.rows_per_split;
    const int r_end = min(p.in_channels * p.kernel_height, r_begin + stage.rows_per_split);
    float acc[ChannelTile::kValues] = {0.0f, 0.0f, 0.0f, 0.0f};
    accumulate_channel(p, staged, filters, o, ty, tx, r_begin, r_end, acc);
    if (stage.splits == 1) {
      conv_tile::finish_patch<ChannelTile>(p, acc, output, o, ty, tx);
    } else {
#pragma unroll
      for (int v = 0; v < ChannelTile::kValues; ++v) scratch[v * units + u] = acc[v];
    }
  }
  if (stage.splits == 1) return;
  __syncthreads();
  for (int local = threadIdx.x; local < count; local += kThreads) {
    float acc[ChannelTile::kValues];
#pragma unroll
    for (int v = 0; v < ChannelTile::kValues; ++v) {
      float sum = scratch[v * units + local];
      for (int split = 1; split < stage.splits; ++split) {
        sum += scratch[v * units + split * count + local];
      }
      acc[v] = sum;
    }
    const int item = first + local;
    const int o = item / per_channel;
    const int rest = item - o * per_channel;
    const int ty = rest / p.patch_cols;
    conv_tile::finish_patch<ChannelTile>(p, acc, output, o, ty, rest - ty * p.patch_cols);
  }
}

// This block's columns of a head layer: output[c] = epilogue(bias[c] + sum_i input[i] W_t[i][c])
// for c in [rank * slice, rank * slice + slice) below out. Thread (piece, column) sums a piece of
// the inputs; the pieces are added in order.
__device__ void run_head_layer(const HeadLayer& layer, int rank, const float* input,
                               const float* weights, float* scratch, float* output) {
  const int local = threadIdx.x % layer.slice;
  const int piece = threadIdx.x / layer.slice;
  const int column = rank * layer.slice + local;
  if (piece < layer.per_column) {
    const int per_piece = (layer.in + layer.per_column - 1) / layer.per_column;
    const int begin = piece * per_piece;
    const int end = min(layer.in, begin + per_piece);
    float sum = 0.0f;
    for (int i = begin; i < end; ++i) sum = fmaf(input[i], weights[i * layer.slice + local], sum);
    scratch[piece * layer.slice + local] = sum;
  }
  __syncthreads();
  if (threadIdx.x < layer.slice && column < layer.out) {
    float sum = scratch[threadIdx.x];
    for (int piece_index = 1; piece_index < layer.per_column; ++piece_index) {
      sum += scratch[piece_index * layer.slice + threadIdx.x];
    }
    if (layer.bias != nullptr) sum += layer.bias[column];
    output[column] = apply_epilogue(layer.epilogue, sum);
  }
}

#endif

__global__ void FDNN_CONV_NET_CLUSTER __launch_bounds__(kThreads)
    conv_net_kernel(const __grid_constant__ ConvNetParams p) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  extern __shared__ float4 shared_memory[];
  float* const smem = reinterpret_cast<float*>(shared_memory);
  const int rank = static_cast<int>(cluster.block_rank());
  const int64_t n = blockIdx.x / kBlocks;

  // Every stage's filters (group 1), then this block's columns of every head layer (group 2):
  // the stages wait for the first only.
  {
    float4* destination = shared_memory;
    for (int s = 0; s < p.stage_count; ++s) {
      const float4* source = reinterpret_cast<const float4*>(p.stages[s].conv.weight);
      for (int i = threadIdx.x; i < p.stages[s].conv.weight_floats / 4; i += kThreads) {
        __pipeline_memcpy_async(destination + i, source + i, 16);
      }
      destination += p.stages[s].conv.weight_floats / 4;
    }
    __pipeline_commit();
    for (int l = 0; l < p.head_count; ++l) {
      const HeadLayer& layer = p.head[l];
      const int chunks_per_row = layer.slice / 4;
      float* held = smem + layer.weights;
      for (int q = threadIdx.x; q < layer.in * chunks_per_row; q += kThreads) {
        const int i = q / chunks_per_row;
        const int column = rank * layer.slice + (q - i * chunks_per_row) * 4;
        float* target = held + i * layer.slice + (column - rank * layer.slice);
        if (column < layer.padded_out) {  // padded_out and slice are multiples of 4
          __pipeline_memcpy_async(target, layer.weight_t + int64_t{i} * layer.padded_out + column,
                                  16);
        } else {
          *reinterpret_cast<float4*>(target) = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        }
      }
    }
    __pipeline_commit();
  }

  int current = 0;  // the out[] buffer this layer writes
  for (int s = 0; s < p.stage_count; ++s) {
    const Stage& stage = p.stages[s];
    stage_input(stage.conv, stage.staged_height, s == 0 ? p.x + n * p.input_floats : nullptr,
                smem + p.out[current ^ 1], smem + p.staged);
    const bool last = s + 1 == p.stage_count && p.head_count == 0;
    float* output = last ? p.y + n * p.output_floats : smem + p.out[current];
    if (!last) {
      for (int e = threadIdx.x; e < stage.output_floats; e += kThreads) output[e] = 0.0f;
    }
    if (s == 0) __pipeline_wait_prior(1);
    __syncthreads();
    run_stage(stage, rank, smem + p.staged, smem + stage.filters, smem + p.scratch, output);
    cluster.sync();  // every copy of this output is complete before anyone gathers it
    current ^= 1;
  }
  __pipeline_wait_prior(0);
  for (int l = 0; l < p.head_count; ++l) {
    const HeadLayer& layer = p.head[l];
    float* vector = smem + p.vector;
    for (int i = threadIdx.x; i < layer.in; i += kThreads) {
      vector[i] = gathered(smem + p.out[current ^ 1], i);
    }
    const bool last = l + 1 == p.head_count;
    float* output = last ? p.y + n * p.output_floats : smem + p.out[current];
    if (!last) {
      for (int e = threadIdx.x; e < layer.out; e += kThreads) output[e] = 0.0f;
    }
    __syncthreads();
    run_head_layer(layer, rank, vector, smem + layer.weights, smem + p.scratch, output);
    cluster.sync();  // as after a stage; after the last layer, no block leaves while its shared
                     // memory may still be read
    current ^= 1;
  }
#endif
}

int64_t round_up(int64_t a, int64_t b) { return (a + b - 1) / b * b; }

}  // namespace

struct ConvNetLaunch {
  ConvNetParams params;
  size_t shared_bytes = 0;
};

ConvNetMode conv_net_mode() {
  const char* knob = std::getenv("FUSEDNN_CUDA_SINGLE_LAUNCH");
  if (knob == nullptr) return ConvNetMode::Default;
  const std::string value(knob);
  if (value == "0") return ConvNetMode::Off;
  if (value == "1") return ConvNetMode::Always;
  return ConvNetMode::Default;
}

bool plan_conv_net(const std::vector<ConvNetStageDesc>& stages,
                   const std::vector<FusedMlpLayerDesc>& head, int64_t min_batch,
                   int64_t max_batch, const DeviceInfo& device, ConvNetPlan* plan) {
  max_batch = std::min<int64_t>(max_batch, std::max(1, device.sm_count));
  if (device.major < 9 || stages.empty() ||
      stages.size() > static_cast<size_t>(kConvNetMaxStages) ||
      head.size() > static_cast<size_t>(kFusedMlpMaxLayers) || min_batch < 1 ||
      max_batch < min_batch) {
    return false;
  }
  auto launch = std::make_shared<ConvNetLaunch>();
  ConvNetParams& p = launch->params;
  p = ConvNetParams{};
  int64_t filter_floats = 0, staged_floats = 0, out_floats = 0, vector_floats = 0;
  int64_t scratch_floats = kThreads;
  int64_t previous_output = -1;  // floats per sample of the previous layer's output
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
    stage.output_floats = static_cast<int32_t>(previous_output);
    stage.staged_height = static_cast<int32_t>(
        (int64_t{shape.patch_rows} * SmallTile::kR - 1) * d.stride_height + d.kernel_height);
    const int64_t items = int64_t{d.out_channels} * shape.patch_rows * shape.patch_cols;
    const int64_t per_block = (items + kBlocks - 1) / kBlocks;
    stage.items = static_cast<int32_t>(items);
    stage.items_per_block = static_cast<int32_t>(per_block);
    // Enough shares of the reduction rows to give every thread a piece of a patch.
    const int64_t reduction_rows = int64_t{d.in_channels} * d.kernel_height;
    const int64_t wanted =
        std::max<int64_t>(1, std::min<int64_t>(reduction_rows, kThreads / per_block));
    const int64_t per_split = (reduction_rows + wanted - 1) / wanted;
    stage.rows_per_split = static_cast<int32_t>(per_split);
    stage.splits = static_cast<int32_t>((reduction_rows + per_split - 1) / per_split);
    stage.filters = static_cast<uint32_t>(filter_floats);
    filter_floats += shape.weight_floats;  // a multiple of 4
    staged_floats =
        std::max<int64_t>(staged_floats, int64_t{d.in_channels} * stage.conv.plane_floats);
    if (stage.splits > 1) {
      scratch_floats =
          std::max<int64_t>(scratch_floats, per_block * stage.splits * ChannelTile::kValues);
    }
    if (s + 1 < stages.size() || !head.empty()) out_floats = std::max(out_floats, previous_output);
  }
  p.stage_count = static_cast<int32_t>(stages.size());
  int64_t offset = filter_floats;
  for (size_t l = 0; l < head.size(); ++l) {
    const FusedMlpLayerDesc& layer = head[l];
    if (layer.weight_t == nullptr || layer.in != previous_output || layer.out < 1 ||
        layer.padded_out < layer.out || layer.padded_out % 4 != 0) {
      return false;
    }
    HeadLayer& h = p.head[l];
    h.weight_t = layer.weight_t;
    h.bias = layer.bias;
    h.in = layer.in;
    h.out = layer.out;
    h.padded_out = layer.padded_out;
    h.slice = static_cast<int32_t>(round_up((layer.out + kBlocks - 1) / kBlocks, 4));
    if (h.slice > kThreads) return false;
    h.per_column = kThreads / h.slice;
    h.weights = static_cast<uint32_t>(offset);
    offset += int64_t{layer.in} * h.slice;
    h.epilogue = layer.epilogue;
    vector_floats = std::max<int64_t>(vector_floats, layer.in);
    previous_output = layer.out;
    if (l + 1 < head.size()) out_floats = std::max<int64_t>(out_floats, layer.out);
  }
  p.head_count = static_cast<int32_t>(head.size());
  p.output_floats = static_cast<int32_t>(previous_output);

  // Shared memory: filters, head columns, staged input, the head's input vector, two output
  // copies, scratch.
  p.staged = static_cast<uint32_t>(offset);
  offset += round_up(staged_floats, 4);
  p.vector = static_cast<uint32_t>(offset);
  offset += round_up(vector_floats, 4);
  for (uint32_t& out : p.out) {
    out = static_cast<uint32_t>(offset);
    offset += round_up(out_floats, 4);
  }
  p.scratch = static_cast<uint32_t>(offset);
  offset += round_up(scratch_floats, 4);
  launch->shared_bytes = static_cast<size_t>(offset) * sizeof(float);
  if (launch->shared_bytes > device.shared_per_block_optin) return false;
  if (cudaFuncSetAttribute(conv_net_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           static_cast<int>(launch->shared_bytes)) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(kBlocks);
  config.blockDim = dim3(kThreads);
  config.dynamicSmemBytes = launch->shared_bytes;
  int clusters = 0;
  if (cudaOccupancyMaxActiveClusters(&clusters, conv_net_kernel, &config) != cudaSuccess ||
      clusters < 1) {
    cudaGetLastError();
    return false;
  }
  plan->min_batch = min_batch;
  plan->max_batch = max_batch;
  plan->launch = std::move(launch);
  return true;
}

void launch_conv_net(const ConvNetPlan& plan, const float* x, float* y, int64_t batch,
                     cudaStream_t stream) {
  if (batch <= 0) return;
  if (!plan.takes(batch)) {
    fail(FDNN_STATUS_INTERNAL_ERROR, "conv_net: a batch of ", batch, " is outside the plan's ",
         plan.min_batch, " to ", plan.max_batch);
  }
  ConvNetParams p = plan.launch->params;
  p.x = x;
  p.y = y;
  launch_kernel(conv_net_kernel, "conv_net_kernel", dim3(static_cast<unsigned>(batch * kBlocks)),
                dim3(kThreads), plan.launch->shared_bytes, stream, p);
}

}  // namespace fusednn::cuda
