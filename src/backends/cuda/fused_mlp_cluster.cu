// The fused MLP for a handful of rows on Hopper and newer: a cluster of kFusedMlpClusterBlocks
// blocks per tile of 1, 2 or 4 rows, each block owning a contiguous range of every layer's output
// groups (4 outputs a group). A block stages only its rows of the row image
// (fused_mlp_row_image.hpp), so the cluster's SMs pull the chain's weights from L2 in parallel,
// and computes its groups as the single-block form does: lanes split k, one butterfly per group.
// Its results go to its own copy of the next layer's input and, by st.async, to every other
// block's copy, each remote store counted on that block's mbarrier for the exchange. A block
// starts layer l + 1 once its mbarrier for layer l's outputs has seen all their bytes: no cluster
// barrier per layer, only one at the start (mbarriers initialised, every block running), which
// each warp waits for just before its first remote store, after layer 0's products. No block
// leaves while stores may still come: each waits for every exchange before its last layer.
//
// Why: at batch 1 the single-block form spends ~4.4 us on one SM for the seed MLP: 86 KB of
// weights through one SM's load path and ~15 K warp instructions on its four schedulers
// (bench/cuda/NOTES.md, version 11). Over 4 SMs each gets a quarter of both. The earlier cluster
// form (8 blocks, transposed weights, a cluster barrier after every layer, one dot product per
// 1-32 threads) took 8.5 us for the same model (version 3).
#include <cuda_pipeline.h>

#include <cstdint>

#include "backends/cuda/epilogue.cuh"
#include "backends/cuda/fused_mlp.hpp"
#include "backends/cuda/fused_mlp_row_image.hpp"
#include "backends/cuda/kernel_timeline.cuh"
#include "backends/cuda/launch.hpp"
#include "backends/cuda/warp_sum_many.cuh"

namespace fusednn::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kGroup = 4;  // outputs a warp computes together
constexpr int kBlocks = kFusedMlpClusterBlocks;
constexpr int kActivationBuffers = 3;

// Cluster dimensions are a property of the sm_90+ kernel; older targets compile an empty body
// (the planner never picks it there).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#define FDNN_CLUSTER_DIMS
#else
#define FDNN_CLUSTER_DIMS __cluster_dims__(kFusedMlpClusterBlocks, 1, 1)
#endif

// Phase stamps of the first cluster's last block (it owns groups of every layer of the seed MLP)
// for bench/cuda/small_batch_mlp_timeline.cu (kernel_timeline.cuh): entry, slices issued, cluster
// barrier arrived at, then per layer: its slice landed, its input complete, its outputs sent.
#define FDNN_CLUSTER_TIMELINE(phase) \
  FDNN_TIMELINE(blockIdx.x == kBlocks - 1, phase, 5 + 3 * (p.layer_count - 1))

struct ClusterParams {
  const float* x;
  float* y;
  const float* image;  // the row image (build_fused_mlp_row_image)
  int64_t rows;
  int32_t layer_count;
  int32_t width4;  // activation row stride: the widest in4
  RowImageLayer layers[kFusedMlpMaxLayers];
};

// Block `rank`'s groups of a layer with `groups` of them: [first, end), contiguous, sizes
// differing by at most one between blocks.
__host__ __device__ inline int first_group(int groups, int rank) {
  return groups * rank / kBlocks;
}

// Floats of a block's slice of a layer: its rows of W, then their biases.
__host__ __device__ inline int slice_floats(int group_count, int in4) {
  return kGroup * group_count * (in4 + 1);
}

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
__device__ __forceinline__ uint32_t shared_address(const void* pointer) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(pointer));
}

// The same shared-memory location in block `rank` of the cluster.
__device__ __forceinline__ uint32_t in_block(uint32_t address, int rank) {
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(address), "r"(rank));
  return remote;
}

// 4 bytes into another block's shared memory, counted on that block's mbarrier.
__device__ __forceinline__ void store_remote(uint32_t address, float value, uint32_t barrier) {
  asm volatile(
      "st.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [%0], %1, [%2];" ::"r"(address),
      "r"(__float_as_uint(value)), "r"(barrier)
      : "memory");
}

