// SPDX-License-Identifier: Apache-2.0
// Strided copy: pure data movement (8 bytes per element); a grid-stride loop over the input's
// elements, consecutive threads on consecutive columns.
#include "backends/cuda/elementwise/concat.hpp"

#include "backends/cuda/platform/launch.hpp"

namespace fusednn::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads) strided_copy_kernel(StridedCopyArgs args) {
  const int64_t count = args.outer * args.x_row;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride) {
    const int64_t o = i / args.x_row;
    const int64_t j = i - o * args.x_row;
    args.y[o * args.y_row + args.y_offset + j] = args.x[i];
  }
}

}  // namespace

void launch_strided_copy(const StridedCopyArgs& args, const DeviceInfo& device,
                         cudaStream_t stream) {
  const int64_t count = args.outer * args.x_row;
  if (count <= 0) return;
  const unsigned blocks = grid_for(count, kThreads, static_cast<long long>(device.sm_count) * 8);
  launch_kernel(strided_copy_kernel, "strided_copy_kernel", blocks, kThreads, 0, stream, args);
}

}  // namespace fusednn::cuda
