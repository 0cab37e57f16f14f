// SPDX-License-Identifier: Apache-2.0
// Pooling: one thread per output element, reducing its window top to bottom, left to right (the
// CPU backend's and PyTorch's order, so sums round identically). Memory-bound; windows overlap
// little, and neighbouring threads read neighbouring columns.
#include "backends/cuda/conv/pool2d.hpp"

#include <cmath>

#include "backends/cuda/platform/launch.hpp"

namespace fusednn::cuda {
namespace {

constexpr int kThreads = 256;

template <bool kAverage>
__global__ void __launch_bounds__(kThreads) pool2d_kernel(Pool2dArgs args) {
  const int64_t per_plane = static_cast<int64_t>(args.out_height) * args.out_width;
  const int64_t count = args.planes * per_plane;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride) {
    const int64_t plane = i / per_plane;
    const int within = static_cast<int>(i - plane * per_plane);
    const int oh = within / args.out_width;
    const int ow = within - oh * args.out_width;
    const int row_start = oh * args.stride_height - args.padding_height;
    const int col_start = ow * args.stride_width - args.padding_width;
    const int row_begin = max(row_start, 0);
    const int row_end = min(row_start + args.kernel_height, args.in_height);
    const int col_begin = max(col_start, 0);
    const int col_end = min(col_start + args.kernel_width, args.in_width);
    const float* x = args.x + plane * args.in_height * args.in_width;
    float acc = kAverage ? 0.0f : -INFINITY;
    for (int ih = row_begin; ih < row_end; ++ih) {
      const float* row = x + static_cast<int64_t>(ih) * args.in_width;
      for (int iw = col_begin; iw < col_end; ++iw) {
        const float value = row[iw];
        if (kAverage) {
          acc += value;
        } else if ((value > acc) | (value != value)) {
          acc = value;
        }
      }
    }
    if (kAverage) {
      int divisor = 0;
      if (row_begin < row_end && col_begin < col_end) {
        if (args.count_include_pad) {
          const int padded_row_end =
              min(row_start + args.kernel_height, args.in_height + args.padding_height);
          const int padded_col_end =
              min(col_start + args.kernel_width, args.in_width + args.padding_width);
          divisor = (padded_row_end - row_start) * (padded_col_end - col_start);
        } else {
          divisor = (row_end - row_begin) * (col_end - col_begin);
        }
      }
      acc = divisor == 0 ? 0.0f : acc / static_cast<float>(divisor);
    }
    args.y[i] = acc;
  }
}

template <bool kAverage>
void launch_pool(const Pool2dArgs& args, const DeviceInfo& device, cudaStream_t stream,
                 const char* name) {
  const int64_t count = args.planes * args.out_height * args.out_width;
  if (count <= 0) return;
  const unsigned blocks = grid_for(count, kThreads, static_cast<long long>(device.sm_count) * 16);
  launch_kernel(pool2d_kernel<kAverage>, name, blocks, kThreads, 0, stream, args);
}

}  // namespace

void launch_max_pool2d(const Pool2dArgs& args, const DeviceInfo& device, cudaStream_t stream) {
  launch_pool<false>(args, device, stream, "max_pool2d_kernel");
}

void launch_avg_pool2d(const Pool2dArgs& args, const DeviceInfo& device, cudaStream_t stream) {
  launch_pool<true>(args, device, stream, "avg_pool2d_kernel");
}

}  // namespace fusednn::cuda
