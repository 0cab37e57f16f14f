// SPDX-License-Identifier: Apache-2.0
// ChannelAffine: one pass, memory-bound (8 bytes per element); each element finds its channel
// from its index. The product and the sum are rounded separately, as the CPU backend does.
#include "backends/cuda/conv/channel_affine.hpp"

#include "backends/cuda/device/epilogue.cuh"
#include "backends/cuda/platform/launch.hpp"

namespace fusednn::cuda {
namespace {

constexpr int kThreads = 256;

// __grid_constant__: the epilogue is indexed at run time (see elementwise.cu).
__global__ void __launch_bounds__(kThreads)
    channel_affine_kernel(const __grid_constant__ ChannelAffineArgs args) {
  const int64_t count = args.batch * args.channels * args.spatial;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride) {
    const int64_t channel = (i / args.spatial) % args.channels;
    const float scaled = __fmul_rn(args.x[i], args.scale[channel]);
    args.y[i] = apply_epilogue(args.epilogue, __fadd_rn(scaled, args.shift[channel]));
  }
}

}  // namespace

void launch_channel_affine(const ChannelAffineArgs& args, const DeviceInfo& device,
                           cudaStream_t stream) {
  const int64_t count = args.batch * args.channels * args.spatial;
  if (count <= 0) return;
  const unsigned blocks = grid_for(count, kThreads, static_cast<long long>(device.sm_count) * 8);
  launch_kernel(channel_affine_kernel, "channel_affine_kernel", blocks, kThreads, 0, stream, args);
}

}  // namespace fusednn::cuda
