// SPDX-License-Identifier: Apache-2.0
// The small-batch Linear (small_batch_linear.hpp): one block per kColumns output columns over
// the whole reduction, for all (up to 32) rows, on tensor cores in 3xTF32.
//
// A block streams x and its kColumns rows of W through shared memory in chunks of 128 k
// (cp.async, up to 8 stages, as many as ~200 KB holds, all but one in flight), both in their
// row-major layouts: x rows and W rows ([out][in]) alike are copied 16 bytes at a time. Each of
// its 16 warps takes one m16n8k8 k step (8 k) of every chunk for both 16-row tiles and every
// 8-column tile, reading A (x) and B (W) fragments straight from the staged rows; each fp32
// product is three tf32 products (small x big + big x small + big x big, fp32 accumulation), so
// results hold fp32's 1e-5 like the fused MLP's Tf32x3 form. At the end the 16 warps' partial
// sums go through shared memory and are added in a fixed order; the bias and the epilogue are
// applied before the one store.
//
// In this form every block reads all of x (at most 32 rows, from L2): for a wide layer such as
// 768 -> 3072 that is more L2 reads than W itself. From 16 rows, inputs that fit the stages at
// once run on the cluster form further down instead, which loads x once per pair of blocks.
// Slower alternatives: FMA pipes with a cluster of 4 blocks per column tile summing over
// distributed shared memory, or pushing the partial sums with st.async (the cluster barriers'
// MEMBAR.ALL.GPU, the remote stores, and clusters that cannot all be resident at once cost more
// than they save); FMA pipes without clusters (half of the instructions are not FFMA); a split
// form, a cluster of 4 (or 2) blocks per 96 (48) columns, each a quarter (half) of the
// reduction, sums added over distributed shared memory (its data arrive no faster and its
// finish costs more).
#include <cooperative_groups.h>
#include <cuda_pipeline.h>

#include <climits>
#include <cstddef>
#include <cstdint>

#include "backends/cuda/device/dependent_launch.cuh"
#include "backends/cuda/device/epilogue.cuh"
#include "backends/cuda/device/kernel_timeline.cuh"
#include "backends/cuda/device/mbarrier.cuh"
#include "backends/cuda/linear/small_batch_linear.hpp"
#include "backends/cuda/mlp/tensor_core_mma.cuh"
#include "backends/cuda/platform/launch.hpp"

