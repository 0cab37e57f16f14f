// SPDX-License-Identifier: Apache-2.0
// The fully fused MLP: a chain of Linear (+bias) + epilogue layers run as one kernel launch.
// Each block owns a tile of rows; the tile's activations stay in shared memory from layer to
// layer (transposed, [feature][row]) and every layer's weights stream through a ring of
// shared-memory stages filled with cp.async, the next chunks in flight while the current one is
// multiplied. A single wide layer (out > kFusedMlpMaxWidth) can run the same kernel with its
// columns split across blocks (grid.y); the backend sends such layers to cuBLASLt instead
// (linear_cublaslt.hpp), so only lone layers of at most kFusedMlpMaxWidth columns come here.
//
// Query, then run: plan_fused_mlp() says at load whether a chain fits on this device and with
// which tiles (none fits -> the caller tries a shorter chain, and runs a lone layer that does not
// fit on cuBLASLt); launch_fused_mlp() picks a tile for the batch and launches.
#pragma once

#include <cuda_runtime_api.h>

#include <array>
#include <cstdint>
#include <vector>

#include "backends/cuda/device/device_epilogue.hpp"
#include "backends/cuda/device/element_type.hpp"
#include "backends/cuda/platform/device_info.hpp"

namespace fusednn::cuda {

constexpr int kFusedMlpMaxLayers = 8;
constexpr int kFusedMlpMaxWidth = 256;  // widest output a block computes whole
constexpr int kFusedMlpVariants = 3;
// The small-batch form on compute capability 9.0 and newer (fused_mlp_cluster.cu): a cluster of
// kFusedMlpClusterBlocks blocks per 1, 2 or kFusedMlpClusterRows rows, every layer's output
// groups split across them; used while the clusters fit on the SMs at once.
constexpr int kFusedMlpClusterBlocks = 4;
constexpr int kFusedMlpClusterRows = 4;
// The single-block small-batch form (fused_mlp_block.cu, any GPU): up to kFusedMlpBlockRows rows
// per block, used up to kFusedMlpBlockMaxRows rows.
constexpr int kFusedMlpBlockRows = 4;
constexpr int kFusedMlpBlockMaxRows = 16;

struct FusedMlpLayerDesc {
  const float* weight_t = nullptr;  // [in][padded_out], transposed, columns past out zero
  const float* bias = nullptr;      // [out] or null
  int32_t in = 0;
  int32_t out = 0;
  int32_t padded_out = 0;  // out rounded up to a multiple of 4
  DeviceEpilogue epilogue;
};

// One tile shape's fit on this device for one chain.
struct FusedMlpVariant {
  bool usable = false;
  int tile_rows = 0;
  int stage_floats = 0;  // floats per staging buffer
  size_t shared_bytes = 0;
  int wide_stage_floats = 0;  // the same for grids of at most one block per SM
  size_t wide_shared_bytes = 0;
};

struct FusedMlpPlan {
  std::vector<FusedMlpLayerDesc> layers;
  int32_t even_width = 0;  // most features an even layer reads (activation buffer 0)
  int32_t odd_width = 0;   // most features an odd layer reads (activation buffer 1)
  std::array<FusedMlpVariant, kFusedMlpVariants> variants;
  size_t cluster_shared_bytes = 0;  // 0: the cluster form is not used for this chain
  int64_t cluster_max_rows = 0;     // the most rows it takes: one wave of resident clusters
  size_t block_shared_bytes = 0;    // 0: the single-block form is not used for this chain
  // The single-block form's row image (build_fused_mlp_row_image), on the device.
  const float* block_image = nullptr;
  // The cluster form's image (build_fused_mlp_cluster_image), on the device.
  const float* cluster_image = nullptr;
};

// Whether `layers` can run fused: 1 to kFusedMlpMaxLayers layers, each reading the previous
// one's output, every output but a lone layer's at most kFusedMlpMaxWidth wide, and at least one
// tile fitting in shared memory. Fills plan->variants and the small-batch forms' sizes. max_rows:
// the most rows a launch will get (the cluster form's occupancy query loads the kernel for
// them).
bool plan_fused_mlp(const std::vector<FusedMlpLayerDesc>& layers, int64_t max_rows,
                    const DeviceInfo& device, FusedMlpPlan* plan);

// Lets the kernels `plan` can launch for up to `max_rows` rows use the device's whole opt-in
// shared memory (at load). Only those: setting an attribute loads the kernel, and a model's
// first load in a process waits for every kernel it loads.
void prepare_fused_mlp_kernels(const FusedMlpPlan& plan, int64_t max_rows,
                               const DeviceInfo& device);

// Shared memory one block of the cluster form needs for the chain in `plan`, for batches of up
// to max_rows rows.
size_t fused_mlp_cluster_shared_bytes(const FusedMlpPlan& plan, int64_t max_rows);
// The cluster form's image: the row image's rows (fused_mlp_row_image.hpp) regrouped so that each
// block's rows of every layer, each layer's followed by their biases, are one contiguous run.
// weights[l]: [out][in] on the host, biases[l]: [out] or null (zeros).
std::vector<float> build_fused_mlp_cluster_image(const std::vector<FusedMlpLayerDesc>& layers,
                                                 const std::vector<const float*>& weights,
                                                 const std::vector<const float*>& biases);
// How many clusters with that much shared memory per block the current device holds at once (0:
// none), asked of the kernel batches of max_rows rows launch (the query loads it).
int fused_mlp_cluster_capacity(size_t shared_bytes, int64_t max_rows, const DeviceInfo& device);
// The row counts up to max_rows (1, 2, then kFusedMlpClusterRows per cluster).
void prepare_fused_mlp_cluster_kernels(int64_t max_rows, const DeviceInfo& device);
void launch_fused_mlp_cluster(const FusedMlpPlan& plan, TypedInput x, TypedOutput y, int64_t rows,
                              cudaStream_t stream);

// Shared memory the single-block form needs for the chain in `plan` (at kFusedMlpBlockRows rows).
size_t fused_mlp_block_shared_bytes(const FusedMlpPlan& plan);
// The row counts up to max_rows (1, 2, then kFusedMlpBlockRows per block).
void prepare_fused_mlp_block_kernels(int64_t max_rows, const DeviceInfo& device);
void launch_fused_mlp_block(const FusedMlpPlan& plan, TypedInput x, TypedOutput y, int64_t rows,
                            cudaStream_t stream);

// The kernel launch_fused_mlp() runs for `rows` rows: the cluster form while the clusters fit the
// SMs, the single-block form up to kFusedMlpBlockMaxRows rows, else the tiled kernel with the
// largest tile that still gives every SM a block (8, 32 or 64 rows).
enum class FusedMlpForm { Cluster, Block, Tile8, Tile32, Tile64 };
FusedMlpForm fused_mlp_form(const FusedMlpPlan& plan, int64_t rows, const DeviceInfo& device);

// y[rows][last out] = chain(x[rows][first in]), in fp32; x and y may be the caller's 16-bit model
// input and output, widened as they are read and narrowed as they are written.
void launch_fused_mlp(const FusedMlpPlan& plan, TypedInput x, TypedOutput y, int64_t rows,
                      const DeviceInfo& device, cudaStream_t stream);

}  // namespace fusednn::cuda