__device__ __forceinline__ void wait_for_phase_zero(uint32_t barrier) {
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], 0;\n"
        "selp.u32 %0, 1, 0, p;\n"
        "}\n"
        : "=r"(done)
        : "r"(barrier)
        : "memory");
  } while (done == 0);
}
#endif

template <int kRows>
__global__ void FDNN_CLUSTER_DIMS __launch_bounds__(kThreads, 1)
fused_mlp_cluster_kernel(const __grid_constant__ ClusterParams p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  constexpr int kValues = kRows * kGroup;  // partial sums a lane holds per group
  constexpr int kLanesPerValue = 32 / kValues;
  extern __shared__ float4 shared_memory[];
  uint64_t* const exchanged = reinterpret_cast<uint64_t*>(shared_memory);  // one per layer
  // Three activation buffers, layer l reading buffer l % 3: a block may receive layer l's outputs
  // while its slowest warp still reads layer l - 1's input, never layer l - 2's.
  float* const act0 = reinterpret_cast<float*>(exchanged + kFusedMlpMaxLayers);
  float* const slices = act0 + kActivationBuffers * kRows * p.width4;
  const int tid = threadIdx.x;
  const int lane = tid % 32, warp = tid / 32;
  const int rank = static_cast<int>(blockIdx.x % kBlocks);
  const int64_t row0 = static_cast<int64_t>(blockIdx.x / kBlocks) * kRows;
  const int valid_rows = static_cast<int>(min(static_cast<int64_t>(kRows), p.rows - row0));
  const bool exchanges = p.layer_count > 1;
  FDNN_CLUSTER_TIMELINE(0);

  // The rows of x first (one cp.async group), so that they do not queue behind the weights;
  // zero past the batch and in the row's padding (the padded weight columns are zero, so these
  // need only be finite).
  {
    const int in = p.layers[0].in, in4 = p.layers[0].in4;
    for (int i = tid; i < kRows * in4; i += kThreads) {
      const int r = i / in4, k = i - r * in4;
      float* destination = act0 + r * p.width4 + k;
      if (r < valid_rows && k < in) {
        __pipeline_memcpy_async(destination, p.x + (row0 + r) * in + k, sizeof(float));
      } else {
        *destination = 0.0f;
      }
    }
    __pipeline_commit();
  }
  // This block's slice of every layer, one cp.async group per layer: its W rows and biases are
  // each one contiguous run of 16-byte words in the image.
  {
    float* slice = slices;
    for (int l = 0; l < p.layer_count; ++l) {
      const RowImageLayer& layer = p.layers[l];
      const int groups = layer.out4 / kGroup;
      const int g0 = first_group(groups, rank), g1 = first_group(groups, rank + 1);
      const int weight_words = (g1 - g0) * layer.in4;  // kGroup rows of in4 floats a group
      const float* weight = p.image + layer.weight_offset + kGroup * g0 * layer.in4;
      const float* bias = p.image + layer.bias_offset + kGroup * g0;
      for (int q = tid; q < weight_words + (g1 - g0); q += kThreads) {
        const float* source = q < weight_words ? weight + 4 * q : bias + 4 * (q - weight_words);
        __pipeline_memcpy_async(slice + 4 * q, source, 16);
      }
      __pipeline_commit();
      slice += slice_floats(g1 - g0, layer.in4);
    }
  }
  FDNN_CLUSTER_TIMELINE(1);
  // Each exchange's mbarrier expects the bytes of the other blocks' groups; remote stores may
  // land only once it is initialised: the cluster barrier, arrived at here and waited for before
  // this block's first remote store. The init fence publishes the mbarriers, so the arrival
  // itself is relaxed (a release would wait for this thread's loads, the slices included).
  if (exchanges) {
    if (tid == 0) {
      for (int l = 0; l + 1 < p.layer_count; ++l) {
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(shared_address(exchanged + l))
                     : "memory");
      }
      asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
      for (int l = 0; l + 1 < p.layer_count; ++l) {
        const int groups = p.layers[l].out4 / kGroup;
        const int own = first_group(groups, rank + 1) - first_group(groups, rank);
        const auto bytes = static_cast<uint32_t>(sizeof(float) * kRows * kGroup * (groups - own));
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(
                         shared_address(exchanged + l)),
                     "r"(bytes)
                     : "memory");
      }
    }
    asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
  }
  FDNN_CLUSTER_TIMELINE(2);

  const float* slice = slices;
  float* in = act0;
  float* next = act0 + kRows * p.width4;
  float* spare = next + kRows * p.width4;
  bool cluster_ready = !exchanges;  // warp-uniform: this warp has waited for the cluster barrier
  for (int l = 0; l < p.layer_count; ++l) {
    const RowImageLayer& layer = p.layers[l];
    const bool last = l + 1 == p.layer_count;
    const int groups = layer.out4 / kGroup;
    const int g0 = first_group(groups, rank), g1 = first_group(groups, rank + 1);
    const float* weight = slice;
    const float* bias = slice + kGroup * (g1 - g0) * layer.in4;
    const int quads = layer.in4 / 4;

    __pipeline_wait_prior(p.layer_count - 1 - l);  // x and this layer's slice have landed
    FDNN_CLUSTER_TIMELINE(3 + 3 * l);
    if (l > 0) wait_for_phase_zero(shared_address(exchanged + l - 1));  // the other blocks' part
    __syncthreads();                                                    // ... and this block's
    FDNN_CLUSTER_TIMELINE(4 + 3 * l);

    for (int g = g0 + warp; g < g1; g += kWarps) {
      const int local = kGroup * (g - g0);  // the group's first row in the slice
      float sums[kValues];
#pragma unroll
      for (int i = 0; i < kValues; ++i) sums[i] = 0.0f;
      for (int q = lane; q < quads; q += 32) {
        float4 w[kGroup];
#pragma unroll
        for (int j = 0; j < kGroup; ++j) {
          w[j] = *reinterpret_cast<const float4*>(weight + (local + j) * layer.in4 + 4 * q);
        }
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
          const float4 a = *reinterpret_cast<const float4*>(in + r * p.width4 + 4 * q);
#pragma unroll
          for (int j = 0; j < kGroup; ++j) {
            float& s = sums[r * kGroup + j];
            s = fmaf(a.x, w[j].x, s);
            s = fmaf(a.y, w[j].y, s);
            s = fmaf(a.z, w[j].z, s);
            s = fmaf(a.w, w[j].w, s);
          }
        }
      }
      const float total = warp_sum_many(sums, lane);
      if (!cluster_ready) {  // before this warp's first remote store
        asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
        cluster_ready = true;
      }
      const int value = lane / kLanesPerValue;
      if (lane % kLanesPerValue == 0) {
        const int r = value / kGroup, j = value % kGroup, o = kGroup * g + j;
        const float result =
            o < layer.out ? apply_epilogue(layer.epilogue, total + bias[local + j]) : 0.0f;
        if (last) {
          if (r < valid_rows && o < layer.out) p.y[(row0 + r) * layer.out + o] = result;
        } else {
          const float kept = r < valid_rows ? result : 0.0f;  // rows past the batch: zero
          float* destination = next + r * p.width4 + o;
          *destination = kept;
          const uint32_t address = shared_address(destination);
          const uint32_t barrier = shared_address(exchanged + l);
#pragma unroll
          for (int offset = 1; offset < kBlocks; ++offset) {
            const int other = (rank + offset) % kBlocks;
            store_remote(in_block(address, other), kept, in_block(barrier, other));
          }
        }
      }
    }
    if (!cluster_ready) {  // a warp without groups in layer 0 still waits once
      asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
      cluster_ready = true;
    }
    FDNN_CLUSTER_TIMELINE(5 + 3 * l);
    slice += slice_floats(g1 - g0, layer.in4);
    float* const read = in;
    in = next;
    next = spare;
    spare = read;
  }
