// Conv2d, direct: one thread per output element sums its window over the group's input
// channels. Neighbouring threads compute neighbouring columns of one output plane, so input
// reads coalesce and the filter (the same for the whole warp) is a broadcast through L1.
// LeNet-5's second convolution at batch 1024 is 1024 x 16 x 10 x 10 x 150 = 246 M multiply-adds,
// ~7 us at the fp32 rate; this simple form is good for the small models fusednn targets, not for
// wide ResNets (an implicit GEMM would be the next step there).
#include "backends/cuda/conv2d.hpp"

#include "backends/cuda/epilogue.cuh"
#include "backends/cuda/launch.hpp"

namespace fusednn::cuda {
namespace {

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads) conv2d_kernel(Conv2dArgs args) {
  const int64_t per_plane = static_cast<int64_t>(args.out_height) * args.out_width;
  const int64_t per_sample = per_plane * args.out_channels;
  const int64_t count = per_sample * args.batch;
  const int group_in = args.in_channels / args.groups;
  const int group_out = args.out_channels / args.groups;
  const int64_t in_plane = static_cast<int64_t>(args.in_height) * args.in_width;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride) {
    const int64_t n = i / per_sample;
    const int64_t within_sample = i - n * per_sample;
    const int oc = static_cast<int>(within_sample / per_plane);
    const int within_plane = static_cast<int>(within_sample - oc * per_plane);
    const int oh = within_plane / args.out_width;
    const int ow = within_plane - oh * args.out_width;
    const int first_in = (oc / group_out) * group_in;
    const int row0 = oh * args.stride_height - args.padding_height;
    const int col0 = ow * args.stride_width - args.padding_width;
    const float* w = args.weight + static_cast<int64_t>(oc) * group_in * args.kernel_height *
                                       args.kernel_width;
    const float* x = args.x + (n * args.in_channels + first_in) * in_plane;
    float acc = 0.0f;
    for (int c = 0; c < group_in; ++c) {
      for (int kh = 0; kh < args.kernel_height; ++kh) {
        const int ih = row0 + kh * args.dilation_height;
        const bool row_inside = ih >= 0 && ih < args.in_height;
        for (int kw = 0; kw < args.kernel_width; ++kw) {
          const int iw = col0 + kw * args.dilation_width;
          const float weight = w[kw];
          if (row_inside && iw >= 0 && iw < args.in_width) {
            acc = fmaf(x[static_cast<int64_t>(ih) * args.in_width + iw], weight, acc);
          }
        }
        w += args.kernel_width;
      }
      x += in_plane;
    }
    if (args.bias) acc += args.bias[oc];
    args.y[i] = apply_epilogue(args.epilogue, acc);
  }
}

}  // namespace

void launch_conv2d(const Conv2dArgs& args, const DeviceInfo& device, cudaStream_t stream) {
  const int64_t count =
      args.batch * args.out_channels * static_cast<int64_t>(args.out_height) * args.out_width;
  if (count <= 0) return;
  const unsigned blocks = grid_for(count, kThreads, static_cast<long long>(device.sm_count) * 16);
  launch_kernel(conv2d_kernel, "conv2d_kernel", blocks, kThreads, 0, stream, args);
}

}  // namespace fusednn::cuda
