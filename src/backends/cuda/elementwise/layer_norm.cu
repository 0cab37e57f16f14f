// SPDX-License-Identifier: Apache-2.0
// LayerNorm: one warp per row up to kWarpRowLimit elements (8 rows per block), one block of 256
// threads per row beyond. Three passes over the row, as the CPU backend: the mean, the biased
// variance of (x - mean) (two-pass, no cancellation), then the normalised output; the row is
// read from L1/L2 after the first pass. Memory-bound: 8 bytes per element at the least.
#include "backends/cuda/elementwise/layer_norm.hpp"

#include "backends/cuda/device/epilogue.cuh"
#include "backends/cuda/device/row_reduce.cuh"
#include "backends/cuda/platform/launch.hpp"

namespace fusednn::cuda {
namespace {

constexpr int kBlockThreads = 256;
constexpr int64_t kWarpRowLimit = 2048;

// __grid_constant__: the epilogue is indexed at run time (see elementwise.cu).
template <int kThreadsPerRow>
__global__ void __launch_bounds__(kBlockThreads)
    layer_norm_kernel(const __grid_constant__ LayerNormArgs args) {
  __shared__ float scratch[kBlockThreads / 32];
  constexpr int kRowsPerBlock = kBlockThreads / kThreadsPerRow;
  const int64_t row =
      static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kThreadsPerRow;
  if (kThreadsPerRow == 32 && row >= args.rows) return;  // whole warps leave; no block barrier
  const int lane = threadIdx.x % kThreadsPerRow;
  const int64_t n = args.row_size;
  const float* x = args.x + row * n;
  float* y = args.y + row * n;
  const float inverse_size = 1.0f / static_cast<float>(n);

  float sum = 0.0f;
  for (int64_t i = lane; i < n; i += kThreadsPerRow) sum += x[i];
  const float mean = row_reduce<kThreadsPerRow>(sum, SumOp{}, scratch) * inverse_size;

  float squares = 0.0f;
  for (int64_t i = lane; i < n; i += kThreadsPerRow) {
    const float deviation = x[i] - mean;
    squares += deviation * deviation;
  }
  const float variance = row_reduce<kThreadsPerRow>(squares, SumOp{}, scratch) * inverse_size;
  const float rstd = 1.0f / sqrtf(variance + args.eps);

  for (int64_t i = lane; i < n; i += kThreadsPerRow) {
    float value = __fmul_rn(x[i] - mean, rstd);
    if (args.gamma) value = __fmul_rn(value, args.gamma[i]);
    if (args.beta) value = __fadd_rn(value, args.beta[i]);
    y[i] = apply_epilogue(args.epilogue, value);
  }
}

}  // namespace

void launch_layer_norm(const LayerNormArgs& args, const DeviceInfo&, cudaStream_t stream) {
  if (args.rows <= 0 || args.row_size <= 0) return;
  if (args.row_size <= kWarpRowLimit) {
    constexpr int kRowsPerBlock = kBlockThreads / 32;
    const auto blocks = static_cast<unsigned>((args.rows + kRowsPerBlock - 1) / kRowsPerBlock);
    launch_kernel(layer_norm_kernel<32>, "layer_norm_kernel<warp per row>", blocks, kBlockThreads,
                  0, stream, args);
  } else {
    launch_kernel(layer_norm_kernel<kBlockThreads>, "layer_norm_kernel<block per row>",
                  static_cast<unsigned>(args.rows), kBlockThreads, 0, stream, args);
  }
}

}  // namespace fusednn::cuda