namespace fusednn::cuda {
namespace {

constexpr int kThreads = 512;
constexpr int kWarps = kThreads / 32;
constexpr int64_t kClusterMinRows = 16;  // the cluster form from this many rows
constexpr int kRows = static_cast<int>(kSmallBatchLinearMaxRows);
constexpr int kChunk = 128;              // k per pipeline stage
constexpr int kStride = kChunk + 4;      // floats per staged row: 16-byte aligned, banks 4 apart
constexpr int kPartK = kChunk / kWarps;  // each warp's k of a chunk
constexpr int kVectors = kChunk / 4;     // 16-byte copies per staged row and chunk
constexpr size_t kStageBudget = 200 * 1024;
static_assert(kRows == 32, "two 16-row tiles of m16n8k8");
static_assert(kPartK == 8, "each warp takes one m16n8k8 k step of a chunk");
static_assert(kThreads % kVectors == 0, "a thread copies one 16-byte column of rows");

struct SmallBatchParams {
  LinearArgs linear;
};

__host__ __device__ constexpr size_t stage_floats(int columns) {
  return static_cast<size_t>(kRows + columns) * kStride;
}
// As many stages as ~200 KB holds, at most 8: a block's copies in flight are what keeps its
// bytes moving (two chunks in flight leave each SM far below its share of the bandwidth).
__host__ __device__ constexpr int stages_for(int columns) {
  const size_t fit = kStageBudget / (stage_floats(columns) * sizeof(float));
  return fit < 8 ? static_cast<int>(fit) : 8;
}
// The stages, then (for the cluster form) one 8-byte mbarrier per stage.
__host__ __device__ constexpr size_t shared_bytes_of(int columns) {
  return stages_for(columns) * stage_floats(columns) * sizeof(float) + 8 * 8;
}

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
// 16 bytes from global to shared memory, or 16 zero bytes where !valid (nothing is read then).
__device__ __forceinline__ void copy_16_or_zero(float* destination, const float* source,
                                                bool valid) {
  const auto address = static_cast<uint32_t>(__cvta_generic_to_shared(destination));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(address), "l"(source),
               "r"(valid ? 16 : 0)
               : "memory");
}

// One staged chunk into a warp's accumulators, 3xTF32 on m16n8k8: each warp takes one k step
// (8 k) of every chunk for both 16-row tiles and all kTiles 8-column tiles. A element (m, k) is
// x row m, B element (k, n) W row n, both read straight from the staged rows (lane l reads row
// l/4 + ..., k l%4 + ...: 32 banks). Only the first row tile runs when `second_tile` is false.
template <int kTiles>
__device__ __forceinline__ void accumulate_chunk(const float* stage, int warp, int lane,
                                                 bool second_tile, float (&acc)[2][kTiles][4]) {
  const int r = lane / 4;
  const int q = lane % 4;
  stage += warp * kPartK + q;
  uint32_t a_big[2][4], a_small[2][4];
#pragma unroll
  for (int t = 0; t < 2; ++t) {
    if (t == 1 && !second_tile) break;
    const float* xs = stage + (16 * t + r) * kStride;
    const float values[4] = {xs[0], xs[8 * kStride], xs[4], xs[8 * kStride + 4]};
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      a_big[t][e] = to_tf32(values[e]);
      a_small[t][e] = tf32_remainder(values[e], a_big[t][e]);
    }
  }
#pragma unroll
  for (int u = 0; u < kTiles; ++u) {
    const float* ws = stage + (kRows + 8 * u + r) * kStride;
    const float w0 = ws[0];
    const float w1 = ws[4];
    const uint32_t b0 = to_tf32(w0);
    const uint32_t b1 = to_tf32(w1);
    const uint32_t s0 = tf32_remainder(w0, b0);
    const uint32_t s1 = tf32_remainder(w1, b1);
#pragma unroll
    for (int t = 0; t < 2; ++t) {
      if (t == 1 && !second_tile) break;
      // Small terms first so that they are not lost below the big product's rounding.
      mma<TensorCoreMath::Tf32>(acc[t][u], a_small[t], b0, b1);
      mma<TensorCoreMath::Tf32>(acc[t][u], a_big[t], s0, s1);
      mma<TensorCoreMath::Tf32>(acc[t][u], a_big[t], b0, b1);
    }
  }
}

// A thread finishes up to two outputs (finish_outputs); their biases are read before the
// products, so that the loads' latency hides under the staging instead of following it.
template <int kColumns>
__device__ __forceinline__ void prefetch_biases(const LinearArgs& a, int n0, float (&bias_of)[2]) {
  static_assert(kRows * kColumns <= 2 * kThreads, "at most two outputs a thread");
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    const int index = static_cast<int>(threadIdx.x) + j * kThreads;
    const int n = n0 + index % kColumns;
    bias_of[j] = a.bias != nullptr && index < kRows * kColumns && n < a.out ? a.bias[n] : 0.0f;
  }
}

// The 16 warps' accumulators through shared memory (`partial`, free for it once every warp is
// past its last chunk), added in warp order; bias (prefetch_biases), epilogue, one store per
// output.
template <int kTiles>
__device__ __forceinline__ void finish_outputs(const LinearArgs& a, int n0, float* partial,
                                               int warp, int lane, const float (&bias_of)[2],
                                               const float (&acc)[2][kTiles][4]) {
  constexpr int kColumns = 8 * kTiles;
  const int r = lane / 4;
  const int q = lane % 4;
#pragma unroll
  for (int t = 0; t < 2; ++t) {
#pragma unroll
    for (int u = 0; u < kTiles; ++u) {
      float* out = partial + (warp * kRows + 16 * t + r) * kColumns + 8 * u + 2 * q;
      out[0] = acc[t][u][0];
      out[1] = acc[t][u][1];
      out[8 * kColumns] = acc[t][u][2];
      out[8 * kColumns + 1] = acc[t][u][3];
    }
  }
  __syncthreads();  // every warp's partial sums are in place
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    const int index = static_cast<int>(threadIdx.x) + j * kThreads;
    const int row = index / kColumns;
    const int column = index - row * kColumns;
    const int n = n0 + column;
    if (index >= kRows * kColumns || row >= a.rows || n >= a.out) continue;
    float sum = bias_of[j];
#pragma unroll
    for (int w = 0; w < kWarps; ++w) sum += partial[w * kRows * kColumns + index];
    a.y[static_cast<int64_t>(row) * a.out + n] = apply_epilogue(a.epilogue, sum);
  }
}
#endif

