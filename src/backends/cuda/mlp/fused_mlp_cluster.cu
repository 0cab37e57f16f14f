// SPDX-License-Identifier: Apache-2.0
// The fused MLP for a handful of rows on Hopper and newer: a cluster of kFusedMlpClusterBlocks
// blocks per tile of 1, 2 or 4 rows, each block owning a contiguous range of every layer's output
// groups (4 outputs a group). A block stages only its rows of W and their biases, one contiguous
// run of the cluster image (build_fused_mlp_cluster_image: the row image's rows regrouped by
// block), so the cluster's SMs pull the chain's weights from L2 in parallel, and computes its
// groups as the single-block form does: lanes split k, one butterfly per group.
// Its results go to its own copy of the next layer's input and, by st.async, to every other
// block's copy, each remote store counted on that block's mbarrier for the exchange. A block
// starts layer l + 1 once its mbarrier for layer l's outputs has seen all their bytes: no cluster
// barrier per layer, only one at the start (mbarriers initialised, every block running), which
// each warp waits for just before its first remote store, after layer 0's products. No block
// leaves while stores may still come: each waits for every exchange before its last layer.
//
// Why: at batch 1 the single-block form keeps the seed MLP on one SM: 86 KB of weights through
// one SM's load path and ~15 K warp instructions on its four schedulers. Over 4 SMs each gets a
// quarter of both; what pays most, though, is the shorter chain of dependent instructions per
// warp. A cluster barrier after every layer (rather than the mbarrier exchange) and transposed
// weights with one dot product per 1-32 threads make a slower cluster form.
#include <cuda_pipeline.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "backends/cuda/device/dependent_launch.cuh"
#include "backends/cuda/device/element_type.cuh"
#include "backends/cuda/device/epilogue.cuh"
#include "backends/cuda/device/kernel_timeline.cuh"
#include "backends/cuda/device/mbarrier.cuh"
#include "backends/cuda/mlp/fused_mlp.hpp"
#include "backends/cuda/mlp/fused_mlp_row_image.hpp"
#include "backends/cuda/mlp/group_products.cuh"
#include "backends/cuda/platform/launch.hpp"

