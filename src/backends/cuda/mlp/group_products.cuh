// SPDX-License-Identifier: Apache-2.0
// The small-batch MLP forms' inner step (fused_mlp_block.cu, fused_mlp_cluster.cu): one warp's
// dot products of a group of kGroup outputs with kRows activation rows, k split over the lanes
// (16 bytes of a weight row and of an activation row each, conflict-free), summed across the
// warp by one butterfly.
#pragma once

#include "backends/cuda/mlp/warp_sum_many.cuh"

namespace fusednn::cuda {

// rows: the group's first W row ([out][in4] order, in4 a multiple of 4); activations: kRows rows
// of width4 floats. Returns warp_sum_many's total: value r * kGroup + j (row r, output j) at
// lane (r * kGroup + j) * (32 / (kRows * kGroup)) and the lanes after it.
template <int kRows, int kGroup>
__device__ __forceinline__ float group_products(const float* rows, int in4,
                                                const float* activations, int width4, int lane) {
  constexpr int kValues = kRows * kGroup;
  float sums[kValues];
#pragma unroll
  for (int i = 0; i < kValues; ++i) sums[i] = 0.0f;
  for (int q = lane; q < in4 / 4; q += 32) {
    float4 w[kGroup];
#pragma unroll
    for (int j = 0; j < kGroup; ++j) {
      w[j] = *reinterpret_cast<const float4*>(rows + j * in4 + 4 * q);
    }
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const float4 a = *reinterpret_cast<const float4*>(activations + r * width4 + 4 * q);
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
  return warp_sum_many(sums, lane);
}

}  // namespace fusednn::cuda