// One block an SM (its stages take most of the shared memory), so up to 128 registers a thread.
template <int kTiles>
__global__ void __launch_bounds__(kThreads, 1)
    small_batch_linear_kernel(const __grid_constant__ SmallBatchParams p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  constexpr int kColumns = 8 * kTiles;
  constexpr int kStages = stages_for(kColumns);
  constexpr int kStageFloats = static_cast<int>(stage_floats(kColumns));
  constexpr int kRowsPerPass = kThreads / kVectors;  // 16
  constexpr int kCopies = (kRows + kColumns + kRowsPerPass - 1) / kRowsPerPass;
  static_assert(kWarps * kRows * kColumns <= kStages * kStageFloats, "partial sums fit");
  static_assert(kStages >= 2, "a stage in flight while one is read");
  extern __shared__ __align__(16) float shared[];

  const LinearArgs& a = p.linear;
  const int n0 = static_cast<int>(blockIdx.x) * kColumns;
  const int chunks = (a.in + kChunk - 1) / kChunk;
  float bias_of[2];
  prefetch_biases<kColumns>(a, n0, bias_of);

  // This thread copies 16-byte column v of staged rows first_row + 16 c: rows [0, kRows) are x's
  // rows, [kRows, kRows + kColumns) W's rows n0...; rows past the batch or the layer, and k past
  // the input width, are zero-filled.
  const int v = static_cast<int>(threadIdx.x) % kVectors;
  const int first_row = static_cast<int>(threadIdx.x) / kVectors;
  const float* copy_source[kCopies];
  bool copy_row_valid[kCopies];
#pragma unroll
  for (int c = 0; c < kCopies; ++c) {
    const int row = first_row + kRowsPerPass * c;
    const int n = n0 + row - kRows;
    const bool x_row = row < kRows;
    copy_row_valid[c] = x_row ? row < a.rows : row < kRows + kColumns && n < a.out;
    copy_source[c] = !copy_row_valid[c] ? a.weight
                     : x_row            ? a.x + static_cast<int64_t>(row) * a.in + 4 * v
                                        : a.weight + static_cast<int64_t>(n) * a.in + 4 * v;
  }
  auto stage_chunk = [&](int chunk) {
    float* stage = shared + (chunk % kStages) * kStageFloats + first_row * kStride + 4 * v;
    const int k0 = chunk * kChunk;
    const bool k_valid = k0 + 4 * v < a.in;
#pragma unroll
    for (int c = 0; c < kCopies; ++c) {
      if (first_row + kRowsPerPass * c >= kRows + kColumns) break;
      const bool valid = copy_row_valid[c] && k_valid;
      copy_16_or_zero(stage + kRowsPerPass * c * kStride, valid ? copy_source[c] + k0 : a.weight,
                      valid);
    }
  };
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < chunks) stage_chunk(s);
    __pipeline_commit();
  }

  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  float acc[2][kTiles][4] = {};
  for (int chunk = 0; chunk < chunks; ++chunk) {
    if (chunk + kStages - 1 < chunks) stage_chunk(chunk + kStages - 1);
    __pipeline_commit();
    __pipeline_wait_prior(kStages - 1);  // this chunk has landed (for this thread's copies)
    __syncthreads();                     // ... and for everyone's
    accumulate_chunk<kTiles>(shared + (chunk % kStages) * kStageFloats, warp, lane, a.rows > 16,
                             acc);
    __syncthreads();  // the stage is free for the copy issued at the top of the next chunk
  }
  __pipeline_wait_prior(0);
  __syncthreads();  // no copy into the stages is still in flight
  finish_outputs<kTiles>(a, n0, shared, warp, lane, bias_of, acc);
