// SPDX-License-Identifier: Apache-2.0
// Reductions across the threads that share one row: a warp (kThreadsPerRow == 32, several rows
// per block) or a whole block (long rows). Every thread gets the same result, combined in a
// fixed order, so a row's statistics do not depend on timing.
#pragma once

namespace fusednn::cuda {

struct SumOp {
  __device__ float operator()(float a, float b) const { return a + b; }
};
struct MaxOp {
  __device__ float operator()(float a, float b) const { return b > a ? b : a; }
};

// scratch: kThreadsPerRow / 32 floats of shared memory (unused for a warp).
template <int kThreadsPerRow, typename Op>
__device__ __forceinline__ float row_reduce(float value, Op op, float* scratch) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) {
    value = op(value, __shfl_xor_sync(0xffffffffu, value, offset));
  }
  if constexpr (kThreadsPerRow == 32) {
    return value;
  } else {
    constexpr int kWarps = kThreadsPerRow / 32;
    const int warp = threadIdx.x / 32;
    if ((threadIdx.x & 31) == 0) scratch[warp] = value;
    __syncthreads();
    float total = scratch[0];
#pragma unroll
    for (int w = 1; w < kWarps; ++w) total = op(total, scratch[w]);
    __syncthreads();  // scratch is reused by the next reduction
    return total;
  }
}

}  // namespace fusednn::cuda