#endif
}

template <int kRows>
void launch_rows(const FusedMlpPlan& plan, const float* x, float* y, int64_t rows,
                 cudaStream_t stream, const char* name) {
  ClusterParams p{};
  p.x = x;
  p.y = y;
  p.image = plan.block_image;
  p.rows = rows;
  p.layer_count = static_cast<int32_t>(plan.layers.size());
  row_image_layout(plan.layers, p.layers, &p.width4);
  const auto clusters = static_cast<unsigned>((rows + kRows - 1) / kRows);
  launch_kernel(fused_mlp_cluster_kernel<kRows>, name, clusters * kBlocks, kThreads,
                plan.cluster_shared_bytes, stream, p);
}

}  // namespace

size_t fused_mlp_cluster_shared_bytes(const FusedMlpPlan& plan) {
  if (plan.layers.empty() || plan.layers.size() > static_cast<size_t>(kFusedMlpMaxLayers)) {
    return 0;
  }
  RowImageLayer layers[kFusedMlpMaxLayers];
  int width4 = 0;
  row_image_layout(plan.layers, layers, &width4);
  size_t floats = kActivationBuffers * static_cast<size_t>(kFusedMlpClusterRows) * width4;
  for (size_t l = 0; l < plan.layers.size(); ++l) {
    const int groups = layers[l].out4 / kGroup;
    int most = 0;  // the largest block's share
    for (int rank = 0; rank < kBlocks; ++rank) {
      most = std::max(most, first_group(groups, rank + 1) - first_group(groups, rank));
    }
    floats += static_cast<size_t>(slice_floats(most, layers[l].in4));
  }
  return sizeof(uint64_t) * kFusedMlpMaxLayers + sizeof(float) * floats;
}

