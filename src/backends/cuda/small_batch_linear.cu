// The small-batch Linear (small_batch_linear.hpp): one block per kColumns output columns over
// the whole reduction, for all (up to 32) rows.
//
// A block streams x and its kColumns rows of W through shared memory in chunks of 128 k
// (cp.async, three stages, two in flight), both in their row-major layouts: x rows and W rows
// ([out][in]) alike are copied 16 bytes at a time from addresses each thread works out once, and
// each thread reads both as float4 along k. Its 16 warps split each chunk's k sixteen ways; a
// lane accumulates 4 rows x kLaneColumns adjacent columns (rows lane%8 + 8i, columns
// (lane/8) kLaneColumns + j), so one float4 of x and one of W feed 4 FMAs each, and a warp's
// loads are broadcasts over 8 rows (row stride 132 floats: distinct banks). At the end the 16
// partial sums of each output go through shared memory and are added in a fixed order; the bias
// and the epilogue are applied before the one store.
//
// Every block reads all of x (at most 32 rows, from L2): for Linear 768 -> 3072 that is 12.6 MB
// of L2 reads next to W's 9.4 MB, which costs less than splitting k over a cluster did. The
// first two versions did (2026-11-24, H100): a cluster of 4 blocks per column tile summing over
// distributed shared memory took 16-20 us at 32 rows, and pushing the partial sums with st.async
// 25 us; ncu showed the cluster barriers' MEMBAR.ALL.GPU, the remote loads or stores, and
// clusters that could not all be resident at once (30 of 32) taking most of the time.
#include <cuda_pipeline.h>

#include <climits>
#include <cstdint>

#include "backends/cuda/epilogue.cuh"
#include "backends/cuda/launch.hpp"
#include "backends/cuda/small_batch_linear.hpp"

