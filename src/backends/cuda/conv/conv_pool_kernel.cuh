// SPDX-License-Identifier: Apache-2.0
// The fused conv + pool kernel (design in conv_pool.cu) as a template over the taps (5 or 3 at
// stride 1, 0 for any) and the register tile. conv_pool.cu instantiates the large tiles and
// conv_pool_small_*.cu the small one, one file per kernel size: with CUDA's lazy loading a model
// that only launches the small tile (batches under the SM count) loads only that file's module.
#pragma once

#include <cuda_pipeline.h>

#include "backends/cuda/conv/conv_pool_tile.cuh"

namespace fusednn::cuda::conv_tile {

constexpr int kConvPoolThreads = 256;
constexpr int kStageLanes = 8;  // threads per staged input row

// kK: 3 or 5 for square kernels at stride 1 (compile-time taps), 0 for any size and stride.
template <int kK, class T>
__global__ void __launch_bounds__(kConvPoolThreads, T::kBlocksPerSm)
    conv_pool_kernel(const __grid_constant__ ConvPoolParams p) {
  extern __shared__ float4 shared_memory[];
  float* const weights = reinterpret_cast<float*>(shared_memory);  // p.weight_floats
  float* const inputs = weights + p.weight_floats;  // [sample][in channel][staged row][row_pitch]

  const int tid = threadIdx.x;
  const int threads = blockDim.x;  // a multiple of 32
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * p.samples_per_block;
  const int samples =
      static_cast<int>(min(static_cast<int64_t>(p.samples_per_block), p.batch - n0));
  const int ty0 = blockIdx.y * p.slab_rows;
  const int slab_rows = min(p.slab_rows, p.patch_rows - ty0);
  const int stride_height = kK > 0 ? 1 : p.stride_height;
  const int stride_width = kK > 0 ? 1 : p.stride_width;
  const int kernel_height = kK > 0 ? kK : p.kernel_height;
  const int staged_height = (slab_rows * T::kR - 1) * stride_height + kernel_height;

  // Filters: a straight 16-byte copy of the image (its size is a multiple of 4 floats).
  {
    const float4* source = reinterpret_cast<const float4*>(p.weight);
    for (int i = tid; i < p.weight_floats / 4; i += threads) {
      __pipeline_memcpy_async(shared_memory + i, source + i, 16);
    }
  }
  // Input rows, kStageLanes threads per row: staged element (i, j) of a plane is input element
  // (origin_row + i, origin_col + j), or zero outside the input.
  {
    const int origin_row = p.origin_row + ty0 * T::kR * stride_height;
    const int64_t in_plane = static_cast<int64_t>(p.in_height) * p.in_width;
    const float* x = p.x + n0 * p.in_channels * in_plane;
    const int rows = samples * p.in_channels * staged_height;
    const int lane = tid % kStageLanes;
    for (int q = tid / kStageLanes; q < rows; q += threads / kStageLanes) {
      const int plane = q / staged_height;  // sample * in_channels + channel
      const int i = q - plane * staged_height;
      const int row = origin_row + i;
      const bool row_inside = row >= 0 && row < p.in_height;
      float* destination = inputs + plane * p.plane_floats + i * p.row_pitch;
      const float* source =
          x + plane * in_plane + static_cast<int64_t>(row_inside ? row : 0) * p.in_width;
      for (int j = lane; j < p.row_pitch; j += kStageLanes) {
        const int col = p.origin_col + j;
        if (row_inside && j < p.staged_width && col >= 0 && col < p.in_width) {
          __pipeline_memcpy_async(destination + j, source + col, 4);
        } else {
          destination[j] = 0.0f;
        }
      }
    }
  }
  __pipeline_commit();
  __pipeline_wait_prior(0);
  __syncthreads();  // the only barrier: shared memory is read-only from here on

  const int taps = kK > 0 ? kK * kK : p.kernel_height * p.kernel_width;
  const int per_sample = slab_rows * p.patch_cols;
  const int per_group = samples * per_sample;
  const int items = p.channel_groups * per_group;
  const int sample_floats = p.in_channels * p.plane_floats;
  const int weight_step = p.channel_groups * taps * T::kTapStride;  // one input channel to the next
  for (int item = tid; item < items; item += threads) {
    const int g = item / per_group;
    int rest = item - g * per_group;
    const int t = rest / per_sample;
    rest -= t * per_sample;
    const int tyl = rest / p.patch_cols;
    const int tx = rest - tyl * p.patch_cols;

    float acc[T::kValues];
#pragma unroll
    for (int v = 0; v < T::kValues; ++v) acc[v] = 0.0f;
    const float* input = inputs + t * sample_floats + tyl * T::kR * stride_height * p.row_pitch +
                         tx * T::kC * stride_width;
    const float* weight = weights + g * taps * T::kTapStride;
    if constexpr (kK > 0) {
      for (int c = 0; c < p.in_channels; ++c) {
        accumulate_fixed<kK, T>(input, p.row_pitch, weight, acc);
        input += p.plane_floats;
        weight += weight_step;
      }
    } else {
      int offset[T::kR][T::kC];
#pragma unroll
      for (int dy = 0; dy < T::kR; ++dy)
#pragma unroll
        for (int dx = 0; dx < T::kC; ++dx) {
          offset[dy][dx] = dy * stride_height * p.row_pitch + dx * stride_width;
        }
      for (int c = 0; c < p.in_channels; ++c) {
        accumulate_generic<T>(input, p.row_pitch, weight, p.kernel_height, p.kernel_width, offset,
                              acc);
        input += p.plane_floats;
        weight += weight_step;
      }
    }
    finish_patch<T>(
        p, acc,
        p.y + (n0 + t) * p.out_channels * static_cast<int64_t>(p.pooled_height * p.pooled_width), g,
        ty0 + tyl, tx);
  }
}

using ConvPoolKernel = void (*)(ConvPoolParams);

// conv_pool_kernel<5 / 3 / 0, SmallTile>, each from a file of its own (conv_pool_small_*.cu).
ConvPoolKernel small_tile_conv_pool_kernel_5x5();
ConvPoolKernel small_tile_conv_pool_kernel_3x3();
ConvPoolKernel small_tile_conv_pool_kernel_any();

}  // namespace fusednn::cuda::conv_tile