#endif
}

// Timeline stamps (kernel_timeline.cuh) of the cluster form, from block kTimelineBlock: entry,
// mbarriers ready, copies issued, each of the first kStampedChunks chunks landed, products done,
// outputs stored, exit.
#ifndef FDNN_SMALL_BATCH_TIMELINE_BLOCK
#define FDNN_SMALL_BATCH_TIMELINE_BLOCK 0
#endif
[[maybe_unused]] constexpr unsigned kTimelineBlock = FDNN_SMALL_BATCH_TIMELINE_BLOCK;
[[maybe_unused]] constexpr int kStampedChunks = 6;
[[maybe_unused]] constexpr int kLastStamp = 3 + kStampedChunks + 2;
#define FDNN_SMALL_BATCH_STAMP(phase) FDNN_TIMELINE(blockIdx.x == kTimelineBlock, phase, kLastStamp)

// Cluster dimensions are a property of the sm_90+ kernel; older targets compile an empty body
// (the plan never picks it there).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#define FDNN_CLUSTER_OF_TWO
#else
#define FDNN_CLUSTER_OF_TWO __cluster_dims__(2, 1, 1)
#endif

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
// bulk_copy() (mbarrier.cuh) into both blocks of the cluster, at the same offsets, counted on
// each one's mbarrier.
__device__ __forceinline__ void bulk_copy_to_both(uint32_t destination, const float* source,
                                                  uint32_t bytes, uint32_t barrier) {
  const uint16_t both = 0x3;
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster "
      "[%0], [%1], %2, [%3], %4;" ::"r"(destination),
      "l"(source), "r"(bytes), "r"(barrier), "h"(both)
      : "memory");
}
#endif