namespace fusednn::cuda {
namespace {

constexpr int kThreads = 512;
constexpr int kWarps = kThreads / 32;
constexpr int kRows = static_cast<int>(kSmallBatchLinearMaxRows);
constexpr int kChunk = 128;          // k per pipeline stage
constexpr int kStride = kChunk + 4;  // floats per staged row: 16-byte aligned, banks 4 apart
constexpr int kStages = 3;
constexpr int kPartK = kChunk / kWarps;  // each warp's k of a chunk
static_assert(kRows == 32, "the lane layout covers 32 rows: lane % 8 + 8 i, i < 4");
static_assert(kPartK % 4 == 0, "each warp takes whole float4 steps");

struct SmallBatchParams {
  LinearArgs linear;
};

__host__ __device__ constexpr size_t stage_floats(int columns) {
  return static_cast<size_t>(kRows + columns) * kStride;
}
__host__ __device__ constexpr size_t shared_bytes_of(int columns) {
  return kStages * stage_floats(columns) * sizeof(float);
}

template <int kLaneColumns>
__global__ void __launch_bounds__(kThreads)
small_batch_linear_kernel(const __grid_constant__ SmallBatchParams p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  constexpr int kColumns = 4 * kLaneColumns;
  constexpr int kStageFloats = static_cast<int>(stage_floats(kColumns));
  constexpr int kVectors = kChunk / 4;  // 16-byte copies per staged row and chunk
  constexpr int kCopySlots = (kRows + kColumns) * kVectors;
  constexpr int kCopies = (kCopySlots + kThreads - 1) / kThreads;
  static_assert(kWarps * kRows * kColumns <= kStages * kStageFloats, "partial sums fit");
  extern __shared__ __align__(16) float shared[];

  const LinearArgs& a = p.linear;
  const int n0 = static_cast<int>(blockIdx.x) * kColumns;
  const int chunks = (a.in + kChunk - 1) / kChunk;

  // This thread's copies: stage rows [0, kRows) are x's rows, [kRows, kRows + kColumns) W's rows
  // n0...; rows past the batch or the layer, and k past the input width, are zero-filled.
  const float* copy_source[kCopies];
  int copy_offset[kCopies];
  int copy_k[kCopies];
#pragma unroll
  for (int c = 0; c < kCopies; ++c) {
    const int i = static_cast<int>(threadIdx.x) + c * kThreads;
    const int row = i / kVectors;
    const int v = i - row * kVectors;
    const int n = n0 + row - kRows;
    const float* base = nullptr;
    if (i < kCopySlots) {
      if (row < kRows) {
        if (row < a.rows) base = a.x + static_cast<int64_t>(row) * a.in;
      } else if (n < a.out) {
        base = a.weight + static_cast<int64_t>(n) * a.in;
      }
    }
    copy_source[c] = base == nullptr ? nullptr : base + 4 * v;
    copy_offset[c] = i < kCopySlots ? row * kStride + 4 * v : -1;
    copy_k[c] = 4 * v;
  }
  auto stage_chunk = [&](int chunk) {
    float* stage = shared + (chunk % kStages) * kStageFloats;
    const int k0 = chunk * kChunk;
#pragma unroll
    for (int c = 0; c < kCopies; ++c) {
      if (copy_offset[c] < 0) continue;
      const bool valid = copy_source[c] != nullptr && k0 + copy_k[c] < a.in;
      __pipeline_memcpy_async(stage + copy_offset[c], valid ? copy_source[c] + k0 : a.weight, 16,
                              valid ? 0 : 16);
    }
  };
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < chunks) stage_chunk(s);
    __pipeline_commit();
  }

  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int lane_row = lane % 8;
  const int lane_column = (lane / 8) * kLaneColumns;
  float acc[4][kLaneColumns];
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < kLaneColumns; ++j) acc[i][j] = 0.0f;

  for (int chunk = 0; chunk < chunks; ++chunk) {
    if (chunk + kStages - 1 < chunks) stage_chunk(chunk + kStages - 1);
    __pipeline_commit();
    __pipeline_wait_prior(kStages - 1);  // this chunk has landed (for this thread's copies)
    __syncthreads();                     // ... and for everyone's
    const float* stage = shared + (chunk % kStages) * kStageFloats + warp * kPartK;
    const float* xs = stage + lane_row * kStride;
    const float* ws = stage + (kRows + lane_column) * kStride;
#pragma unroll
    for (int k = 0; k < kPartK; k += 4) {
      float4 xv[4];
      float4 wv[kLaneColumns];
#pragma unroll
      for (int i = 0; i < 4; ++i) xv[i] = *reinterpret_cast<const float4*>(xs + 8 * i * kStride + k);
#pragma unroll
      for (int j = 0; j < kLaneColumns; ++j) {
        wv[j] = *reinterpret_cast<const float4*>(ws + j * kStride + k);
      }
#pragma unroll
      for (int i = 0; i < 4; ++i) {
#pragma unroll
        for (int j = 0; j < kLaneColumns; ++j) {
          float sum = acc[i][j];
          sum = fmaf(xv[i].x, wv[j].x, sum);
          sum = fmaf(xv[i].y, wv[j].y, sum);
          sum = fmaf(xv[i].z, wv[j].z, sum);
          acc[i][j] = fmaf(xv[i].w, wv[j].w, sum);
        }
      }
    }
    __syncthreads();  // the stage is free for the copy issued at the top of the next chunk
  }
  __pipeline_wait_prior(0);
  __syncthreads();  // no copy into the stages is still in flight

  // partial[warp][row][column], then each output adds its 16 in warp order.
  float* partial = shared;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
#pragma unroll
    for (int j = 0; j < kLaneColumns; ++j) {
      partial[(warp * kRows + lane_row + 8 * i) * kColumns + lane_column + j] = acc[i][j];
    }
  }
  __syncthreads();
  for (int index = threadIdx.x; index < kRows * kColumns; index += kThreads) {
    const int row = index / kColumns;
    const int column = index - row * kColumns;
    const int n = n0 + column;
    if (row >= a.rows || n >= a.out) continue;
    float sum = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) sum += partial[w * kRows * kColumns + index];
    if (a.bias != nullptr) sum += a.bias[n];
    a.y[static_cast<int64_t>(row) * a.out + n] = apply_epilogue(a.epilogue, sum);
  }
