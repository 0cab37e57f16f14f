// SPDX-License-Identifier: Apache-2.0
// Softmax: one warp per row up to kWarpRowLimit elements (8 rows per block), one block per row
// beyond. Three passes as the CPU backend: the maximum, the sum of exp(x - max), then
// exp(x - max) / sum, recomputing the exponential rather than storing it (the same expf of the
// same argument, so the same value). Memory-bound: 8 bytes per element at the least.
#include "backends/cuda/elementwise/softmax.hpp"

#include <cmath>

#include "backends/cuda/device/row_reduce.cuh"
#include "backends/cuda/platform/launch.hpp"

namespace fusednn::cuda {
namespace {

constexpr int kBlockThreads = 256;
constexpr int64_t kWarpRowLimit = 2048;

template <int kThreadsPerRow>
__global__ void __launch_bounds__(kBlockThreads) softmax_kernel(SoftmaxArgs args) {
  __shared__ float scratch[kBlockThreads / 32];
  constexpr int kRowsPerBlock = kBlockThreads / kThreadsPerRow;
  const int64_t row =
      static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kThreadsPerRow;
  if (kThreadsPerRow == 32 && row >= args.rows) return;  // whole warps leave; no block barrier
  const int lane = threadIdx.x % kThreadsPerRow;
  const int64_t n = args.row_size;
  const float* x = args.x + row * n;
  float* y = args.y + row * n;

  float max = -INFINITY;
  for (int64_t i = lane; i < n; i += kThreadsPerRow) max = x[i] > max ? x[i] : max;
  max = row_reduce<kThreadsPerRow>(max, MaxOp{}, scratch);

  float sum = 0.0f;
  for (int64_t i = lane; i < n; i += kThreadsPerRow) sum += expf(x[i] - max);
  sum = row_reduce<kThreadsPerRow>(sum, SumOp{}, scratch);

  for (int64_t i = lane; i < n; i += kThreadsPerRow) y[i] = expf(x[i] - max) / sum;
}

}  // namespace

void launch_softmax(const SoftmaxArgs& args, const DeviceInfo&, cudaStream_t stream) {
  if (args.rows <= 0 || args.row_size <= 0) return;
  if (args.row_size <= kWarpRowLimit) {
    constexpr int kRowsPerBlock = kBlockThreads / 32;
    const auto blocks = static_cast<unsigned>((args.rows + kRowsPerBlock - 1) / kRowsPerBlock);
    launch_kernel(softmax_kernel<32>, "softmax_kernel<warp per row>", blocks, kBlockThreads, 0,
                  stream, args);
  } else {
    launch_kernel(softmax_kernel<kBlockThreads>, "softmax_kernel<block per row>",
                  static_cast<unsigned>(args.rows), kBlockThreads, 0, stream, args);
  }
}

}  // namespace fusednn::cuda