// The cluster form, for inputs of whole chunks that all fit the stages at once (768 -> 3072:
// 6 chunks of 128): a cluster of 2 blocks on neighbouring column tiles, each loading half of x's
// rows once for both (bulk copies multicast to both blocks) and its own W rows, every chunk
// issued up front onto the chunk's mbarrier. x's L2 traffic halves against the form above,
// where every block reads all of x (12.6 MB next to W's 9.4 MB for 768 -> 3072 at 32 rows).
// Rows past the batch and W rows past the layer are not copied: their stale shared memory only
// reaches outputs that are never stored (row m of the product reads only row m of x, column n
// only row n of W).
template <int kTiles>
__global__ void FDNN_CLUSTER_OF_TWO __launch_bounds__(kThreads, 1)
    small_batch_linear_cluster_kernel(const __grid_constant__ SmallBatchParams p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  constexpr int kColumns = 8 * kTiles;
  constexpr int kStages = stages_for(kColumns);
  constexpr int kStageFloats = static_cast<int>(stage_floats(kColumns));
  constexpr uint32_t kRowBytes = kChunk * sizeof(float);
  extern __shared__ __align__(16) float shared[];
  uint64_t* full = reinterpret_cast<uint64_t*>(shared + kStages * kStageFloats);

  const LinearArgs& a = p.linear;
  const int rank = static_cast<int>(cooperative_groups::this_cluster().block_rank());
  const int n0 = static_cast<int>(blockIdx.x) * kColumns;
  const int chunks = a.in / kChunk;  // the plan guarantees whole chunks, at most kStages
  const int x_rows = static_cast<int>(a.rows);
  const int w_rows = max(0, min(kColumns, a.out - n0));
  FDNN_SMALL_BATCH_STAMP(0);
  float bias_of[2];
  prefetch_biases<kColumns>(a, n0, bias_of);

  // Each chunk's mbarrier expects x's rows (half from each block) and this block's W rows; it
  // is set up before the cluster barrier, so no copy from the other block lands before it.
  if (threadIdx.x == 0) {
    for (int c = 0; c < chunks; ++c) {
      init_single_arrival(shared_address(full + c));
    }
    publish_mbarrier_init();
    const uint32_t bytes = static_cast<uint32_t>(x_rows + w_rows) * kRowBytes;
    for (int c = 0; c < chunks; ++c) {
      expect_bytes(shared_address(full + c), bytes);
    }
  }
  __syncthreads();
  __cluster_barrier_arrive_relaxed();
  __cluster_barrier_wait();
  FDNN_SMALL_BATCH_STAMP(1);

  // The copies go out in chunk order: copy i from lane i / kWarps of warp i % kWarps. A warp's
  // bulk copies issue a lane at a time, so every warp's first lanes carry chunk 0, and it lands
  // first. With copy i from thread i, chunk 0's copies (warps 0 and 1) would queue behind the
  // other chunks' and the first chunk would land late.
  //
  // Launched as a dependent kernel (launch_dependent_kernel), a block may start while the kernel
  // before it finishes: chunk 0's W rows go out first, and x, which that kernel may write, only
  // after wait_for_previous_grid(). Every thread waits, since every thread stores outputs.
  constexpr int kHalf = kRows / 2;
  const int per_chunk = kHalf + kColumns;
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  auto issue = [&](int c, int j) {  // copy j of chunk c: x's row j, or W's row j - kHalf
    if (j < kHalf) {
      const int row = kHalf * rank + j;
      if (row < x_rows) {
        bulk_copy_to_both(shared_address(shared + c * kStageFloats + row * kStride),
                          a.x + static_cast<int64_t>(row) * a.in + c * kChunk, kRowBytes,
                          shared_address(full + c));
      }
    } else if (j - kHalf < w_rows) {
      const int w = j - kHalf;
      bulk_copy(shared_address(shared + c * kStageFloats + (kRows + w) * kStride),
                a.weight + static_cast<int64_t>(n0 + w) * a.in + c * kChunk, kRowBytes,
                shared_address(full + c));
    }
  };
  const int first = warp + kWarps * lane;
  if (first < kColumns) issue(0, kHalf + first);
  wait_for_previous_grid();
  for (int i = first; i < chunks * per_chunk; i += kThreads) {
    const int c = i / per_chunk;
    const int j = i - c * per_chunk;
    if (c > 0 || j < kHalf) issue(c, j);
  }
  allow_next_grid();
  FDNN_SMALL_BATCH_STAMP(2);

  float acc[2][kTiles][4] = {};
  for (int c = 0; c < chunks; ++c) {
    wait_for_phase_zero<AcquireScope::Block>(shared_address(full + c));
    if (c < kStampedChunks) FDNN_SMALL_BATCH_STAMP(3 + c);
    accumulate_chunk<kTiles>(shared + c * kStageFloats, warp, lane, a.rows > 16, acc);
  }
  FDNN_SMALL_BATCH_STAMP(3 + kStampedChunks);
  __syncthreads();  // every warp is past its last chunk: the stages are free
  finish_outputs<kTiles>(a, n0, shared, warp, lane, bias_of, acc);
  FDNN_SMALL_BATCH_STAMP(4 + kStampedChunks);
  // Neither block leaves while its copies into the other may still be landing.
  __cluster_barrier_arrive_relaxed();
  __cluster_barrier_wait();
  FDNN_SMALL_BATCH_STAMP(kLastStamp);
#endif
}

struct Variant {
  int columns;
  void (*kernel)(SmallBatchParams);
  void (*cluster_kernel)(SmallBatchParams);
  const char* name;
  const char* cluster_name;
};

// 24 columns a block for layers with many outputs (768 -> 3072: 128 blocks), 8 for layers with
// few (300 -> 520: 65 blocks), 16 in between.
const Variant kVariants[] = {
    {24, small_batch_linear_kernel<3>, small_batch_linear_cluster_kernel<3>,
     "small_batch_linear_kernel<24 columns>", "small_batch_linear_cluster_kernel<24 columns>"},
    {16, small_batch_linear_kernel<2>, small_batch_linear_cluster_kernel<2>,
     "small_batch_linear_kernel<16 columns>", "small_batch_linear_cluster_kernel<16 columns>"},
    {8, small_batch_linear_kernel<1>, small_batch_linear_cluster_kernel<1>,
     "small_batch_linear_kernel<8 columns>", "small_batch_linear_cluster_kernel<8 columns>"},
};

}  // namespace

