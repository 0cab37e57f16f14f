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
// Every block reads all of x (at most 32 rows, from L2): for Linear 768 -> 3072 that is 12.6 MB
// of L2 reads next to W's 9.4 MB, and it costs ~4 us of the 11 at 32 rows (at 1 row, with x
// nearly all zero-filled, the call takes 7.2 us). Sharing x across a cluster is the next step.
// What was tried first (2026-11-24, H100, 32 rows): FMA pipes with a cluster of 4 blocks per
// column tile summing over distributed shared memory (16-20 us), the partial sums pushed with
// st.async (25 us: the cluster barriers' MEMBAR.ALL.GPU, the remote stores, and clusters that
// could not all be resident at once), FMA pipes without clusters (11.9 us; half of the
// instructions were not FFMA).
#include <cuda_pipeline.h>

#include <cstddef>

#include <climits>
#include <cstdint>

#include "backends/cuda/epilogue.cuh"
#include "backends/cuda/launch.hpp"
#include "backends/cuda/small_batch_linear.hpp"
#include "backends/cuda/tensor_core_mma.cuh"

namespace fusednn::cuda {
namespace {

constexpr int kThreads = 512;
constexpr int kWarps = kThreads / 32;
constexpr int kRows = static_cast<int>(kSmallBatchLinearMaxRows);
constexpr int kChunk = 128;          // k per pipeline stage
constexpr int kStride = kChunk + 4;  // floats per staged row: 16-byte aligned, banks 4 apart
constexpr int kPartK = kChunk / kWarps;  // each warp's k of a chunk
constexpr int kVectors = kChunk / 4;     // 16-byte copies per staged row and chunk
constexpr size_t kStageBudget = 200 * 1024;
static_assert(kRows == 32, "the lane layout covers 32 rows: lane % 8 + 8 i, i < 4");
static_assert(kPartK == 8, "each warp takes one m16n8k8 k step of a chunk");
static_assert(kThreads % kVectors == 0, "a thread copies one 16-byte column of rows");

struct SmallBatchParams {
  LinearArgs linear;
};

__host__ __device__ constexpr size_t stage_floats(int columns) {
  return static_cast<size_t>(kRows + columns) * kStride;
}
// As many stages as ~200 KB holds, at most 8: a block's copies in flight are what keeps its
// bytes moving (the first form, with two chunks in flight, moved ~40 GB/s per SM).
__host__ __device__ constexpr int stages_for(int columns) {
  return kStageBudget / (stage_floats(columns) * sizeof(float)) < 8
             ? static_cast<int>(kStageBudget / (stage_floats(columns) * sizeof(float)))
             : 8;
}
__host__ __device__ constexpr size_t shared_bytes_of(int columns) {
  return stages_for(columns) * stage_floats(columns) * sizeof(float);
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
#endif

template <int kTiles>
__global__ void __launch_bounds__(kThreads)
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
                     : x_row           ? a.x + static_cast<int64_t>(row) * a.in + 4 * v
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
  float* partial = shared;  // after the loop: [warp][row][column]
  // 3xTF32 on m16n8k8: each warp takes one k step (8 k) of every chunk for both 16-row tiles
  // and all kColumns / 8 column tiles. A element (m, k) is x row m, B element (k, n) W row n,
  // both read straight from the staged rows (lane l reads row l/4 + ..., k l%4 + ...: 32
  // banks). Only the first row tile runs when the batch has at most 16 rows.
  const int r = lane / 4;
  const int q = lane % 4;
  const bool second_tile = a.rows > 16;
  float acc[2][kTiles][4];
#pragma unroll
  for (int t = 0; t < 2; ++t)
#pragma unroll
    for (int u = 0; u < kTiles; ++u)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[t][u][e] = 0.0f;
  for (int chunk = 0; chunk < chunks; ++chunk) {
    if (chunk + kStages - 1 < chunks) stage_chunk(chunk + kStages - 1);
    __pipeline_commit();
    __pipeline_wait_prior(kStages - 1);
    __syncthreads();
    const float* stage = shared + (chunk % kStages) * kStageFloats + warp * kPartK + q;
    uint32_t a_big[2][4], a_small[2][4];
#pragma unroll
    for (int t = 0; t < 2; ++t) {
      if (t == 1 && !second_tile) break;
      const float* xs = stage + (16 * t + r) * kStride;
      const float values[4] = {xs[0], xs[8 * kStride], xs[4], xs[8 * kStride + 4]};
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        a_big[t][e] = to_tf32(values[e]);
        a_small[t][e] = to_tf32(values[e] - __uint_as_float(a_big[t][e]));
      }
    }
#pragma unroll
    for (int u = 0; u < kTiles; ++u) {
      const float* ws = stage + (kRows + 8 * u + r) * kStride;
      const float w0 = ws[0];
      const float w1 = ws[4];
      const uint32_t b0 = to_tf32(w0);
      const uint32_t b1 = to_tf32(w1);
      const uint32_t s0 = to_tf32(w0 - __uint_as_float(b0));
      const uint32_t s1 = to_tf32(w1 - __uint_as_float(b1));
#pragma unroll
      for (int t = 0; t < 2; ++t) {
        if (t == 1 && !second_tile) break;
        // Small terms first so that they are not lost below the big product's rounding.
        mma<TensorCoreMath::Tf32>(acc[t][u], a_small[t], b0, b1);
        mma<TensorCoreMath::Tf32>(acc[t][u], a_big[t], s0, s1);
        mma<TensorCoreMath::Tf32>(acc[t][u], a_big[t], b0, b1);
      }
    }
    __syncthreads();
  }
  __pipeline_wait_prior(0);
  __syncthreads();
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
  // Each output adds its 16 partial sums in warp order.
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
// few (300 -> 520: 65 blocks), 16 in between.
const Variant kVariants[] = {
    {24, small_batch_linear_kernel<3>, "small_batch_linear_kernel<24 columns>"},
    {16, small_batch_linear_kernel<2>, "small_batch_linear_kernel<16 columns>"},
    {8, small_batch_linear_kernel<1>, "small_batch_linear_kernel<8 columns>"},
};

}  // namespace

bool plan_small_batch_linear(int32_t in, int32_t out, const DeviceInfo& device,
                             SmallBatchLinearMode mode, SmallBatchLinearPlan* plan) {
  *plan = SmallBatchLinearPlan();
  if (mode == SmallBatchLinearMode::Off || device.major < 9 || in <= 0 || out <= 0 ||
      in % 4 != 0) {
    return false;
  }
  // Estimated time of a variant: the floats each block stages ((32 + columns) rows x in), times
  // the waves of blocks over the SMs (one block per SM). The arithmetic is small next to them.
  // The first of equal estimates wins.
  //
  // Where the best estimate passes kMaxCost, Auto leaves the layer to cuBLASLt. Measured on an
  // H100 (2026-11-24, device path per call, this kernel / cuBLASLt at 1 and 32 rows):
  // 300 -> 520 (estimate 12 K): 5.4 / 10.6 and 5.3 / 22.5 us; 768 -> 3072 (43 K): 7.2 / 11.7
  // and 11.1 / 22.5; 1024 -> 4096 (98 K): 13.7 / 12.0 and 20.3 / 22.3; 3072 -> 768 (123 K):
  // 13.9 / 10.8 and 18.5 / 20.5; 6000 -> 64 (240 K): 24.3 / 17.7 and 30.2 / 13.4.
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
      plan->in = in;
      plan->out = out;
      plan->shared_bytes = shared_bytes_of(variant.columns);
      plan->grid = static_cast<unsigned>(blocks);
    }
  }
  if (mode == SmallBatchLinearMode::Auto && best_cost > kMaxCost) *plan = SmallBatchLinearPlan();
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
