// SPDX-License-Identifier: Apache-2.0
// A lone Linear layer at a few rows (up to kSmallBatchLinearMaxRows), spread over the whole GPU:
// y[rows][out] = epilogue(x[rows][in] * W^T + bias), W as PyTorch stores it ([out][in]), fp32
// accuracy through 3xTF32 on tensor cores. Planned on compute capability 9.0 and newer (thread-
// block clusters, bulk copies). Older GPUs keep cuBLASLt.
//
// Why: at a few rows a Linear is a matrix-vector product bound by reading W once, and cuBLASLt
// takes several times that long. Each block owns a few output columns (8, 16 or 24, chosen at
// load so that the grid covers the SMs) over the whole reduction, so W is read once and no
// partial sums leave the block.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "backends/cuda/linear/linear.hpp"
#include "backends/cuda/platform/device_info.hpp"

namespace fusednn::cuda {

// The rows one launch takes (one row tile of the kernel).
constexpr int64_t kSmallBatchLinearMaxRows = 32;

// SmallBatchLinearMode (selection_overrides.hpp, override small_batch_linear): Auto where the
// plan's estimate says it beats cuBLASLt; Off; Always (every shape it can take, for measuring);
// Unicast as Auto without the cluster form (every block loads all of x itself).

struct SmallBatchLinearPlan {
  int variant = -1;  // which kernel (columns per block); -1 when not planned
  size_t shared_bytes = 0;
  unsigned grid = 0;  // blocks: one per column tile
  // The cluster form (x loaded once per pair of blocks) for runs of 16 rows and more, where the
  // input allows it; its grid is `grid` rounded up to even.
  bool cluster = false;
  bool planned() const { return variant >= 0; }
};

// The kernel variant with the lowest estimated time for this shape on this device (load time),
// or false where none applies: a GPU before sm_90, an input width that is not a multiple of 4
// (rows are copied 16 bytes at a time), a shared-memory need past the device's limit, or a
// layer so large for the SM count that cuBLASLt is faster (such as 3072 -> 768 and
// 1024 -> 4096; mode Always plans those too).
bool plan_small_batch_linear(int32_t in, int32_t out, const DeviceInfo& device,
                             SmallBatchLinearMode mode, SmallBatchLinearPlan* plan);

// Whether a run of `rows` rows reading x takes the kernel: a planned shape, 1 to
// kSmallBatchLinearMaxRows rows, x on a 16-byte boundary.
bool small_batch_linear_takes(const SmallBatchLinearPlan& plan, int64_t rows, const float* x);

// Raises the kernel's shared-memory limit (at load). Throws FDNN_STATUS_DEVICE_ERROR.
void prepare_small_batch_linear_kernel(const SmallBatchLinearPlan& plan);

// Queues the kernel; args.in and args.out must be the shape the plan was made for.
void launch_small_batch_linear(const SmallBatchLinearPlan& plan, const LinearArgs& args,
                               cudaStream_t stream);

}  // namespace fusednn::cuda