bool fused_mlp_cluster_fits(size_t shared_bytes, const DeviceInfo& device) {
  // Whether a cluster with this much shared memory per block can be resident at all. The query
  // answers for the kernel's current limit, 48 KB until it is raised, so the limit is raised
  // first (without that, LeNet-5's head once never took the cluster form: 2026-11-23). Always to
  // the device's most: a model's own size would lower it under another model's launches.
  const auto kernel = fused_mlp_cluster_kernel<kFusedMlpClusterRows>;
  if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           static_cast<int>(device.shared_per_block_optin)) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(kBlocks);
  config.blockDim = dim3(kThreads);
  config.dynamicSmemBytes = shared_bytes;
  int clusters = 0;
  if (cudaOccupancyMaxActiveClusters(&clusters, kernel, &config) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return clusters > 0;
}

void prepare_fused_mlp_cluster_kernels(int64_t max_rows, const DeviceInfo& device) {
  const int bytes = static_cast<int>(device.shared_per_block_optin);  // as in _fits
  FDNN_CUDA_CHECK(cudaFuncSetAttribute(fused_mlp_cluster_kernel<1>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  if (max_rows >= 2) {
    FDNN_CUDA_CHECK(cudaFuncSetAttribute(fused_mlp_cluster_kernel<2>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  }
  if (max_rows >= 3) {
    FDNN_CUDA_CHECK(cudaFuncSetAttribute(fused_mlp_cluster_kernel<kFusedMlpClusterRows>,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  }
}

int64_t fused_mlp_cluster_max_rows(const DeviceInfo& device) {
  return static_cast<int64_t>(device.sm_count / kBlocks) * kFusedMlpClusterRows;
}

void launch_fused_mlp_cluster(const FusedMlpPlan& plan, const float* x, float* y, int64_t rows,
                              cudaStream_t stream) {
  if (rows <= 1) {
    launch_rows<1>(plan, x, y, rows, stream, "fused_mlp_cluster_kernel<1 row>");
  } else if (rows == 2) {
    launch_rows<2>(plan, x, y, rows, stream, "fused_mlp_cluster_kernel<2 rows>");
  } else {
    launch_rows<kFusedMlpClusterRows>(plan, x, y, rows, stream,
                                      "fused_mlp_cluster_kernel<4 rows>");
  }
}

}  // namespace fusednn::cuda