#endif
}

struct Variant {
  int columns;
  void (*kernel)(SmallBatchParams);
  const char* name;
};

// 24 columns a block for layers with many outputs (768 -> 3072: 128 blocks), 8 for layers with
// few (3072 -> 768: 96 blocks), 16 in between (1024 -> 4096: 256 blocks).
const Variant kVariants[] = {
    {24, small_batch_linear_kernel<6>, "small_batch_linear_kernel<24 columns>"},
    {16, small_batch_linear_kernel<4>, "small_batch_linear_kernel<16 columns>"},
    {8, small_batch_linear_kernel<2>, "small_batch_linear_kernel<8 columns>"},
};

}  // namespace

bool plan_small_batch_linear(int32_t in, int32_t out, const DeviceInfo& device,
                             SmallBatchLinearPlan* plan) {
  *plan = SmallBatchLinearPlan();
  if (device.major < 9 || in <= 0 || out <= 0 || in % 4 != 0) return false;
  // Estimated time of a variant, in arbitrary units: the waves of blocks over the SMs (one block
  // per SM), each block's FMAs (32 rows x columns x in at ~128 per clock per SM) and its copies
  // ((32 + columns) rows x in floats at ~48 bytes per clock), i.e. in x (columns / 4 +
  // (32 + columns) / 12), scaled by 12. The first of equal estimates wins.
  // Where the best estimate passes kMaxCost the plan leaves the layer to cuBLASLt: on an H100
  // (2026-11-24, device path, per call) 768 -> 3072 (estimate 98 K) took 9.7 us at 1 row and
  // 11.9 at 32 against cuBLASLt's 10.2 and 20.3, 300 -> 520 (19 K) 4.7 and 5.4 against 10.2 and
  // 22.6, but 3072 -> 768 (197 K) 18.4 and 19.4 against 11.5 and 21.1, and 1024 -> 4096 (262 K)
  // 19.3 and 20.9 against 9.8 and 21.7: a block's time grows with its share of the work while
  // cuBLASLt's stays near 10 us at one row.
  constexpr long long kMaxCost = 100000;
  long long best_cost = -1;
  for (int v = 0; v < static_cast<int>(sizeof(kVariants) / sizeof(kVariants[0])); ++v) {
    const Variant& variant = kVariants[v];
    if (shared_bytes_of(variant.columns) > device.shared_per_block_optin) continue;
    const long long blocks = (out + variant.columns - 1) / variant.columns;
    if (blocks > INT32_MAX) continue;
    const long long waves = (blocks + device.sm_count - 1) / device.sm_count;
    const long long cost = waves * in * (4LL * variant.columns + kRows);
    if (best_cost < 0 || cost < best_cost) {
      best_cost = cost;
      plan->variant = v;
      plan->in = in;
      plan->out = out;
      plan->shared_bytes = shared_bytes_of(variant.columns);
      plan->grid = static_cast<unsigned>(blocks);
    }
  }
  if (best_cost > kMaxCost) *plan = SmallBatchLinearPlan();
  return plan->planned();
}

bool small_batch_linear_takes(const SmallBatchLinearPlan& plan, int64_t rows, const float* x) {
  return plan.planned() && rows >= 1 && rows <= kSmallBatchLinearMaxRows &&
         reinterpret_cast<uintptr_t>(x) % 16 == 0;
}

void prepare_small_batch_linear_kernel(const SmallBatchLinearPlan& plan) {
  if (!plan.planned()) return;
  FDNN_CUDA_CHECK(cudaFuncSetAttribute(kVariants[plan.variant].kernel,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       static_cast<int>(plan.shared_bytes)));
}

void launch_small_batch_linear(const SmallBatchLinearPlan& plan, const LinearArgs& args,
                               cudaStream_t stream) {
  const Variant& variant = kVariants[plan.variant];
  SmallBatchParams p;
  p.linear = args;
  launch_kernel(variant.kernel, variant.name, dim3(plan.grid), dim3(kThreads), plan.shared_bytes,
                stream, p);
}

}  // namespace fusednn::cuda