namespace fusednn::cuda {
namespace {

constexpr int kThreads = 256;
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
  const void* x;                    // input_type's elements
  void* y;                          // output_type's elements
  int32_t input_type, output_type;  // ElementType values
  const float* image;               // the cluster image (build_fused_mlp_cluster_image)
  int64_t rows;
  int32_t layer_count;
  int32_t width4;                    // activation row stride: the widest in4
  int32_t rank_offset[kBlocks + 1];  // block r's run of the image: [rank_offset[r], ...[r + 1])
  RowImageLayer layers[kFusedMlpMaxLayers];  // their offsets are the row image's, unused here
};

// Block `rank`'s groups of a layer with `groups` of them: [first, end), contiguous, sizes
// differing by at most one between blocks.
__host__ __device__ inline int first_group(int groups, int rank) { return groups * rank / kBlocks; }

// Floats of a block's slice of a layer: its rows of W, then their biases.
__host__ __device__ inline int slice_floats(int group_count, int in4) {
  return kGroup * group_count * (in4 + 1);
}

// Where each block's run of the cluster image starts (floats), and where the last one ends:
// rank_offset[0..kBlocks].
void cluster_image_offsets(const RowImageLayer* layers, int layer_count, int32_t* rank_offset) {
  int32_t offset = 0;
  for (int rank = 0; rank < kBlocks; ++rank) {
    rank_offset[rank] = offset;
    for (int l = 0; l < layer_count; ++l) {
      const int groups = layers[l].out4 / kGroup;
      const int own = first_group(groups, rank + 1) - first_group(groups, rank);
      offset += slice_floats(own, layers[l].in4);
    }
  }
  rank_offset[kBlocks] = offset;
}

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
// The general epilogue as one out-of-line function: inlined into every unrolled layer, its
// transcendental functions tripled the kernel's code, and a model's first load waits for it.
__device__ __noinline__ float general_epilogue(const DeviceEpilogue& epilogue, float x) {
  return apply_epilogue(epilogue, x);
}

// The epilogue with the common cases first: none, or a lone ReLU (a uniform branch on values the
// block reads once per layer), then the general loop.
__device__ __forceinline__ float cluster_epilogue(const DeviceEpilogue& epilogue, bool relu_only,
                                                  float x) {
  if (epilogue.count == 0) return x;
  if (relu_only) return relu_keeping_nan(x);  // apply_op's formula
  return general_epilogue(epilogue, x);
}
#endif

template <int kRows>
__global__ void FDNN_CLUSTER_DIMS __launch_bounds__(kThreads, 1)
    fused_mlp_cluster_kernel(const __grid_constant__ ClusterParams p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  constexpr int kWarps = kThreads / 32;
  constexpr int kValues = kRows * kGroup;  // partial sums a lane holds per group
  constexpr int kLanesPerValue = 32 / kValues;
  extern __shared__ float4 shared_memory[];
  uint64_t* const exchanged = reinterpret_cast<uint64_t*>(shared_memory);  // one per layer
  // Three activation buffers, layer l reading buffer l % 3. Layer l's outputs from another block
  // land in buffer (l + 1) % 3, which held layer l - 2's input: that block got this block's
  // layer l - 1 outputs first, which this block sends only after its barrier at the start of
  // layer l - 1, so after all its reads of layer l - 2's input. Two buffers would rest on the
  // data dependencies through the butterfly instead.
  float* const act0 = reinterpret_cast<float*>(exchanged + kFusedMlpMaxLayers);
  float* const slices = act0 + kActivationBuffers * kRows * p.width4;
  const int tid = threadIdx.x;
  const int lane = tid % 32, warp = tid / 32;
  const int rank = static_cast<int>(blockIdx.x % kBlocks);
  const int64_t row0 = static_cast<int64_t>(blockIdx.x / kBlocks) * kRows;
  const int valid_rows = static_cast<int>(min(static_cast<int64_t>(kRows), p.rows - row0));
  const int layer_count = p.layer_count;
  FDNN_CLUSTER_TIMELINE(0);

  // This block's run of the image (its slices of every layer, one after another), then the rows
  // of x, zero past the batch and in the row's padding (the padded weight columns are zero, so
  // these need only be finite). One cp.async group: layer 0 waits for all of it. Launched as a
  // dependent kernel (launch_dependent_kernel), a cluster may start while the kernel before it
  // finishes: only the weights go out before the wait for it.
  {
    const int begin = p.rank_offset[rank], words = (p.rank_offset[rank + 1] - begin) / 4;
    const float4* source = reinterpret_cast<const float4*>(p.image + begin);
    float4* destination = reinterpret_cast<float4*>(slices);
    for (int q = tid; q < words; q += kThreads) {
      __pipeline_memcpy_async(destination + q, source + q, sizeof(float4));
    }
    wait_for_previous_grid();
    allow_next_grid();
    const int in = p.layers[0].in, in4 = p.layers[0].in4;
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const int64_t x_row = (row0 + r) * in;
      for (int k = tid; k < in4; k += kThreads) {
        float* x_destination = act0 + r * p.width4 + k;
        if (r < valid_rows && k < in) {
          if (p.input_type == static_cast<int32_t>(ElementType::Float32)) {
            __pipeline_memcpy_async(x_destination, static_cast<const float*>(p.x) + x_row + k,
                                    sizeof(float));
          } else {  // a 16-bit model input, widened on its way in
            *x_destination = load_widened(p.x, p.input_type, x_row + k);
          }
        } else {
          *x_destination = 0.0f;
        }
      }
    }
    __pipeline_commit();
  }
  FDNN_CLUSTER_TIMELINE(1);
  // Each exchange's mbarrier expects the bytes of the other blocks' groups; remote stores may
  // land only once it is initialised: the cluster barrier, arrived at here and waited for before
  // this block's first remote store. The init fence publishes the mbarriers, so the arrival
  // itself is relaxed (a release would wait for this thread's loads, the slices included).
  if (layer_count > 1) {
    if (tid == 0) {
#pragma unroll
      for (int l = 0; l + 1 < kFusedMlpMaxLayers; ++l) {
        if (l + 1 >= layer_count) break;
        init_single_arrival(shared_address(exchanged + l));
      }
      publish_mbarrier_init();
#pragma unroll
      for (int l = 0; l + 1 < kFusedMlpMaxLayers; ++l) {
        if (l + 1 >= layer_count) break;
        const int groups = p.layers[l].out4 / kGroup;
        const int own = first_group(groups, rank + 1) - first_group(groups, rank);
        const auto bytes = static_cast<uint32_t>(sizeof(float) * kRows * kGroup * (groups - own));
        expect_bytes(shared_address(exchanged + l), bytes);
      }
    }
    asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
  }
  FDNN_CLUSTER_TIMELINE(2);
  // The other blocks' copies of the activations and mbarriers, mapped once.
  uint32_t remote_act[kBlocks - 1], remote_exchanged[kBlocks - 1];
#pragma unroll
  for (int offset = 1; offset < kBlocks; ++offset) {
    const int other = (rank + offset) % kBlocks;
    remote_act[offset - 1] = in_block(shared_address(act0), other);
    remote_exchanged[offset - 1] = in_block(shared_address(exchanged), other);
  }

