// SPDX-License-Identifier: Apache-2.0
// Tiled SGEMM, the fallback for Linear steps cuBLASLt offers no algorithm for: each block
// computes a BM x BN tile of y, staging BM x BK of x and BK x BN of W^T in shared memory per step
// of k; each of its 256 threads accumulates TM x TN outputs in registers (rows and columns
// interleaved across threads so shared-memory reads are broadcasts or consecutive). W is read in
// PyTorch's [out][in] layout, consecutive threads walking k (coalesced), and stored transposed
// into a tile padded so that those stores do not share a bank. Exact fp32 FMAs;
// bias and the epilogue are applied before the one store. Two shapes: 128 x 128 tiles when the
// grid still covers the SMs, 32 x 32 tiles with a deeper k step otherwise.
#include "backends/cuda/linear/linear.hpp"

#include "backends/cuda/device/epilogue.cuh"
#include "backends/cuda/platform/launch.hpp"

namespace fusednn::cuda {
namespace {

constexpr int kThreads = 256;

template <int BM, int BN, int BK, int TM, int TN>
__global__ void __launch_bounds__(kThreads) linear_kernel(LinearArgs args) {
  constexpr int kThreadRows = BM / TM;
  constexpr int kThreadCols = BN / TN;
  static_assert(kThreadRows * kThreadCols == kThreads, "one output tile per thread");
  constexpr int kAStride = BK + 1;
  // A warp stores W^T as (32 / kSpan) columns n of kSpan consecutive k each: a row stride of
  // BN + 32 / kSpan puts those 32 stores in 32 banks.
  constexpr int kSpan = BK < 32 ? BK : 32;
  constexpr int kBStride = BN + 32 / kSpan;
  static_assert(BN % 32 == 0 && 32 % kSpan == 0, "conflict-free W^T stores need these");
  __shared__ float a_tile[BM * kAStride];  // [m][k]
  __shared__ float b_tile[BK * kBStride];  // [k][n]

  const int tx = threadIdx.x % kThreadCols;
  const int ty = threadIdx.x / kThreadCols;
  const int64_t m0 = static_cast<int64_t>(blockIdx.x) * BM;
  const int n0 = blockIdx.y * BN;
  const int K = args.in;
  const int N = args.out;

  float acc[TM][TN];
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;

  for (int k0 = 0; k0 < K; k0 += BK) {
    for (int index = threadIdx.x; index < BM * BK; index += kThreads) {
      const int m = index / BK;
      const int k = index - m * BK;
      const int64_t row = m0 + m;
      const int column = k0 + k;
      a_tile[m * kAStride + k] = (row < args.rows && column < K) ? args.x[row * K + column] : 0.0f;
    }
    for (int index = threadIdx.x; index < BK * BN; index += kThreads) {
      const int n = index / BK;
      const int k = index - n * BK;
      const int kk = k0 + k;
      const int nn = n0 + n;
      b_tile[k * kBStride + n] =
          (kk < K && nn < N) ? args.weight[static_cast<int64_t>(nn) * K + kk] : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < BK; ++k) {
      float a[TM], b[TN];
#pragma unroll
      for (int i = 0; i < TM; ++i) a[i] = a_tile[(ty + i * kThreadRows) * kAStride + k];
#pragma unroll
      for (int j = 0; j < TN; ++j) b[j] = b_tile[k * kBStride + tx + j * kThreadCols];
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
    __syncthreads();
  }

#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int64_t row = m0 + ty + i * kThreadRows;
    if (row >= args.rows) continue;
#pragma unroll
    for (int j = 0; j < TN; ++j) {
      const int column = n0 + tx + j * kThreadCols;
      if (column >= N) continue;
      const float value = acc[i][j] + (args.bias ? args.bias[column] : 0.0f);
      args.y[row * N + column] = apply_epilogue(args.epilogue, value);
    }
  }
}

template <int BM, int BN>
dim3 grid_of(const LinearArgs& args) {
  return dim3(static_cast<unsigned>((args.rows + BM - 1) / BM),
              static_cast<unsigned>((args.out + BN - 1) / BN));
}

}  // namespace

void launch_linear(const LinearArgs& args, const DeviceInfo& device, cudaStream_t stream) {
  if (args.rows <= 0 || args.out <= 0) return;
  const dim3 large = grid_of<128, 128>(args);
  if (static_cast<long long>(large.x) * large.y >= device.sm_count) {
    launch_kernel(linear_kernel<128, 128, 8, 8, 8>, "linear_kernel<128x128>", large, kThreads, 0,
                  stream, args);
  } else {
    launch_kernel(linear_kernel<32, 32, 32, 2, 2>, "linear_kernel<32x32>", grid_of<32, 32>(args),
                  kThreads, 0, stream, args);
  }
}

}  // namespace fusednn::cuda
