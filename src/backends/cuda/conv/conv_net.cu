// SPDX-License-Identifier: Apache-2.0
// A whole convolutional network in one launch (see conv_net.hpp for when it applies).
//
// One sample per cluster of kBlocks blocks (compute capability 9.0 and newer), each block on its
// own SM with a kBlocks-th of every layer's work:
// - a conv stage's patches (one output channel x 2 x 2 conv positions each) are split into
//   kBlocks ranges, each patch's geometry worked out at load (PatchRecord); the head's first
//   layer's columns the same way, each block holding only its columns' weights and its patches'
//   records (bulk copies of its run of the rank image) and the stages' filters (bulk copies);
//   the head's later layers, small, run whole in every block (no exchange after them);
// - a block sends each output it computes to every block's copy of the next layer's input
//   (st.async, counted on that block's mbarrier for the layer), already in the next stage's
//   zero-padded staged layout; a block starts a layer once its mbarrier has all the other
//   blocks' bytes. One cluster barrier a launch (every mbarrier initialised), none per layer.
//
// Napkin math, LeNet-5 at batch 1:
//   conv1 117.6 K and conv2 240 K multiply-adds over 8 SMs: ~350 clocks each of 128 fp32 lanes.
//   The time is each thread's dependent chain. A patch's reduction rows (input channel x kernel
//   row: 5 for conv1, 30 for conv2) are shared by as many threads as the block has to spare
//   (conv1: 147 patches per block, 3 threads each; conv2: 50 patches, 10 threads each), so a
//   chain is ~10 taps of ~10 instructions, then the sum of the shares, bias, tanh and the
//   pooling window (~200).
// At batch 1 a warp issues one instruction every ~11 cycles on dependent chains, so what sets
// the time is the count of instructions on each layer's path, not the pipes' rates: the
// geometry precomputed at load, divisions as multiply-high and shift, loads issued together,
// and values the compiler would read again at each layer (threadIdx.x, the loop's fields) kept
// in registers. The work is spread over a cluster rather than one SM because one SM for
// everything stalls on shared-memory issue and barriers.
#include "backends/cuda/conv/conv_net.hpp"

#include <cooperative_groups.h>
#include <cuda_pipeline.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "backends/cuda/conv/conv_pool_tile.cuh"
#include "backends/cuda/device/dependent_launch.cuh"
#include "backends/cuda/device/epilogue.cuh"
#include "backends/cuda/device/fast_divisor.hpp"
#include "backends/cuda/device/kept_in_register.cuh"
#include "backends/cuda/device/kernel_timeline.cuh"
#include "backends/cuda/device/mbarrier.cuh"
#include "backends/cuda/platform/cuda_check.hpp"
#include "backends/cuda/platform/device_memory.hpp"
#include "backends/cuda/platform/launch.hpp"
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

// Where a layer's outputs go: the next layer's input in every block of the cluster (shared
// memory, counted on that layer's mbarrier), or the sample's output in global memory.
struct Destination {
  int32_t global;  // 1: y, 0: the next layer's input
  uint32_t base;   // float offset of the next layer's input in shared memory
  // Output (channel, row, column) of a conv stage lands at base + channel * channel_stride +
  // (row - row_origin) * row_stride + column - col_origin when that is inside the next stage's
  // staged rows x cols (a stage may not read its input's last rows or columns); a head layer's
  // column c at base + c.
  int32_t channel_stride, row_stride, row_origin, col_origin, rows, cols;
  uint32_t barrier;  // byte offset of the next layer's mbarrier in shared memory
};

// One of a block's patches as the plan works it out at load (patch_record()): where its staged
// input and filters start, and what its finish does with the sums. Reading these is one
// shared-memory round trip where computing them in the finish from the stage's fields takes ~100
// dependent instructions a patch (the patch's coordinates, the pooling window's divisor, the
// destination's bounds) on every conv stage's path at batch 1.
struct alignas(16) PatchRecord {
  // Float offsets from the layer's Destination of the outputs in order (conv position dy * 2 +
  // dx; pooled: the window, at[0] only), -1 for one not sent (past the output, or outside the
  // rows and columns the next stage reads).
  int32_t at[4];
  int32_t channel;  // output channel: the bias's index
  // Bits 0-3: the conv positions inside the conv output (the window's average and max read only
  // those); kPooled, kMaxPool.
  uint32_t flags;
  float reciprocal;  // 1 / divisor where that is exact (divisors 1, 2 and 4), else 0
  float divisor;     // PyTorch's (the CPU backend's) average divisor
  int32_t input;     // float offset of the patch's first tap in the staged input
  int32_t filter;    // float offset of its channel's first tap in the stage's filters
  int32_t unused[2];
  static constexpr uint32_t kPooled = 1u << 4, kMaxPool = 1u << 5;
};
static_assert(sizeof(PatchRecord) % 16 == 0, "records are bulk-copied as a run of 16 bytes");

struct Stage {
  ConvPoolParams conv;    // geometry of the small tile over a whole sample, filters, bias
  int32_t staged_height;  // rows of one staged input plane
  int32_t items;          // patches: out_channels x patch rows x patch columns
  int32_t items_per_block;
  // A patch sums over in_channels x kernel_height rows of taps; when a block has few patches,
  // `splits` threads share one, each over rows_per_split of those rows.
  int32_t splits;
  int32_t rows_per_split;
  // The plan's divisors (the split of a unit, a reduction row's input channel): at batch 1 each
  // division by a runtime value is a ~20-instruction chain on a layer's path.
  FastDivisor by_items_per_block, by_kernel_height;
  uint32_t records;  // float offset of this block's PatchRecords in shared memory
  uint32_t filters;  // float offset of this stage's SmallTile image in shared memory
  uint32_t bias;     // float offset of its bias in shared memory (conv.bias not null)
  uint32_t input;    // float offset of its staged input planes in shared memory
  Destination to;
};

struct HeadLayer {
  bool has_bias;
  // Every block computes all `out` columns from its own copy of the weights and keeps them (the
  // last layer: block 0 writes y), instead of its run of columns sent to every block.
  bool whole;
  int32_t in, out;
  int32_t columns;  // per block: out (whole) or out / kBlocks rounded up
  // A column's `group` adjacent lanes (a power of two up to 32, log2 here) each sum every
  // group-th float4 chunk of the input; a butterfly adds their sums.
  int32_t group_shift;
  int32_t chunks;  // float4 chunks of the input: in / 4 rounded up (the rest zeros)
  int32_t steps;   // chunks a lane sums at most: chunks / group rounded up
  // Float offset of this block's weights in shared memory, [step][column][lane][4] (chunk
  // step x group + lane of the column), so that a warp's loads of a step are 512 contiguous
  // bytes; then the columns' bias.
  uint32_t weights;
  uint32_t bias_at;
  uint32_t input;  // float offset of the layer's input vector in shared memory (chunks x 4)
  Destination to;
  DeviceEpilogue epilogue;
};