  const float* slice = slices;
  int in_buffer = 0;                      // layer l reads activation buffer l % 3
  bool cluster_ready = layer_count == 1;  // warp-uniform: this warp waited for the cluster barrier
  // Unrolled over the most layers a chain has, so that every layer's fields are constants at
  // fixed offsets (uniform loads the compiler can issue early) rather than indexed loads.
#pragma unroll
  for (int l = 0; l < kFusedMlpMaxLayers; ++l) {
    if (l >= layer_count) break;
    const RowImageLayer& layer = p.layers[l];
    const bool last = l + 1 == layer_count;
    const int in4 = layer.in4, out = layer.out;
    const int groups = layer.out4 / kGroup;
    const int g0 = first_group(groups, rank), g1 = first_group(groups, rank + 1);
    const bool relu_only = layer.epilogue.count == 1 && layer.epilogue.kind[0] == kOpReLU;
    const float* in = act0 + in_buffer * kRows * p.width4;
    const int out_buffer = in_buffer == kActivationBuffers - 1 ? 0 : in_buffer + 1;
    const int out_offset = out_buffer * kRows * p.width4;  // floats into the activations
    const float* bias = slice + kGroup * (g1 - g0) * in4;

    if (l == 0) __pipeline_wait_prior(0);  // x and the slices have landed (for this thread)
    FDNN_CLUSTER_TIMELINE(3 + 3 * l);
    if (l > 0) {  // the other blocks' part of this layer's input
      wait_for_phase_zero<AcquireScope::Cluster>(shared_address(exchanged + l - 1));
    }
    __syncthreads();  // ... and this block's
    FDNN_CLUSTER_TIMELINE(4 + 3 * l);

    for (int g = g0 + warp; g < g1; g += kWarps) {
      const int local = kGroup * (g - g0);  // the group's first row in the slice
      const float total =
          group_products<kRows, kGroup>(slice + local * in4, in4, in, p.width4, lane);
      if (!cluster_ready) {  // before this warp's first remote store
        asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
        cluster_ready = true;
      }
      const int value = lane / kLanesPerValue;
      if (lane % kLanesPerValue == 0) {
        const int r = value / kGroup, j = value % kGroup, o = kGroup * g + j;
        const float result =
            o < out ? cluster_epilogue(layer.epilogue, relu_only, total + bias[local + j]) : 0.0f;
        if (last) {
          if (r < valid_rows && o < out) {
            store_narrowed(p.y, p.output_type, (row0 + r) * out + o, result);
          }
        } else {
          const float kept = r < valid_rows ? result : 0.0f;  // rows past the batch: zero
          const int at = out_offset + r * p.width4 + o;
          act0[at] = kept;
          const auto bytes = static_cast<uint32_t>(sizeof(float) * at);
          const auto barrier = static_cast<uint32_t>(sizeof(uint64_t) * l);
#pragma unroll
          for (int b = 0; b < kBlocks - 1; ++b) {
            store_remote(remote_act[b] + bytes, kept, remote_exchanged[b] + barrier);
          }
        }
      }
    }
    if (!cluster_ready) {  // a warp without groups in layer 0 still waits once
      asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
      cluster_ready = true;
    }
    FDNN_CLUSTER_TIMELINE(5 + 3 * l);
    slice += slice_floats(g1 - g0, in4);
    in_buffer = out_buffer;
  }
#endif
}

// Rows per cluster for a batch: 1 and 2 rows take kernels of their own, more take tiles of
// kFusedMlpClusterRows.
int rows_per_cluster(int64_t rows) { return rows <= 1 ? 1 : rows == 2 ? 2 : kFusedMlpClusterRows; }

// The kernel a batch of `rows` launches, with its name for launch errors.
struct ClusterKernel {
  void (*function)(ClusterParams);
  const char* name;
};
ClusterKernel kernel_for_rows(int64_t rows) {
  switch (rows_per_cluster(rows)) {
    case 1: return {fused_mlp_cluster_kernel<1>, "fused_mlp_cluster_kernel<1 row>"};
    case 2: return {fused_mlp_cluster_kernel<2>, "fused_mlp_cluster_kernel<2 rows>"};
    default:
      return {fused_mlp_cluster_kernel<kFusedMlpClusterRows>, "fused_mlp_cluster_kernel<4 rows>"};
  }
}

}  // namespace

