// SPDX-License-Identifier: Apache-2.0
// Elementwise and Add: memory-bound streams, so a device-to-device copy of the same bytes is the
// bound to meet. 16-byte loads and stores when every pointer is 16-byte aligned, a scalar loop
// otherwise; one float4 per thread, with a grid that covers the whole range, and one dispatch
// per epilogue op per float4. That form runs at nearly the copy kernel's rate, where a grid of a
// few blocks per SM striding over the range with a dispatch per value stays well below it, and
// more loads in flight per thread do not help (bench/cuda/elementwise_sweep.cu compares them).
// The parameters are __grid_constant__: the epilogue's op list and Add's inputs are indexed at
// run time, which otherwise copies the parameter struct to a stack frame in every thread; at one
// float4 per thread that copy would halve the bandwidth.
#include "backends/cuda/elementwise/elementwise.hpp"

#include <cstdint>

#include "backends/cuda/device/epilogue.cuh"
#include "backends/cuda/platform/launch.hpp"

namespace fusednn::cuda {
namespace {

constexpr int kThreads = 256;
// Enough blocks for one float4 (or value) per thread up to 2^38 floats; past that the kernels'
// loops stride.
constexpr long long kMaxBlocks = (1LL << 31) - 1;

bool aligned16(const void* pointer) { return (reinterpret_cast<uintptr_t>(pointer) & 15u) == 0; }

template <bool kVector>
__global__ void __launch_bounds__(kThreads)
    elementwise_kernel(const __grid_constant__ ElementwiseArgs args) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  int64_t tail_begin = 0;
  if (kVector) {
    const int64_t quads = args.count / 4;
    const float4* x4 = reinterpret_cast<const float4*>(args.x);
    float4* y4 = reinterpret_cast<float4*>(args.y);
    for (int64_t i = first; i < quads; i += stride) y4[i] = apply_epilogue4(args.epilogue, x4[i]);
    tail_begin = quads * 4;
  }
  for (int64_t i = tail_begin + first; i < args.count; i += stride) {
    args.y[i] = apply_epilogue(args.epilogue, args.x[i]);
  }
}

template <bool kVector>
__global__ void __launch_bounds__(kThreads) add_kernel(const __grid_constant__ AddArgs args) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  int64_t tail_begin = 0;
  if (kVector) {
    const int64_t quads = args.count / 4;
    for (int64_t i = first; i < quads; i += stride) {
      float4 sum = reinterpret_cast<const float4*>(args.x[0])[i];
      for (int k = 1; k < args.input_count; ++k) {
        const float4 v = reinterpret_cast<const float4*>(args.x[k])[i];
        sum.x += v.x;
        sum.y += v.y;
        sum.z += v.z;
        sum.w += v.w;
      }
      reinterpret_cast<float4*>(args.y)[i] = apply_epilogue4(args.epilogue, sum);
    }
    tail_begin = quads * 4;
  }
  for (int64_t i = tail_begin + first; i < args.count; i += stride) {
    float sum = args.x[0][i];
    for (int k = 1; k < args.input_count; ++k) sum += args.x[k][i];
    args.y[i] = apply_epilogue(args.epilogue, sum);
  }
}

}  // namespace

void launch_elementwise(const ElementwiseArgs& args, const DeviceInfo& /*device*/,
                        cudaStream_t stream) {
  if (args.count <= 0) return;
  const bool vector = aligned16(args.x) && aligned16(args.y);
  const unsigned blocks =
      grid_for(vector ? (args.count + 3) / 4 : args.count, kThreads, kMaxBlocks);
  if (vector) {
    launch_kernel(elementwise_kernel<true>, "elementwise_kernel<vector>", blocks, kThreads, 0,
                  stream, args);
  } else {
    launch_kernel(elementwise_kernel<false>, "elementwise_kernel<scalar>", blocks, kThreads, 0,
                  stream, args);
  }
}

void launch_add(const AddArgs& args, const DeviceInfo& /*device*/, cudaStream_t stream) {
  if (args.count <= 0) return;
  bool vector = aligned16(args.y);
  for (int k = 0; k < args.input_count; ++k) vector = vector && aligned16(args.x[k]);
  const unsigned blocks =
      grid_for(vector ? (args.count + 3) / 4 : args.count, kThreads, kMaxBlocks);
  if (vector) {
    launch_kernel(add_kernel<true>, "add_kernel<vector>", blocks, kThreads, 0, stream, args);
  } else {
    launch_kernel(add_kernel<false>, "add_kernel<scalar>", blocks, kThreads, 0, stream, args);
  }
}

}  // namespace fusednn::cuda