constexpr int kMaxLayers = kConvNetMaxStages + kFusedMlpMaxLayers;

struct alignas(16) ConvNetParams {
  const float* x;
  float* y;
  int32_t input_floats;   // per sample
  int32_t output_floats;  // per sample
  int32_t stage_count;
  int32_t head_count;
  uint32_t scratch;  // float offset of the split stages' partial sums
  // x goes into stage 0's staged planes once the previous grid is done, in pieces of
  // 1 << x_piece_shift floats (16, 8 or 4 bytes: what the input's width, its padding and x's
  // alignment allow), one cp.async each; the zeros around them are written before the wait.
  int32_t x_piece_shift;
  FastDivisor by_in_width, by_in_height;
  // What differs from block to block, [rank][every stage's PatchRecords, then every head layer's
  // HeadLayer weights and bias]: a block takes its run (rank_floats from rank_image + rank *
  // rank_floats) in two bulk copies, the records (records_floats) to records_base with the
  // filters, and the rest to head_base.
  const float* rank_image;
  uint32_t rank_floats;
  uint32_t records_floats;
  uint32_t records_base;
  uint32_t head_base;
  // Bytes the other blocks send into block b's input of layer l (l >= 1): what its mbarrier for
  // that layer waits for.
  uint32_t expected_bytes[kMaxLayers][kBlocks];
  Stage stages[kConvNetMaxStages];
  HeadLayer head[kFusedMlpMaxLayers];
};

// Shared memory, in floats: the mbarriers (slot 0: the filters' and the patch records' bulk
// copies; slot l: layer l's input; slot kHeadSlot: the head's bulk copy), a copy of the
// parameters (read there rather than through the constant cache), then the plan's regions from
// kParamsFloats on.
constexpr int kHeadSlot = kMaxLayers;
constexpr uint32_t kBarrierFloats = (2 * (kHeadSlot + 1) + 3) / 4 * 4;
constexpr uint32_t kParamsFloats =
    kBarrierFloats + (sizeof(ConvNetParams) + 15) / 16 * 4;  // a multiple of 4 floats
static_assert(kBarrierFloats % 4 == 0, "the parameters' copy starts on 16 bytes");

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900  // the kernel's pieces, sm_90+ only

constexpr int kWarps = kThreads / 32;

// Timeline stamps (kernel_timeline.cuh) from block 0's thread 0: entry, parameters copied, the
// conv biases and the stages' zeros issued, mbarriers initialised, bulk copies issued, the
// previous grid done, x issued, its own copies of x and the biases landed, the block's landed,
// then per layer: input arrived (for the first, the filters), block synchronised, partial sums
// done, first output computed, outputs sent.
constexpr int kLeadPhases = 9;
constexpr int kPhasesPerLayer = 5;
struct Stamps {
  bool on;
  int last;
  unsigned int launch;  // timeline_launch(), read once
};
// Phases past the timeline's row (nets of more than 5 layers) are not stamped.
#define FDNN_CONV_NET_STAMP(stamps, phase) \
  FDNN_TIMELINE_OF((stamps).launch, (stamps).on && (phase) <= (stamps).last, phase, (stamps).last)

// Sends one output value to every block's copy of the next layer's input (this block's by a
// plain store, the others' by st.async counted on their mbarrier), or to y. Before this thread's
// first remote store it waits for the cluster barrier that says every mbarrier is initialised.
struct Publisher {
  float* smem;
  float* y_sample;
  uint32_t remote[kBlocks - 1];  // the other blocks' shared memory, from this block's rank + 1
  int rank;
  bool cluster_ready;

  __device__ __forceinline__ void wait_for_cluster() {
    if (!cluster_ready) {
      asm volatile("barrier.cluster.wait.acquire;" ::: "memory");
      cluster_ready = true;
    }
  }
  // send() split over lanes: this one's part, block rank + offset's copy (offset < kBlocks).
  __device__ __forceinline__ void send_to_one(const Destination& to, uint32_t at, float value,
                                              int offset) {
    if (to.global) {
      if (offset == 0) y_sample[at] = value;
      return;
    }
    if (offset == 0) {
      smem[to.base + at] = value;
      return;
    }
    const uint32_t base = to.base, barrier = to.barrier;  // as in send()
    wait_for_cluster();
    const uint32_t bytes = sizeof(float) * (base + at);
    const uint32_t block = in_block(shared_address(smem), (rank + offset) % kBlocks);
    store_remote(block + bytes, value, block + barrier);
  }
  __device__ __forceinline__ void send(const Destination& to, uint32_t at, float value) {
    if (to.global) {
      y_sample[at] = value;
      return;
    }
    // The fields in registers before the stores: `to` may live in shared memory, where each
    // remote store's asm may write, so the compiler read to.barrier again before every store
    // (SASS: an LDS between consecutive STAS, each store waiting on it).
    const uint32_t base = to.base, barrier = to.barrier;
    smem[base + at] = value;
    wait_for_cluster();
    const uint32_t bytes = sizeof(float) * (base + at);
#pragma unroll
    for (int b = 0; b < kBlocks - 1; ++b) {
      store_remote(remote[b] + bytes, value, remote[b] + barrier);
    }
  }
};

// The zeros of a stage's input planes in the staged layout, where staged (c, i, j) is the input's
// (origin_row + i, origin_col + j): the padding around the input and each row's tail up to the
// pitch. x (stage 0) or the previous stage's blocks write the rest. A warp per staged row. The
// fields are read once into registers: the parameters live in shared memory, where every store
// here could alias them, and reloading them after each store, with a division per row, would make
// this a large part of the kernel's preamble.
__device__ void stage_zeros(const ConvPoolParams& p, int staged_height, float* staged) {
  const int in_channels = p.in_channels, in_height = p.in_height, in_width = p.in_width;
  const int origin_row = p.origin_row, origin_col = p.origin_col;
  const int row_pitch = p.row_pitch, staged_width = p.staged_width;
  const int plane_floats = p.plane_floats;
  const int lane = threadIdx.x % 32;
  for (int c = 0; c < in_channels; ++c) {
    for (int i = threadIdx.x / 32; i < staged_height; i += kWarps) {
      const int row = origin_row + i;
      const bool row_inside = row >= 0 && row < in_height;
      float* destination = staged + c * plane_floats + i * row_pitch;
      for (int j = lane; j < row_pitch; j += 32) {
        const int col = origin_col + j;
        if (!(row_inside && j < staged_width && col >= 0 && col < in_width)) {
          destination[j] = 0.0f;
        }
      }
    }
  }
}