std::vector<float> build_fused_mlp_cluster_image(const std::vector<FusedMlpLayerDesc>& layers,
                                                 const std::vector<const float*>& weights,
                                                 const std::vector<const float*>& biases) {
  RowImageLayer layout[kFusedMlpMaxLayers];
  int width4 = 0;
  row_image_layout(layers, layout, &width4);
  const int layer_count = static_cast<int>(layers.size());
  int32_t rank_offset[kBlocks + 1];
  cluster_image_offsets(layout, layer_count, rank_offset);
  std::vector<float> image(static_cast<size_t>(rank_offset[kBlocks]), 0.0f);
  for (int rank = 0; rank < kBlocks; ++rank) {
    size_t at = static_cast<size_t>(rank_offset[rank]);
    for (int l = 0; l < layer_count; ++l) {
      const RowImageLayer& layer = layout[l];
      const int groups = layer.out4 / kGroup;
      const int first = kGroup * first_group(groups, rank);
      const int end = kGroup * first_group(groups, rank + 1);
      for (int o = first; o < end && o < layer.out; ++o) {  // rows past out stay zero
        std::copy(weights[l] + static_cast<size_t>(o) * layer.in,
                  weights[l] + static_cast<size_t>(o + 1) * layer.in,
                  image.begin() + at + static_cast<size_t>(o - first) * layer.in4);
      }
      at += static_cast<size_t>(end - first) * layer.in4;
      for (int o = first; biases[l] != nullptr && o < end && o < layer.out; ++o) {
        image[at + (o - first)] = biases[l][o];
      }
      at += static_cast<size_t>(end - first);
    }
  }
  return image;
}

size_t fused_mlp_cluster_shared_bytes(const FusedMlpPlan& plan, int64_t max_rows) {
  if (plan.layers.empty() || plan.layers.size() > static_cast<size_t>(kFusedMlpMaxLayers)) {
    return 0;
  }
  RowImageLayer layers[kFusedMlpMaxLayers];
  int width4 = 0;
  row_image_layout(plan.layers, layers, &width4);
  // The activations of the largest tile a launch of up to max_rows rows takes.
  const auto tile = static_cast<size_t>(rows_per_cluster(max_rows));
  size_t floats = kActivationBuffers * tile * width4;
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

int fused_mlp_cluster_capacity(size_t shared_bytes, int64_t max_rows, const DeviceInfo& device) {
  // Asked of the kernel that batches of max_rows launch: each kernel the query or an attribute
  // touches is loaded, and a model's first load waits for every one, so touching more kernels
  // lengthens a model's cold start. The query answers for
  // the kernel's current limit, 48 KB until it is raised, so the limit is raised first; always
  // to the device's most, since a model's own size would lower it under another model's
  // launches.
  const auto kernel = kernel_for_rows(max_rows).function;
  // Its body exists only where it was built for sm_90 or newer (all three row counts alike).
  if (!kernel_built_for(reinterpret_cast<const void*>(kernel), 90)) return 0;
  if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           static_cast<int>(device.shared_per_block_optin)) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(kBlocks);
  config.blockDim = dim3(kThreads);
  config.dynamicSmemBytes = shared_bytes;
  int clusters = 0;
  if (cudaOccupancyMaxActiveClusters(&clusters, kernel, &config) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return clusters;
}

void prepare_fused_mlp_cluster_kernels(int64_t max_rows, const DeviceInfo& device) {
  const int bytes = static_cast<int>(device.shared_per_block_optin);  // as in _fits
  // The kernels of 1, 2 and 3 or more rows, those a batch up to max_rows reaches.
  for (int64_t rows = 1; rows <= 3 && (rows == 1 || rows <= max_rows); ++rows) {
    FDNN_CUDA_CHECK(cudaFuncSetAttribute(kernel_for_rows(rows).function,
                                         cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  }
}

void launch_fused_mlp_cluster(const FusedMlpPlan& plan, TypedInput x, TypedOutput y, int64_t rows,
                              cudaStream_t stream) {
  ClusterParams p{};
  fill_row_image_params(plan, plan.cluster_image, x, y, rows, &p);
  cluster_image_offsets(p.layers, p.layer_count, p.rank_offset);
  const int tile = rows_per_cluster(rows);
  const auto clusters = static_cast<unsigned>((rows + tile - 1) / tile);
  const ClusterKernel kernel = kernel_for_rows(rows);
  launch_dependent_kernel(kernel.function, kernel.name, clusters * kBlocks, kThreads,
                          plan.cluster_shared_bytes, stream, p);
}

}  // namespace fusednn::cuda