bool plan_small_batch_linear(int32_t in, int32_t out, const DeviceInfo& device,
                             SmallBatchLinearMode mode, SmallBatchLinearPlan* plan) {
  *plan = SmallBatchLinearPlan();
  if (mode == SmallBatchLinearMode::Off || device.major < 9 || in <= 0 || out <= 0 || in % 4 != 0) {
    return false;
  }
  // Estimated time of a variant: the floats each block stages ((32 + columns) rows x in), times
  // the waves of blocks over the SMs (one block per SM). The arithmetic is small next to them.
  // The first of equal estimates wins.
  //
  // Where the best estimate passes kMaxCost, Auto leaves the layer to cuBLASLt: the threshold
  // lies between the estimates of layers this kernel runs faster at every row count (such as
  // 300 -> 520 and 768 -> 3072) and those where cuBLASLt is faster at some row count (such as
  // 1024 -> 4096, 3072 -> 768 and 6000 -> 64).
  constexpr long long kMaxCost = 60000;
  long long best_cost = -1;
  for (int v = 0; v < static_cast<int>(sizeof(kVariants) / sizeof(kVariants[0])); ++v) {
    const Variant& variant = kVariants[v];
    if (shared_bytes_of(variant.columns) > device.shared_per_block_optin) continue;
    const long long blocks = (out + variant.columns - 1) / variant.columns;
    if (blocks > INT32_MAX) continue;
    const long long waves = (blocks + device.sm_count - 1) / device.sm_count;
    const long long cost = waves * in * (kRows + variant.columns);
    if (best_cost < 0 || cost < best_cost) {
      best_cost = cost;
      plan->variant = v;
      plan->shared_bytes = shared_bytes_of(variant.columns);
      plan->grid = static_cast<unsigned>(blocks);
    }
  }
  if (mode == SmallBatchLinearMode::Auto && best_cost > kMaxCost) *plan = SmallBatchLinearPlan();
  if (!plan->planned()) return false;
  // The kernels' bodies exist only where they were built for sm_80 (the cluster form: sm_90) or
  // newer.
  const Variant& chosen = kVariants[plan->variant];
  if (!kernel_built_for(reinterpret_cast<const void*>(chosen.kernel), 80)) {
    *plan = SmallBatchLinearPlan();
    return false;
  }
  // The cluster form where the input is whole chunks that all fit the stages at once.
  if (mode != SmallBatchLinearMode::Unicast && in % kChunk == 0 &&
      in / kChunk <= stages_for(chosen.columns) &&
      kernel_built_for(reinterpret_cast<const void*>(chosen.cluster_kernel), 90)) {
    plan->cluster = true;
  }
  return true;
}

bool small_batch_linear_takes(const SmallBatchLinearPlan& plan, int64_t rows, const float* x) {
  return plan.planned() && rows >= 1 && rows <= kSmallBatchLinearMaxRows &&
         reinterpret_cast<uintptr_t>(x) % 16 == 0;
}

void prepare_small_batch_linear_kernel(const SmallBatchLinearPlan& plan) {
  if (!plan.planned()) return;
  const Variant& variant = kVariants[plan.variant];
  FDNN_CUDA_CHECK(cudaFuncSetAttribute(variant.kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(plan.shared_bytes)));
  if (plan.cluster) {
    FDNN_CUDA_CHECK(cudaFuncSetAttribute(variant.cluster_kernel,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(plan.shared_bytes)));
  }
}

void launch_small_batch_linear(const SmallBatchLinearPlan& plan, const LinearArgs& args,
                               cudaStream_t stream) {
  const Variant& variant = kVariants[plan.variant];
  SmallBatchParams p;
  p.linear = args;
  // The cluster form from 16 rows: there sharing x between a pair of blocks pays; at fewer rows
  // x is nearly all zero-filled, there is little to share, and the plain form is faster.
  if (plan.cluster && args.rows >= kClusterMinRows) {
    const unsigned pairs = (plan.grid + 1) / 2;  // the last pair may have an idle block
    launch_dependent_kernel(variant.cluster_kernel, variant.cluster_name, dim3(2 * pairs),
                            dim3(kThreads), plan.shared_bytes, stream, p);
  } else {
    launch_kernel(variant.kernel, variant.name, dim3(plan.grid), dim3(kThreads), plan.shared_bytes,
                  stream, p);
  }
}

}  // namespace fusednn::cuda