// One output channel's 2 x 2 conv positions (a patch: its first tap at `patch` in the staged
// input, its channel's first filter value at `lane_filters` in the SmallTile image) over reduction
// rows [r_begin, r_end) (row r: input channel r / kernel_height, kernel row r % kernel_height).
// Loops rather than conv_pool.cu's unrolled register tiles: a thread here has a piece of one
// patch, and a short chain matters more than fewer loads. kWidth: the kernel width when the
// caller knows it (the row's taps unrolled, their loads issued together), 0 for any.
template <int kWidth>
__device__ __forceinline__ void accumulate_channel(const ConvPoolParams& p,
                                                   const FastDivisor& by_kernel_height,
                                                   const float* patch, const float* lane_filters,
                                                   int r_begin, int r_end, float (&acc)[4]) {
  const int kernel_height = p.kernel_height;
  const int kernel_width = kWidth > 0 ? kWidth : p.kernel_width;
  const int across = p.stride_width;               // the patch's second column
  const int down = p.stride_height * p.row_pitch;  // its second row
  const int taps = kernel_height * kernel_width;
  int c = by_kernel_height.divide(r_begin);
  int kh = r_begin - c * kernel_height;
  const int channel_floats = p.channel_groups * taps * SmallTile::kTapStride;
#pragma unroll 1
  for (int r = r_begin; r < r_end; ++r) {
    const float* row = patch + c * p.plane_floats + kh * p.row_pitch;
    const float* tap =
        lane_filters + c * channel_floats + kh * kernel_width * SmallTile::kTapStride;
#pragma unroll
    for (int kw = 0; kw < (kWidth > 0 ? kWidth : kConvPoolMaxKernel); ++kw) {
      if (kWidth == 0 && kw >= kernel_width) break;
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

// accumulate_channel() for stride 1 and a kernel width known at compile time: the patch's second
// column is the next float and its second row the next staged row, so a kernel row's kWidth + 1
// values of each of the two rows serve both columns (12 loads for 5 taps instead of 20), and the
// next kernel row of the same channel starts from this one's second row (6 more). The same
// products in the same order as accumulate_channel's.
template <int kWidth>
__device__ __forceinline__ void accumulate_channel_unit_stride(
    const ConvPoolParams& p, const FastDivisor& by_kernel_height, const float* patch,
    const float* lane_filters, int r_begin, int r_end, float (&acc)[4]) {
  const int kernel_height = p.kernel_height;
  const int pitch = p.row_pitch;
  const int taps = kernel_height * kWidth;
  int c = by_kernel_height.divide(r_begin);
  int kh = r_begin - c * kernel_height;
  const int channel_floats = p.channel_groups * taps * SmallTile::kTapStride;
  static_assert(kWidth % 2 == 1, "a kernel row's kWidth + 1 values load as pairs");
  float top[kWidth + 1], bottom[kWidth + 1];
  bool have_top = false;
#pragma unroll 1
  for (int r = r_begin; r < r_end; ++r) {
    const float* row = patch + c * p.plane_floats + kh * pitch;
    const float* tap = lane_filters + c * channel_floats + kh * kWidth * SmallTile::kTapStride;
    // In pairs: the row pitch and the plane are multiples of 4 floats (plan_conv_net() checks)
    // and a patch starts on an even column, so each pair is 8 bytes aligned.
#pragma unroll
    for (int j = 0; j <= kWidth; j += 2) {
      if (!have_top) {
        const float2 pair = *reinterpret_cast<const float2*>(row + j);
        top[j] = pair.x;
        top[j + 1] = pair.y;
      }
      const float2 pair = *reinterpret_cast<const float2*>(row + pitch + j);
      bottom[j] = pair.x;
      bottom[j + 1] = pair.y;
    }
#pragma unroll
    for (int kw = 0; kw < kWidth; ++kw) {
      const float f = tap[kw * SmallTile::kTapStride];
      acc[0] = fmaf(top[kw], f, acc[0]);
      acc[1] = fmaf(top[kw + 1], f, acc[1]);
      acc[2] = fmaf(bottom[kw], f, acc[2]);
      acc[3] = fmaf(bottom[kw + 1], f, acc[3]);
    }
    if (++kh == kernel_height) {
      kh = 0;
      ++c;
      have_top = false;
    } else {
#pragma unroll
      for (int j = 0; j <= kWidth; ++j) top[j] = bottom[j];
      have_top = true;
    }
  }
}

// Bias, epilogue and pooling of one of this block's patches (its record), sent on: the same
// arithmetic in the same order as conv_tile::finish_patch_to(), which the per-layer kernels use.
__device__ __forceinline__ void finish_patch(const ConvPoolParams& p, const PatchRecord& record,
                                             const float* bias,
                                             const float (&acc)[ChannelTile::kValues],
                                             Publisher& publisher, const Destination& to,
                                             [[maybe_unused]] const Stamps& stamps,
                                             [[maybe_unused]] int finished_phase) {
  const uint32_t flags = record.flags;
  const float b = bias != nullptr ? bias[record.channel] : 0.0f;
  float values[ChannelTile::kValues];
#pragma unroll
  for (int v = 0; v < ChannelTile::kValues; ++v) values[v] = acc[v] + b;
  conv_tile::apply_epilogue_to_all(p.epilogue, values);
  FDNN_CONV_NET_STAMP(stamps, finished_phase);
  if (!(flags & PatchRecord::kPooled)) {
#pragma unroll
    for (int v = 0; v < ChannelTile::kValues; ++v) {
      if (record.at[v] >= 0) publisher.send(to, static_cast<uint32_t>(record.at[v]), values[v]);
    }
    return;
  }
  if (record.at[0] < 0) return;
  // The window's conv outputs in the CPU backend's order, only those inside the output.
  float result;
  if (flags & PatchRecord::kMaxPool) {
    result = -INFINITY;
#pragma unroll
    for (int v = 0; v < ChannelTile::kValues; ++v) {
      if ((flags >> v & 1u) && ((values[v] > result) | (values[v] != values[v]))) {
        result = values[v];
      }
    }
  } else {
    float sum = 0.0f;
#pragma unroll
    for (int v = 0; v < ChannelTile::kValues; ++v) {
      if (flags >> v & 1u) sum += values[v];
    }
    if (record.reciprocal != 0.0f) {
      result = sum * record.reciprocal;
    } else {
      result = record.divisor == 0.0f ? 0.0f : sum / record.divisor;
    }
  }
  publisher.send(to, static_cast<uint32_t>(record.at[0]), result);
}

// This block's patches of the stage, from its staged input: thread (split, patch) sums its share
// of the reduction rows; the shares are added in order.
__device__ __forceinline__ void run_stage(const Stage& stage, int rank, int tid, const float* smem,
                                          float* scratch, Publisher& publisher,
                                          [[maybe_unused]] const Stamps& stamps,
                                          [[maybe_unused]] int partial_phase) {
  const ConvPoolParams& p = stage.conv;
  const float* staged = smem + stage.input;
  const float* filters = smem + stage.filters;
  const PatchRecord* records = reinterpret_cast<const PatchRecord*>(smem + stage.records);
  const float* bias = p.bias != nullptr ? smem + stage.bias : nullptr;
  // In registers, as in Publisher::send().
  const Destination to{stage.to.global, stage.to.base, 0, 0, 0, 0, 0, 0, stage.to.barrier};
  const int per_block = stage.items_per_block;
  const int count = max(0, min(stage.items - rank * per_block, per_block));
  // Unit u: split u / per_block of patch u % per_block (the last block's units past its count
  // idle), so that the divisor is the plan's.
  const int units = per_block * stage.splits;
  const int splits = stage.splits;
  const FastDivisor by_kernel_height = stage.by_kernel_height;
  for (int u = tid; u < units; u += kThreads) {
    const int split = stage.by_items_per_block.divide(u);
    const int local = u - split * per_block;
    if (local >= count) continue;
    const int2 where = *reinterpret_cast<const int2*>(&records[local].input);
    const float* patch = staged + where.x;
    const float* lane_filters = filters + where.y;
    const int r_begin = split * stage.rows_per_split;
    const int r_end = min(p.in_channels * p.kernel_height, r_begin + stage.rows_per_split);
    float acc[ChannelTile::kValues] = {0.0f, 0.0f, 0.0f, 0.0f};
    const bool unit_stride = p.stride_width == 1 && p.stride_height == 1;
    if (p.kernel_width == 5 && unit_stride) {
      accumulate_channel_unit_stride<5>(p, by_kernel_height, patch, lane_filters, r_begin, r_end,
                                        acc);
    } else if (p.kernel_width == 3 && unit_stride) {
      accumulate_channel_unit_stride<3>(p, by_kernel_height, patch, lane_filters, r_begin, r_end,
                                        acc);
    } else if (p.kernel_width == 5) {
      accumulate_channel<5>(p, by_kernel_height, patch, lane_filters, r_begin, r_end, acc);
    } else if (p.kernel_width == 3) {
      accumulate_channel<3>(p, by_kernel_height, patch, lane_filters, r_begin, r_end, acc);
    } else {
      accumulate_channel<0>(p, by_kernel_height, patch, lane_filters, r_begin, r_end, acc);
    }
    if (splits == 1) {
      finish_patch(p, records[local], bias, acc, publisher, to, stamps, partial_phase + 1);
    } else {
#pragma unroll
      for (int v = 0; v < ChannelTile::kValues; ++v) scratch[v * units + u] = acc[v];
    }
  }
  if (splits == 1) {
    FDNN_CONV_NET_STAMP(stamps, partial_phase);
    return;
  }
  __syncthreads();
  FDNN_CONV_NET_STAMP(stamps, partial_phase);
  for (int local = tid; local < count; local += kThreads) {
    // Splits outer, values inner: each split's four loads issue together (the same additions in
    // the same order as a loop per value, whose loads waited one by one).
    float acc[ChannelTile::kValues];
#pragma unroll
    for (int v = 0; v < ChannelTile::kValues; ++v) acc[v] = scratch[v * units + local];
#pragma unroll 2
    for (int split = 1; split < splits; ++split) {
#pragma unroll
      for (int v = 0; v < ChannelTile::kValues; ++v) {
        acc[v] += scratch[v * units + split * per_block + local];
      }
    }
    finish_patch(p, records[local], bias, acc, publisher, to, stamps, partial_phase + 1);
  }
}

// The sum of `sum` over kLanes adjacent lanes (a power of two), in every one of them.
template <int kLanes>
__device__ __forceinline__ float sum_over_lanes(float sum) {
#pragma unroll
  for (int offset = kLanes / 2; offset > 0; offset /= 2) {
    sum += __shfl_xor_sync(0xffffffffu, sum, offset);
  }
  return sum;
}

// This block's columns of a head layer (a whole layer: all of them): output[c] =
// epilogue(bias[c] + sum_i input[i] W[c][i]). A column's group of adjacent lanes each sum their
// float4 chunks into four accumulators (four short chains, each chunk's two loads issued
// together), a butterfly adds the lanes' sums, and every lane of the group holds the result:
// lane b sends it on to block rank + b (and every group-th after), or for a whole layer lane 0
// keeps it in this block's input of the next layer (the last layer: block 0 writes y). No
// barrier between the sums and the sends. The layer's fields are read into registers first:
// each is a shared-memory load, and on this path every dependent load's latency counts.
__device__ __forceinline__ void run_head_layer(const HeadLayer& layer, int rank, int tid,
                                               const float* smem, Publisher& publisher,
                                               [[maybe_unused]] const Stamps& stamps,
                                               [[maybe_unused]] int partial_phase) {
  const int shift = layer.group_shift;
  const int group = 1 << shift;
  const int lane = tid & (group - 1);
  const int chunks = layer.chunks;
  const int step_stride = layer.columns << shift;  // float4s from one step to the next
  const int first = layer.whole ? 0 : rank * layer.columns;
  const int count = min(layer.columns, layer.out - first);
  const bool whole = layer.whole, has_bias = layer.has_bias;
  const Destination to{layer.to.global, layer.to.base, 0, 0, 0, 0, 0, 0, layer.to.barrier};
  const float* bias = smem + layer.bias_at;
  const int op_count = layer.epilogue.count;
  const int op_kind = layer.epilogue.kind[0];
  const float op_parameter = layer.epilogue.parameter[0];
  // This lane's chunks: lane, lane + group, ... below chunks.
  const int mine = lane < chunks ? ((chunks - 1 - lane) >> shift) + 1 : 0;
  const float4* input = reinterpret_cast<const float4*>(smem + layer.input) + lane;
  const float4* weights = reinterpret_cast<const float4*>(smem + layer.weights) + lane;
  // Uniform over the block (a group never spans warps), so every lane reaches the butterfly.
  for (int base = 0; base < count; base += kThreads >> shift) {
    const int c = base + (tid >> shift);
    float sum = 0.0f, b = 0.0f;
    if (c < count) {
      if (has_bias) b = bias[c];
      const float4* v_at = input;
      const float4* f_at = weights + (c << shift);
      float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll 2
      for (int k = 0; k < mine; ++k) {
        const float4 v = *v_at;
        const float4 f = *f_at;
        v_at += group;
        f_at += step_stride;
        acc[0] = fmaf(v.x, f.x, acc[0]);
        acc[1] = fmaf(v.y, f.y, acc[1]);
        acc[2] = fmaf(v.z, f.z, acc[2]);
        acc[3] = fmaf(v.w, f.w, acc[3]);
      }
      sum = (acc[0] + acc[1]) + (acc[2] + acc[3]);
    }
    switch (shift) {  // straight-line butterflies (a loop over the offsets takes ~7 instructions
                      // a level, a predicated unrolled one ~9)
      case 5: sum = sum_over_lanes<32>(sum); break;
      case 4: sum = sum_over_lanes<16>(sum); break;
      case 3: sum = sum_over_lanes<8>(sum); break;
      case 2: sum = sum_over_lanes<4>(sum); break;
      case 1: sum = sum_over_lanes<2>(sum); break;
      default: break;
    }
    FDNN_CONV_NET_STAMP(stamps, partial_phase);
    if (c >= count) continue;
    if (has_bias) sum += b;
    const float value =
        op_count == 1 ? apply_op(op_kind, op_parameter, sum) : apply_epilogue(layer.epilogue, sum);
    FDNN_CONV_NET_STAMP(stamps, partial_phase + 1);
    const int column = first + c;
    if (!whole) {
      for (int offset = lane; offset < kBlocks; offset += group) {
        publisher.send_to_one(to, static_cast<uint32_t>(column), value, offset);
      }
    } else if (lane == 0) {
      if (!to.global) {
        publisher.smem[to.base + column] = value;
      } else if (rank == 0) {
        publisher.y_sample[column] = value;
      }
    }
  }
}

// Piece e of a sample's x (x_piece_shift): its float offset in x and in shared memory; false for
// one stage 0 does not read (rows past its staged rows, columns past its staged width).
__device__ __forceinline__ bool locate_x_piece(const ConvNetParams& q, int e, int* from,
                                               uint32_t* to) {
  const Stage& stage = q.stages[0];
  const ConvPoolParams& p = stage.conv;
  const int f = e << q.x_piece_shift;
  const int row = q.by_in_width.divide(f);  // over channels x rows
  const int channel = q.by_in_height.divide(row);
  const int i = row - channel * p.in_height - p.origin_row;  // origin_row <= 0
  const int j = f - row * p.in_width - p.origin_col;         // origin_col <= 0
  if (i >= stage.staged_height || j + (1 << q.x_piece_shift) > p.staged_width) return false;
  *from = f;
  *to = stage.input + channel * p.plane_floats + i * p.row_pitch + j;
  return true;
}

// cp.async of one piece of x (16, 8 or 4 bytes, aligned to as many).
__device__ __forceinline__ void copy_x_piece(float* destination, const float* source, int shift) {
  switch (shift) {
    case 2: __pipeline_memcpy_async(destination, source, 16); break;
    case 1: __pipeline_memcpy_async(destination, source, 8); break;
    default: __pipeline_memcpy_async(destination, source, 4); break;
  }
}

#endif

__global__ void FDNN_CONV_NET_CLUSTER __launch_bounds__(kThreads, 1)
    conv_net_kernel(const __grid_constant__ ConvNetParams p) {
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
  namespace cg = cooperative_groups;
  extern __shared__ float4 shared_memory[];
  float* const smem = reinterpret_cast<float*>(shared_memory);
  const int rank = static_cast<int>(cg::this_cluster().block_rank());
  const int64_t n = blockIdx.x / kBlocks;
  const int tid = thread_index();
  const int layer_count = p.stage_count + p.head_count;
  [[maybe_unused]] const Stamps stamps{
      blockIdx.x == 0, min(kLeadPhases + kPhasesPerLayer * layer_count, kTimelinePhases) - 1,
      blockIdx.x == 0 && tid == 0 ? timeline_launch() : 0u};
  FDNN_CONV_NET_STAMP(stamps, 0);

  // The parameters into shared memory first (one round trip, then every field at shared-memory
  // latency). Launched as a dependent kernel (launch_dependent_kernel), a cluster may start while
  // the kernel before it finishes, so everything but x comes first: the conv biases (cp.async),
  // the zeros around every stage's planes, where this thread's piece of x goes, and thread 0's
  // mbarriers and bulk copies (the filters, this block's run of the rank image). Then x, once
  // the previous kernel is done.
  {
    const float4* source = reinterpret_cast<const float4*>(&p);
    float4* destination = shared_memory + kBarrierFloats / 4;
    for (int i = tid; i < static_cast<int>(sizeof(ConvNetParams) / 16); i += kThreads) {
      destination[i] = source[i];
    }
  }
  __syncthreads();
  FDNN_CONV_NET_STAMP(stamps, 1);
  const ConvNetParams& q = *reinterpret_cast<const ConvNetParams*>(smem + kBarrierFloats);
  for (int s = 0; s < q.stage_count; ++s) {
    const Stage& stage = q.stages[s];
    for (int c = tid; stage.conv.bias != nullptr && c < stage.conv.out_channels; c += kThreads) {
      __pipeline_memcpy_async(smem + stage.bias + c, stage.conv.bias + c, 4);  // 4 bytes each
    }
    stage_zeros(stage.conv, stage.staged_height, smem + stage.input);
  }
  // Where this thread's first piece of x goes, worked out before the wait.
  int x_from = 0;
  uint32_t x_to = 0;
  const bool x_first =
      tid < (q.input_floats >> q.x_piece_shift) && locate_x_piece(q, tid, &x_from, &x_to);
  for (int l = 0; l < q.head_count; ++l) {  // the zeros after each head input's last chunk
    const HeadLayer& layer = q.head[l];
    for (int i = layer.in + tid; i < 4 * layer.chunks; i += kThreads) smem[layer.input + i] = 0.0f;
  }
  FDNN_CONV_NET_STAMP(stamps, 2);
  if (tid == 0) {
    // The bulk copies (filters, the head's weights) complete on this block's slot 0 and
    // kHeadSlot. Each layer input's mbarrier expects the other blocks' bytes; remote stores may
    // land only once it is initialised: the cluster barrier, arrived at below and waited for
    // before this block's first remote store. The init fence publishes the mbarriers, so the
    // arrival itself is relaxed.
    for (int slot = 0; slot <= kHeadSlot; ++slot) {
      if (slot >= layer_count && (slot < kHeadSlot || q.head_count == 0)) continue;
      init_single_arrival(shared_address(smem + 2 * slot));
    }
    publish_mbarrier_init();
    FDNN_CONV_NET_STAMP(stamps, 3);
    for (int l = 1; l < layer_count; ++l) {
      expect_bytes(shared_address(smem + 2 * l), q.expected_bytes[l][rank]);
    }
    const float* run = q.rank_image + rank * q.rank_floats;  // this block's part of the image
    uint32_t filter_bytes = sizeof(float) * q.records_floats;
    for (int s = 0; s < q.stage_count; ++s) {
      filter_bytes += sizeof(float) * q.stages[s].conv.weight_floats;
    }
    expect_bytes(shared_address(smem), filter_bytes);
    bulk_copy(shared_address(smem + q.records_base), run, sizeof(float) * q.records_floats,
              shared_address(smem));
    for (int s = 0; s < q.stage_count; ++s) {
      const Stage& stage = q.stages[s];
      bulk_copy(shared_address(smem + stage.filters), stage.conv.weight,
                sizeof(float) * stage.conv.weight_floats, shared_address(smem));
    }
    if (q.head_count > 0) {
      const uint32_t bytes = sizeof(float) * (q.rank_floats - q.records_floats);
      expect_bytes(shared_address(smem + 2 * kHeadSlot), bytes);
      bulk_copy(shared_address(smem + q.head_base), run + q.records_floats, bytes,
                shared_address(smem + 2 * kHeadSlot));
    }
  }
  // What the layer loop decides on, in registers. Read from shared memory at each layer (after
  // its barriers the compiler can assume nothing about it), and with the mbarriers' address
  // worked out from a special register, these would be dependent instructions of tens of cycles
  // at the start of every layer.
  const int stage_count = q.stage_count;
  float* const scratch = smem + q.scratch;
  const uint32_t barriers = kept(shared_address(smem));
  uint32_t acquires = 0;  // bit l: other blocks send bytes into this block's input of layer l
  static_assert(kMaxLayers <= 32, "a bit a layer");
  for (int l = 1; l < layer_count; ++l) acquires |= (q.expected_bytes[l][rank] != 0 ? 1u : 0u) << l;
  FDNN_CONV_NET_STAMP(stamps, 4);
  wait_for_previous_grid();
  allow_next_grid();
  FDNN_CONV_NET_STAMP(stamps, 5);
  {
    const float* x = q.x + n * q.input_floats;
    const int shift = q.x_piece_shift;
    if (x_first) copy_x_piece(smem + x_to, x + x_from, shift);
    for (int e = tid + kThreads; e < (q.input_floats >> shift); e += kThreads) {
      if (locate_x_piece(q, e, &x_from, &x_to)) copy_x_piece(smem + x_to, x + x_from, shift);
    }
  }
  __pipeline_commit();  // the conv biases and x, one group
  FDNN_CONV_NET_STAMP(stamps, 6);
  if (layer_count > 1) asm volatile("barrier.cluster.arrive.relaxed;" ::: "memory");

  Publisher publisher;
  publisher.smem = smem;
  publisher.rank = rank;
  publisher.y_sample = q.y + n * q.output_floats;
  publisher.cluster_ready = layer_count == 1;
  for (int b = 0; b < kBlocks - 1; ++b) {
    publisher.remote[b] = in_block(shared_address(smem), (rank + 1 + b) % kBlocks);
  }
  for (int l = 0; l < layer_count; ++l) {
    [[maybe_unused]] const int phase = kLeadPhases + kPhasesPerLayer * l;
    if (l == 0) {
      __pipeline_wait_prior(0);  // this thread's conv biases and x
      FDNN_CONV_NET_STAMP(stamps, 7);
      __syncthreads();  // everyone's, and thread 0 has initialised the mbarriers
      FDNN_CONV_NET_STAMP(stamps, 8);
      wait_for_phase_zero<AcquireScope::Block>(barriers);  // filters, records
    } else {
      if (l == stage_count) {  // the head's weights
        wait_for_phase_zero<AcquireScope::Block>(barriers + sizeof(uint64_t) * kHeadSlot);
      }
      // Not after a whole head layer: no other block sends this one anything, and its own
      // outputs are the block barrier's below (a cluster-scope acquire would wait on L2).
      if (acquires >> l & 1u) {
        wait_for_phase_zero<AcquireScope::Cluster>(barriers + sizeof(uint64_t) * l);
      }
    }
    FDNN_CONV_NET_STAMP(stamps, phase);
    __syncthreads();  // this block's part of the input, the other threads' copies
    FDNN_CONV_NET_STAMP(stamps, phase + 1);
    if (l < stage_count) {
      run_stage(q.stages[l], rank, tid, smem, scratch, publisher, stamps, phase + 2);
    } else {
      run_head_layer(q.head[l - stage_count], rank, tid, smem, publisher, stamps, phase + 2);
    }
    if (l == 0) publisher.wait_for_cluster();  // every thread waits for the barrier once
    FDNN_CONV_NET_STAMP(stamps, phase + 4);
  }
#endif
}

int64_t round_up(int64_t a, int64_t b) { return (a + b - 1) / b * b; }

// Patch `item` of a stage (block rank's items_per_block from rank x items_per_block on): output
// channel o of patch (ty, tx), as finish_patch_to() has them. The channel varies fastest, so that
// a warp's lanes read the same staged inputs (a broadcast) and neighbouring filters;
// position-major lanes would read inputs 2 floats apart on rows of one pitch, up to 7 to a bank,
// and the conv stages would wait on bank conflicts. Then where its input and
// filters start and what its finish does, worked out as conv_tile::finish_patch_to() does on the
// device: which conv positions lie inside the output, the pooling window's divisor, and where
// each output lands (unless it goes to y, only inside the next stage's staged rows and columns).
PatchRecord patch_record(const Stage& stage, int item) {
  const ConvPoolParams& p = stage.conv;
  const Destination& to = stage.to;
  const int o = item % p.out_channels, position = item / p.out_channels;
  const int ty = position / p.patch_cols, tx = position % p.patch_cols;
  PatchRecord record{};
  record.channel = o;
  record.input = (ty * 2 * p.stride_height * p.row_pitch) + tx * 2 * p.stride_width;
  const int taps = p.kernel_height * p.kernel_width;
  record.filter = (o / SmallTile::kCo) * taps * SmallTile::kTapStride + o % SmallTile::kCo;
  auto destination = [&](int row, int col) {
    if (to.global) return o * p.pooled_height * p.pooled_width + row * p.pooled_width + col;
    const int i = row - to.row_origin, j = col - to.col_origin;
    if (i < 0 || i >= to.rows || j < 0 || j >= to.cols) return -1;  // not read
    return o * to.channel_stride + i * to.row_stride + j;
  };
  const int r0 = ty * ChannelTile::kR - p.pool_padding_height;
  const int c0 = tx * ChannelTile::kC - p.pool_padding_width;
  for (int v = 0; v < ChannelTile::kValues; ++v) {
    const int row = r0 + v / ChannelTile::kC, col = c0 + v % ChannelTile::kC;
    const bool inside = row >= 0 && row < p.conv_height && col >= 0 && col < p.conv_width;
    record.flags |= inside ? 1u << v : 0u;
    record.at[v] = inside && p.pool_window != 2 ? destination(row, col) : -1;
  }
  if (p.pool_window == 2) {
    record.flags |= PatchRecord::kPooled | (p.pool_max ? PatchRecord::kMaxPool : 0u);
    if (ty < p.pooled_height && tx < p.pooled_width) record.at[0] = destination(ty, tx);
    const int row_begin = std::max(r0, 0), row_end = std::min(r0 + 2, p.conv_height);
    const int col_begin = std::max(c0, 0), col_end = std::min(c0 + 2, p.conv_width);
    int count = 0;
    if (row_begin < row_end && col_begin < col_end) {
      if (p.count_include_pad) {
        const int padded_row_end = std::min(r0 + 2, p.conv_height + p.pool_padding_height);
        const int padded_col_end = std::min(c0 + 2, p.conv_width + p.pool_padding_width);
        count = (padded_row_end - r0) * (padded_col_end - c0);
      } else {
        count = (row_end - row_begin) * (col_end - col_begin);
      }
    }
    record.divisor = static_cast<float>(count);
    record.reciprocal = count == 4 ? 0.25f : count == 2 ? 0.5f : count == 1 ? 1.0f : 0.0f;
  }
  return record;
}

// Block rank's records for a stage (items past the stage's last are left out).
std::vector<PatchRecord> patch_records(const Stage& stage, int rank) {
  std::vector<PatchRecord> records;
  const int first = rank * stage.items_per_block;
  const int last = std::min(stage.items, first + stage.items_per_block);
  for (int item = first; item < last; ++item) records.push_back(patch_record(stage, item));
  return records;
}

// The values block `rank` sends on for a stage.
int64_t values_sent(const Stage& stage, int rank) {
  int64_t sent = 0;
  for (const PatchRecord& record : patch_records(stage, rank)) {
    for (int v = 0; v < ChannelTile::kValues; ++v) sent += record.at[v] >= 0;
  }
  return sent;
}

// A head layer's weights for one block: HeadLayer::weights' layout, then the bias rounded up to
// 4 floats.
int64_t head_layer_floats(const HeadLayer& h) {
  return (int64_t{h.steps} * h.columns << h.group_shift) * 4 + round_up(h.columns, 4);
}

}  // namespace

struct ConvNetLaunch {
  ConvNetParams params;
  size_t shared_bytes = 0;
  DeviceArray<float> rank_image;
};

namespace {

// ConvNetParams::rank_image: the stages' patch records, then the head's layers from their device
// weights, regrouped on the host at load.
DeviceArray<float> build_rank_image(const std::vector<FusedMlpLayerDesc>& head,
                                    const ConvNetParams& p) {
  const size_t rank_floats = p.rank_floats;
  std::vector<float> image(rank_floats * kBlocks, 0.0f);
  for (int rank = 0; rank < kBlocks; ++rank) {
    for (int s = 0; s < p.stage_count; ++s) {
      const std::vector<PatchRecord> records = patch_records(p.stages[s], rank);
      std::memcpy(image.data() + rank * rank_floats + (p.stages[s].records - p.records_base),
                  records.data(), records.size() * sizeof(PatchRecord));
    }
  }
  size_t layer_offset = p.records_floats;  // within a block's run
  for (size_t l = 0; l < head.size(); ++l) {
    const FusedMlpLayerDesc& layer = head[l];
    const HeadLayer& h = p.head[l];
    std::vector<float> weight_t(static_cast<size_t>(layer.in) * layer.padded_out);
    std::vector<float> bias(static_cast<size_t>(layer.out), 0.0f);
    FDNN_CUDA_CHECK(cudaMemcpy(weight_t.data(), layer.weight_t, weight_t.size() * sizeof(float),
                               cudaMemcpyDeviceToHost));
    if (layer.bias != nullptr) {
      FDNN_CUDA_CHECK(
          cudaMemcpy(bias.data(), layer.bias, bias.size() * sizeof(float), cudaMemcpyDeviceToHost));
    }
    for (int rank = 0; rank < kBlocks; ++rank) {
      float* run = image.data() + rank * rank_floats + layer_offset;
      const int group = 1 << h.group_shift;
      for (int c = 0; c < h.columns; ++c) {
        const int column = h.whole ? c : rank * h.columns + c;
        if (column >= layer.out) break;
        for (int i = 0; i < layer.in; ++i) {
          const int chunk = i / 4, step = chunk / group, lane = chunk % group;
          run[((static_cast<size_t>(step) * h.columns + c) * group + lane) * 4 + i % 4] =
              weight_t[static_cast<size_t>(i) * layer.padded_out + column];
        }
        run[h.bias_at - h.weights + c] = bias[column];
      }
    }
    layer_offset += static_cast<size_t>(head_layer_floats(h));
  }
  DeviceArray<float> device_image(image.size());
  FDNN_CUDA_CHECK(cudaMemcpy(device_image.data(), image.data(), image.size() * sizeof(float),
                             cudaMemcpyHostToDevice));
  return device_image;
}

}  // namespace

bool plan_conv_net(const std::vector<ConvNetStageDesc>& stages,
                   const std::vector<FusedMlpLayerDesc>& head, int64_t min_batch, int64_t max_batch,
                   const DeviceInfo& device, ConvNetPlan* plan) {
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
  p.stage_count = static_cast<int32_t>(stages.size());
  p.head_count = static_cast<int32_t>(head.size());
  // Shared memory in floats, regions in the order they are placed; every region starts on 16
  // bytes.
  int64_t offset = kParamsFloats;
  auto place = [&offset](int64_t floats) {
    const int64_t at = offset;
    offset += round_up(floats, 4);
    return static_cast<uint32_t>(at);
  };
  int64_t scratch_floats = 0;    // the split stages' partial sums
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
    // accumulate_channel_unit_stride() loads a row's values in aligned pairs.
    if (stage.conv.row_pitch % 2 != 0 || stage.conv.plane_floats % 2 != 0) return false;
    const int64_t input = int64_t{d.in_channels} * d.in_height * d.in_width;
    if (s == 0) {
      p.input_floats = static_cast<int32_t>(input);
    } else {
      const ConvPoolDesc& before = stages[s - 1].plan->desc;
      if (d.in_channels != before.out_channels || d.in_height != before.pooled_height ||
          d.in_width != before.pooled_width) {
        return false;
      }
    }
    if (s == 0) {
      // The widest pieces of x that stay aligned (launch_conv_net() narrows them for x itself):
      // the sample, each input row and the staged column of its first value are multiples of a
      // piece, and the rows fit the staged width (the zeros leave exactly them).
      const int32_t lead = -stage.conv.origin_col;
      p.x_piece_shift = 0;
      for (int32_t next = 2; next <= 4; next *= 2) {
        if (input % next != 0 || d.in_width % next != 0 || lead % next != 0 ||
            lead + d.in_width > stage.conv.staged_width) {
          break;
        }
        ++p.x_piece_shift;
      }
      p.by_in_width = make_fast_divisor(d.in_width);
      p.by_in_height = make_fast_divisor(d.in_height);
    }
    previous_output = int64_t{d.out_channels} * d.pooled_height * d.pooled_width;
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
    stage.by_items_per_block = make_fast_divisor(stage.items_per_block);
    stage.by_kernel_height = make_fast_divisor(stage.conv.kernel_height);
    stage.filters = place(shape.weight_floats);
    stage.bias = place(d.out_channels);
    stage.input = place(int64_t{d.in_channels} * stage.conv.plane_floats);
    if (stage.splits > 1) {
      scratch_floats =
          std::max<int64_t>(scratch_floats, per_block * stage.splits * ChannelTile::kValues);
    }
  }
  // Each block's patch records, every stage's in a row (the first part of its run of the rank
  // image).
  const int64_t record_floats = sizeof(PatchRecord) / sizeof(float);
  p.records_base = static_cast<uint32_t>(offset);
  for (size_t s = 0; s < stages.size(); ++s) {
    p.stages[s].records = place(record_floats * p.stages[s].items_per_block);
  }
  p.records_floats = static_cast<uint32_t>(offset - p.records_base);
  // The head: each block's part of every layer (its columns' weights, then their bias) as one
  // contiguous run of the rank image, placed in shared memory as it is in the image. The layers
  // after the first, up to kThreads columns wide, run whole in every block (all their columns in
  // every run): their outputs need no exchange between the blocks (LeNet-5's 120-84-10: 45 KB a
  // block). Where that does not fit, every layer is split over the blocks.
  const int64_t offset_before_head = offset, scratch_before_head = scratch_floats;
  const int64_t output_before_head = previous_output;
  // By default the layers after the head's first run whole in every block where they fit; the
  // override conv_net_whole_tail=0 splits every head layer over the blocks.
  size_t whole_from = device.overrides.conv_net_whole_tail ? 1 : head.size();
  for (;;) {
    offset = offset_before_head;
    scratch_floats = scratch_before_head;
    previous_output = output_before_head;
    int64_t rank_floats = 0;  // the head's part
    p.head_base = static_cast<uint32_t>(offset);
    for (size_t l = 0; l < head.size(); ++l) {
      const FusedMlpLayerDesc& layer = head[l];
      if (layer.weight_t == nullptr || layer.in != previous_output || layer.out < 1 ||
          layer.padded_out < layer.out || layer.padded_out % 4 != 0) {
        return false;
      }
      HeadLayer& h = p.head[l];
      h.has_bias = layer.bias != nullptr;
      h.whole = l >= whole_from && layer.out <= kThreads;
      h.in = layer.in;
      h.out = layer.out;
      h.columns = static_cast<int32_t>(h.whole ? layer.out : (layer.out + kBlocks - 1) / kBlocks);
      h.chunks = (layer.in + 3) / 4;
      // As many lanes per column as a pass over the columns leaves (all of a block's threads
      // where it can) and the chunks use.
      h.group_shift = 0;
      while (h.group_shift < 5 && int64_t{h.columns} << (h.group_shift + 1) <= kThreads &&
             (1 << h.group_shift) < h.chunks) {
        ++h.group_shift;
      }
      h.steps = (h.chunks + (1 << h.group_shift) - 1) >> h.group_shift;
      h.weights = static_cast<uint32_t>(p.head_base + rank_floats);
      h.bias_at = static_cast<uint32_t>(h.weights + head_layer_floats(h) - round_up(h.columns, 4));
      rank_floats += head_layer_floats(h);
      h.epilogue = layer.epilogue;
      previous_output = layer.out;
    }
    place(rank_floats);
    p.rank_floats = static_cast<uint32_t>(p.records_floats + rank_floats);
    for (size_t l = 0; l < head.size(); ++l) p.head[l].input = place(4 * p.head[l].chunks);
    p.output_floats = static_cast<int32_t>(previous_output);
    p.scratch = place(scratch_floats);

    // Where each layer's outputs go, and what each block's mbarrier for them waits for.
    const int layer_count = p.stage_count + p.head_count;
    for (int l = 0; l < layer_count; ++l) {
      Destination& to = l < p.stage_count ? p.stages[l].to : p.head[l - p.stage_count].to;
      to.global = l + 1 == layer_count;
      to.barrier = static_cast<uint32_t>(sizeof(uint64_t) * (l + 1));
      if (to.global) continue;
      if (l + 1 < p.stage_count) {
        const Stage& next = p.stages[l + 1];
        to.base = next.input;
        to.channel_stride = next.conv.plane_floats;
        to.row_stride = next.conv.row_pitch;
        to.row_origin = next.conv.origin_row;
        to.col_origin = next.conv.origin_col;
        to.rows = next.staged_height;
        to.cols = next.conv.staged_width;
      } else if (l + 1 == p.stage_count) {  // flattened into the head's input
        const ConvPoolParams& last = p.stages[l].conv;
        to.base = p.head[0].input;
        to.channel_stride = last.pooled_height * last.pooled_width;
        to.row_stride = last.pooled_width;
        to.rows = last.pooled_height;
        to.cols = last.pooled_width;
      } else {
        to.base = p.head[l + 1 - p.stage_count].input;
      }
      int64_t sent[kBlocks], total = 0;
      for (int rank = 0; rank < kBlocks; ++rank) {
        if (l < p.stage_count) {
          sent[rank] = values_sent(p.stages[l], rank);
        } else {
          const HeadLayer& h = p.head[l - p.stage_count];
          const int64_t first = int64_t{rank} * h.columns;
          const int64_t columns = std::min<int64_t>(h.out, first + h.columns) - first;
          sent[rank] = h.whole ? 0 : std::max<int64_t>(0, columns);
        }
        total += sent[rank];
      }
      for (int rank = 0; rank < kBlocks; ++rank) {
        p.expected_bytes[l + 1][rank] = static_cast<uint32_t>(sizeof(float) * (total - sent[rank]));
      }
    }

    launch->shared_bytes = static_cast<size_t>(offset) * sizeof(float);
    if (launch->shared_bytes <= device.shared_per_block_optin || whole_from >= head.size()) break;
    whole_from = head.size();
  }
  if (launch->shared_bytes > device.shared_per_block_optin) return false;
  // A failure here (out of memory, a failed copy) ends the model's creation like any other
  // allocation of the backend: the same model always runs the same kernels.
  launch->rank_image = build_rank_image(head, p);
  p.rank_image = launch->rank_image.data();
  // The kernel's body exists only where it was built for compute capability 9.0 or newer. The
  // shared-memory limit is the device's most, not this model's need: the attribute is the
  // kernel's, shared by every model in the process, and a smaller model's plan would otherwise
  // lower it under a larger one's launches.
  if (!kernel_built_for(reinterpret_cast<const void*>(conv_net_kernel), 90) ||
      cudaFuncSetAttribute(conv_net_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           static_cast<int>(device.shared_per_block_optin)) != cudaSuccess) {
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
  const auto x_address = reinterpret_cast<uintptr_t>(x);
  while (p.x_piece_shift > 0 && x_address % (sizeof(float) << p.x_piece_shift) != 0) {
    --p.x_piece_shift;  // a caller's x on fewer bytes
  }
  launch_dependent_kernel(conv_net_kernel, "conv_net_kernel",
                          dim3(static_cast<unsigned>(batch * kBlocks)), dim3(kThreads),
                          plan.launch->shared_bytes, stream, p);
}

}  // namespace fusednn::cuda
