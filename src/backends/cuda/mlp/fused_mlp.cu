// SPDX-License-Identifier: Apache-2.0
// The fully fused MLP kernel (see fused_mlp.hpp for the design).
//
// Napkin math, seed MLP 100-128-64-10 (21.6 K weights, 86 KB):
//   batch 1: one block; the floor is reading 86 KB from L2 into one SM plus three short dependent
//     layers; the launch itself costs more than the arithmetic.
//   batch 262144: 5.7 G multiply-adds against 115 MB of input and output: at the fp32 FMA rate
//     the arithmetic takes several times as long as the bytes, so the kernel is arithmetic-bound
//     and the inner loop is register tiled (4 rows x 4 columns per thread, 16-byte shared loads:
//     2 loads per 16 FMAs).
// Activations never leave the chip between layers, where an unfused run writes and re-reads
// 128 + 64 floats per row.
#include "backends/cuda/mlp/fused_mlp.hpp"

#include <cuda_pipeline.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "backends/cuda/device/element_type.cuh"
#include "backends/cuda/device/epilogue.cuh"
#include "backends/cuda/platform/launch.hpp"

namespace fusednn::cuda {
namespace {

constexpr int kThreads = 256;

struct FusedMlpLayer {
  const float* weight_t;
  const float* bias;
  int32_t in, out, padded_out;
  int32_t tile_cols;   // columns one block computes: padded_out in a chain, a slice of a lone layer
  int32_t chunk_rows;  // weight rows per staged chunk
  DeviceEpilogue epilogue;
};

struct FusedMlpParams {
  const void* x;                    // input_type's elements
  void* y;                          // output_type's elements
  int32_t input_type, output_type;  // ElementType values
  int64_t rows;
  int32_t layer_count;
  int32_t even_width;
  int32_t odd_width;
  int32_t stage_floats;
  FusedMlpLayer layers[kFusedMlpMaxLayers];
};

// The compile-time tile shapes; the launcher picks one per batch.
struct SmallTile {  // few rows: 8 rows, one output per thread per tile, 4 stages in flight
  static constexpr int kTileRows = 8, kRowsPerThread = 1, kColsPerThread = 1, kStages = 4;
  static constexpr int kStageFloats = 4096;
};
struct MediumTile {
  static constexpr int kTileRows = 32, kRowsPerThread = 2, kColsPerThread = 4, kStages = 3;
  static constexpr int kStageFloats = 4096;
};
struct LargeTile {  // many rows: 64 rows, 4 x 4 outputs per thread per tile
  static constexpr int kTileRows = 64, kRowsPerThread = 4, kColsPerThread = 4, kStages = 3;
  static constexpr int kStageFloats = 4096;
};

template <int kCount>
__device__ __forceinline__ void load_vector(const float* source, float (&values)[kCount]) {
  if constexpr (kCount == 4) {
    const float4 v = *reinterpret_cast<const float4*>(source);
    values[0] = v.x;
    values[1] = v.y;
    values[2] = v.z;
    values[3] = v.w;
  } else if constexpr (kCount == 2) {
    const float2 v = *reinterpret_cast<const float2*>(source);
    values[0] = v.x;
    values[1] = v.y;
  } else {
#pragma unroll
    for (int i = 0; i < kCount; ++i) values[i] = source[i];
  }
}

template <int kCount>
__device__ __forceinline__ void store_vector(float* destination, const float (&values)[kCount]) {
  if constexpr (kCount == 4) {
    *reinterpret_cast<float4*>(destination) =
        make_float4(values[0], values[1], values[2], values[3]);
  } else if constexpr (kCount == 2) {
    *reinterpret_cast<float2*>(destination) = make_float2(values[0], values[1]);
  } else {
#pragma unroll
    for (int i = 0; i < kCount; ++i) destination[i] = values[i];
  }
}

template <class Tile>
__global__ void __launch_bounds__(kThreads)
    fused_mlp_kernel(const __grid_constant__ FusedMlpParams p) {
  constexpr int kRows = Tile::kTileRows;
  constexpr int kR = Tile::kRowsPerThread;
  constexpr int kC = Tile::kColsPerThread;
  constexpr int kStages = Tile::kStages;
  constexpr int kLd = kRows + 4;  // activation row stride: 16-byte aligned, spreads banks
  constexpr int kRowGroups = kRows / kR;
  constexpr int kTiles = (kRowGroups * (kFusedMlpMaxWidth / kC) + kThreads - 1) / kThreads;

  extern __shared__ float4 shared_memory[];
  float* const act0 = reinterpret_cast<float*>(shared_memory);
  float* const act1 = act0 + p.even_width * kLd;
  float* const stage = act1 + p.odd_width * kLd;

  const int tid = threadIdx.x;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kRows;
  const int valid_rows = static_cast<int>(min(static_cast<int64_t>(kRows), p.rows - row0));

  // The block's rows of x, transposed into act0 by 4-byte asynchronous copies that join the
  // first weight chunk's group, so their latency overlaps the weight prologue (a 16-bit model
  // input by plain loads, widened); rows past the batch are zeros (computed on, never stored).
  {
    const int in0 = p.layers[0].in;
    if (p.input_type == static_cast<int32_t>(ElementType::Float32)) {
      const float* x = static_cast<const float*>(p.x) + row0 * in0;
      for (int index = tid; index < kRows * in0; index += kThreads) {
        const int r = index / in0;
        const int k = index - r * in0;
        if (r < valid_rows) {
          __pipeline_memcpy_async(act0 + k * kLd + r, x + static_cast<int64_t>(r) * in0 + k, 4);
        } else {
          act0[k * kLd + r] = 0.0f;
        }
      }
    } else {  // a 16-bit model input, widened on its way in
      for (int index = tid; index < kRows * in0; index += kThreads) {
        const int r = index / in0;
        const int k = index - r * in0;
        act0[k * kLd + r] =
            r < valid_rows ? load_widened(p.x, p.input_type, (row0 + r) * in0 + k) : 0.0f;
      }
    }
  }

  // Weight chunks in order over all layers; each issue() commits one cp.async group (empty past
  // the last chunk, so that group counting stays uniform).
  int fetch_layer = 0, fetch_k = 0, fetch_slot = 0;
  auto issue = [&]() {
    if (fetch_layer < p.layer_count) {
      const FusedMlpLayer& layer = p.layers[fetch_layer];
      const int c0 = blockIdx.y * layer.tile_cols;
      const int cols = min(layer.tile_cols, layer.padded_out - c0);
      const int count = min(layer.chunk_rows, layer.in - fetch_k);
      const int quads = cols / 4;
      float* destination = stage + fetch_slot * p.stage_floats;
      const float* source = layer.weight_t + static_cast<int64_t>(fetch_k) * layer.padded_out + c0;
      for (int q = tid; q < count * quads; q += kThreads) {
        const int r = q / quads;
        const int c = q - r * quads;
        __pipeline_memcpy_async(destination + r * cols + c * 4,
                                source + static_cast<int64_t>(r) * layer.padded_out + c * 4, 16);
      }
      fetch_k += count;
      if (fetch_k >= layer.in) {
        ++fetch_layer;
        fetch_k = 0;
      }
    }
    __pipeline_commit();
    fetch_slot = fetch_slot + 1 == kStages ? 0 : fetch_slot + 1;
  };
  for (int s = 0; s < kStages - 1; ++s) issue();

  float acc[kTiles][kR][kC];
#pragma unroll
  for (int t = 0; t < kTiles; ++t)
#pragma unroll
    for (int i = 0; i < kR; ++i)
#pragma unroll
      for (int j = 0; j < kC; ++j) acc[t][i][j] = 0.0f;

  int layer_index = 0, k0 = 0, slot = 0;
  while (layer_index < p.layer_count) {
    issue();
    __pipeline_wait_prior(kStages - 1);
    __syncthreads();  // this chunk and the previous layer's activations are visible to all

    const FusedMlpLayer& layer = p.layers[layer_index];
    const int c0 = blockIdx.y * layer.tile_cols;
    const int cols = min(layer.tile_cols, layer.padded_out - c0);
    const int count = min(layer.chunk_rows, layer.in - k0);
    const int col_groups = cols / kC;
    const int tiles = kRowGroups * col_groups;
    const float* a_chunk = ((layer_index & 1) ? act1 : act0) + k0 * kLd;
    const float* w_chunk = stage + slot * p.stage_floats;

#pragma unroll
    for (int t = 0; t < kTiles; ++t) {
      const int u = tid + t * kThreads;
      if (u < tiles) {
        const int rg = u / col_groups;
        const int cg = u - rg * col_groups;
        if (rg * kR < valid_rows) {
          const float* a_pointer = a_chunk + rg * kR;
          const float* w_pointer = w_chunk + cg * kC;
#pragma unroll 4
          for (int k = 0; k < count; ++k) {
            float a[kR], w[kC];
            load_vector<kR>(a_pointer + k * kLd, a);
            load_vector<kC>(w_pointer + k * cols, w);
#pragma unroll
            for (int i = 0; i < kR; ++i)
#pragma unroll
              for (int j = 0; j < kC; ++j) acc[t][i][j] = fmaf(a[i], w[j], acc[t][i][j]);
          }
        }
      }
    }

    k0 += count;
    if (k0 >= layer.in) {
      // Bias and epilogue; the last layer stores to y, the others to the other buffer.
      const bool last = layer_index + 1 == p.layer_count;
      float* next = (layer_index & 1) ? act0 : act1;
#pragma unroll
      for (int t = 0; t < kTiles; ++t) {
        const int u = tid + t * kThreads;
        if (u < tiles) {
          const int rg = u / col_groups;
          const int cg = u - rg * col_groups;
          if (rg * kR < valid_rows) {
#pragma unroll
            for (int j = 0; j < kC; ++j) {
              const int col = c0 + cg * kC + j;
              if (col < layer.out) {
                const float b = layer.bias ? layer.bias[col] : 0.0f;
                float values[kR];
#pragma unroll
                for (int i = 0; i < kR; ++i) {
                  values[i] = apply_epilogue(layer.epilogue, acc[t][i][j] + b);
                }
                if (last) {
#pragma unroll
                  for (int i = 0; i < kR; ++i) {
                    const int r = rg * kR + i;
                    if (r < valid_rows) {
                      store_narrowed(p.y, p.output_type, (row0 + r) * layer.out + col, values[i]);
                    }
                  }
                } else {
                  // The thread's kR rows of this feature are contiguous: one vector store.
                  store_vector<kR>(next + col * kLd + rg * kR, values);
                }
              }
            }
          }
        }
#pragma unroll
        for (int i = 0; i < kR; ++i)
#pragma unroll
          for (int j = 0; j < kC; ++j) acc[t][i][j] = 0.0f;
      }
      ++layer_index;
      k0 = 0;
    }
    slot = slot + 1 == kStages ? 0 : slot + 1;
    __syncthreads();  // everyone is done with this stage before issue() refills it
  }
}

template <class Tile>
FusedMlpVariant fit_variant(int even_width, int odd_width, int widest_tile, int largest_layer,
                            const DeviceInfo& device) {
  FusedMlpVariant variant;
  variant.tile_rows = Tile::kTileRows;
  const size_t activation_bytes =
      sizeof(float) * static_cast<size_t>(even_width + odd_width) * (Tile::kTileRows + 4);
  // At least 4 weight rows per chunk; shrink the stages before giving up on the tile.
  const int min_stage = 4 * widest_tile;
  int stage_floats = std::max(Tile::kStageFloats, min_stage);
  while (true) {
    const size_t bytes =
        activation_bytes + sizeof(float) * static_cast<size_t>(Tile::kStages) * stage_floats;
    if (bytes <= device.shared_per_block_optin) {
      variant.usable = true;
      variant.stage_floats = stage_floats;
      variant.shared_bytes = bytes;
      break;
    }
    if (stage_floats == min_stage) break;
    stage_floats = std::max(min_stage, stage_floats / 2);
  }
  // For grids of at most one block per SM nothing shares the SM: stages as large as the shared
  // memory allows (a whole layer each when it fits), so fewer serial wait-and-sync rounds.
  variant.wide_stage_floats = variant.stage_floats;
  variant.wide_shared_bytes = variant.shared_bytes;
  if (variant.usable && device.shared_per_block_optin > activation_bytes) {
    const size_t room =
        (device.shared_per_block_optin - activation_bytes) / sizeof(float) / Tile::kStages / 4 * 4;
    const size_t wide = std::min<size_t>(room, static_cast<size_t>(largest_layer + 3) / 4 * 4);
    if (wide > static_cast<size_t>(variant.stage_floats)) {
      variant.wide_stage_floats = static_cast<int>(wide);
      variant.wide_shared_bytes = activation_bytes + sizeof(float) * Tile::kStages * wide;
    }
  }
  return variant;
}

int round_up4(int value) { return (value + 3) / 4 * 4; }

template <class Tile>
void launch_tile(const FusedMlpPlan& plan, const FusedMlpVariant& variant, TypedInput x,
                 TypedOutput y, int64_t rows, const DeviceInfo& device, cudaStream_t stream,
                 const char* name) {
  FusedMlpParams p{};
  p.x = x.data;
  p.y = y.data;
  p.input_type = static_cast<int32_t>(x.type);
  p.output_type = static_cast<int32_t>(y.type);
  p.rows = rows;
  p.layer_count = static_cast<int32_t>(plan.layers.size());
  p.even_width = plan.even_width;
  p.odd_width = plan.odd_width;
  const int64_t row_tiles = (rows + Tile::kTileRows - 1) / Tile::kTileRows;
  int slices = 1;
  for (int l = 0; l < p.layer_count; ++l) {
    const FusedMlpLayerDesc& desc = plan.layers[l];
    FusedMlpLayer& layer = p.layers[l];
    layer.weight_t = desc.weight_t;
    layer.bias = desc.bias;
    layer.in = desc.in;
    layer.out = desc.out;
    layer.padded_out = desc.padded_out;
    layer.epilogue = desc.epilogue;
    layer.tile_cols = desc.padded_out;
    if (p.layer_count == 1) {
      // A lone layer: narrower column slices until the grid covers the SMs (or 32 columns).
      int tile_cols = std::min(desc.padded_out, kFusedMlpMaxWidth);
      auto slices_for = [&](int cols) { return (desc.padded_out + cols - 1) / cols; };
      while (tile_cols > 32 && row_tiles * slices_for(tile_cols) < device.sm_count) {
        tile_cols = round_up4(tile_cols / 2);
      }
      layer.tile_cols = tile_cols;
      slices = slices_for(tile_cols);
    }
  }
  const bool wide = row_tiles * slices <= device.sm_count;
  p.stage_floats = wide ? variant.wide_stage_floats : variant.stage_floats;
  for (int l = 0; l < p.layer_count; ++l) {
    p.layers[l].chunk_rows = std::max(1, p.stage_floats / p.layers[l].tile_cols);
  }
  const dim3 grid(static_cast<unsigned>(row_tiles), static_cast<unsigned>(slices));
  launch_kernel(fused_mlp_kernel<Tile>, name, grid, kThreads,
                wide ? variant.wide_shared_bytes : variant.shared_bytes, stream, p);
}

}  // namespace

bool plan_fused_mlp(const std::vector<FusedMlpLayerDesc>& layers, int64_t max_rows,
                    const DeviceInfo& device, FusedMlpPlan* plan) {
  if (layers.empty() || layers.size() > static_cast<size_t>(kFusedMlpMaxLayers)) return false;
  int even = 0, odd = 0, widest_tile = 0, largest_layer = 0;
  for (size_t l = 0; l < layers.size(); ++l) {
    const FusedMlpLayerDesc& layer = layers[l];
    if (layer.in < 1 || layer.out < 1 || layer.padded_out != round_up4(layer.out)) return false;
    if (l > 0 && layer.in != layers[l - 1].out) return false;
    if (layers.size() > 1 && layer.out > kFusedMlpMaxWidth) return false;
    int& width = (l % 2 == 0) ? even : odd;
    width = std::max(width, layer.in);
    widest_tile = std::max(widest_tile, std::min(layer.padded_out, kFusedMlpMaxWidth));
    largest_layer =
        std::max(largest_layer, layer.in * std::min(layer.padded_out, kFusedMlpMaxWidth));
  }
  FusedMlpPlan result;
  result.layers = layers;
  result.even_width = even;
  result.odd_width = odd;
  result.variants[0] = fit_variant<SmallTile>(even, odd, widest_tile, largest_layer, device);
  result.variants[1] = fit_variant<MediumTile>(even, odd, widest_tile, largest_layer, device);
  result.variants[2] = fit_variant<LargeTile>(even, odd, widest_tile, largest_layer, device);
  bool any = false;
  for (const FusedMlpVariant& variant : result.variants) any = any || variant.usable;
  if (!any) return false;
  // The small-batch forms stage images of their own, which are the backend's to build and upload
  // (build_fused_mlp_row_image, build_fused_mlp_cluster_image). On compute capability 9.0 and
  // newer the cluster form takes batches while its clusters fit the SMs at once; the
  // single-block form takes up to kFusedMlpBlockMaxRows rows elsewhere.
  // The override small_batch_mlp=block or =cluster leaves the other form out.
  const SmallBatchMlpForms forms = device.overrides.small_batch_mlp;
  bool narrow = true;  // the small-batch forms take layers of at most kFusedMlpMaxWidth columns
  for (const FusedMlpLayerDesc& layer : layers) {
    narrow = narrow && layer.padded_out <= kFusedMlpMaxWidth;
  }
#ifndef FUSEDNN_CUDA_NO_CLUSTER_MLP  // a build switch to rule the cluster form out when debugging
  if (device.major >= 9 && narrow && forms != SmallBatchMlpForms::BlockOnly) {
    const size_t bytes = fused_mlp_cluster_shared_bytes(result, max_rows);
    const int clusters = bytes <= device.shared_per_block_optin
                             ? fused_mlp_cluster_capacity(bytes, max_rows, device)
                             : 0;
    if (clusters > 0) {
      result.cluster_shared_bytes = bytes;
      result.cluster_max_rows = int64_t{clusters} * kFusedMlpClusterRows;
    }
  }
#endif
  if (narrow && forms != SmallBatchMlpForms::ClusterOnly && result.cluster_shared_bytes == 0) {
    const size_t bytes = fused_mlp_block_shared_bytes(result);
    if (bytes <= device.shared_per_block_optin) result.block_shared_bytes = bytes;
  }
  *plan = std::move(result);
  return true;
}

void prepare_fused_mlp_kernels(const FusedMlpPlan& plan, int64_t max_rows,
                               const DeviceInfo& device) {
  // launch_fused_mlp's choice: the cluster form while its clusters fit the SMs, then the block
  // form up to kFusedMlpBlockMaxRows rows, then a tile. Only the kernels a batch up to max_rows
  // can reach: setting an attribute loads the kernel.
  int64_t covered = 0;  // rows up to which a small-batch form takes every batch
  if (plan.cluster_shared_bytes > 0) {
    prepare_fused_mlp_cluster_kernels(max_rows, device);
    covered = plan.cluster_max_rows;
  }
  if (plan.block_shared_bytes > 0 && max_rows > covered) {
    prepare_fused_mlp_block_kernels(max_rows, device);
    covered = std::max<int64_t>(covered, kFusedMlpBlockMaxRows);
  }
  if (max_rows <= covered) return;
  const int bytes = static_cast<int>(device.shared_per_block_optin);
  FDNN_CUDA_CHECK(cudaFuncSetAttribute(fused_mlp_kernel<SmallTile>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  FDNN_CUDA_CHECK(cudaFuncSetAttribute(fused_mlp_kernel<MediumTile>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  FDNN_CUDA_CHECK(cudaFuncSetAttribute(fused_mlp_kernel<LargeTile>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
}

FusedMlpForm fused_mlp_form(const FusedMlpPlan& plan, int64_t rows, const DeviceInfo& device) {
  if (plan.cluster_shared_bytes > 0 && plan.cluster_image != nullptr &&
      rows <= plan.cluster_max_rows) {
    return FusedMlpForm::Cluster;
  }
  if (plan.block_shared_bytes > 0 && plan.block_image != nullptr && rows <= kFusedMlpBlockMaxRows) {
    return FusedMlpForm::Block;
  }
  // The largest tile that still gives every SM a block; small batches take the small tile.
  // A lone layer can also split its columns over blocks (down to 32 columns), so there a tile
  // only needs as many rows as it holds and enough blocks for half the SMs.
  const auto& v = plan.variants;
  const bool lone = plan.layers.size() == 1;
  const int64_t column_slices = lone ? (plan.layers[0].padded_out + 31) / 32 : 1;
  auto enough = [&](int tile_rows) {
    const int64_t row_tiles = (rows + tile_rows - 1) / tile_rows;
    return lone ? rows >= tile_rows && 2 * row_tiles * column_slices >= device.sm_count
                : rows >= int64_t{tile_rows} * device.sm_count;
  };
  if (v[2].usable && enough(LargeTile::kTileRows)) return FusedMlpForm::Tile64;
  if (v[1].usable && enough(MediumTile::kTileRows)) return FusedMlpForm::Tile32;
  if (v[0].usable) return FusedMlpForm::Tile8;
  return v[1].usable ? FusedMlpForm::Tile32 : FusedMlpForm::Tile64;
}

void launch_fused_mlp(const FusedMlpPlan& plan, TypedInput x, TypedOutput y, int64_t rows,
                      const DeviceInfo& device, cudaStream_t stream) {
  if (rows <= 0) return;
  const auto& v = plan.variants;
  switch (fused_mlp_form(plan, rows, device)) {
    case FusedMlpForm::Cluster: launch_fused_mlp_cluster(plan, x, y, rows, stream); break;
    case FusedMlpForm::Block: launch_fused_mlp_block(plan, x, y, rows, stream); break;
    case FusedMlpForm::Tile8:
      launch_tile<SmallTile>(plan, v[0], x, y, rows, device, stream, "fused_mlp_kernel<8 rows>");
      break;
    case FusedMlpForm::Tile32:
      launch_tile<MediumTile>(plan, v[1], x, y, rows, device, stream, "fused_mlp_kernel<32 rows>");
      break;
    case FusedMlpForm::Tile64:
      launch_tile<LargeTile>(plan, v[2], x, y, rows, device, stream, "fused_mlp_kernel<64 rows>");
      break;
  }
}

}  // namespace fusednn::cuda
