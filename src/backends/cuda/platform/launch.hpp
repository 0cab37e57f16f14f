// SPDX-License-Identifier: Apache-2.0
// Every kernel of the CUDA backend is launched through launch_kernel(): one by-value parameter
// struct per kernel, a launch error turned into fusednn::StatusError naming the kernel, and, while
// a context captures a CUDA graph on this thread, a record of the launch (its graph node and the
// bytes of its parameters) so that the context can later point the graph's kernels at other
// caller buffers with cudaGraphExecKernelNodeSetParams instead of capturing again.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <vector>

#include "backends/cuda/platform/cuda_check.hpp"

namespace fusednn::cuda {

struct CapturedLaunch {
  cudaGraphNode_t node = nullptr;
  const void* function = nullptr;
  dim3 grid, block;
  size_t shared_bytes = 0;
  std::vector<unsigned char> parameters;  // the kernel's single argument, as launched
};

// The launches of one capture, in order.
struct CaptureLog {
  std::vector<CapturedLaunch> launches;
};

// The log of the capture this thread is running, or null when it is not capturing.
CaptureLog* active_capture_log() noexcept;

// Installs a log for the lifetime of the object (captures do not nest).
class ScopedCaptureLog {
 public:
  explicit ScopedCaptureLog(CaptureLog* log);
  ~ScopedCaptureLog();
  ScopedCaptureLog(const ScopedCaptureLog&) = delete;
  ScopedCaptureLog& operator=(const ScopedCaptureLog&) = delete;
};

// Appends the node the capture on `stream` just added to the active log.
void record_captured_launch(cudaStream_t stream, const void* function, dim3 grid, dim3 block,
                            size_t shared_bytes, const void* parameters, size_t parameter_bytes);

// Whether `kernel` was compiled from PTX of version `ptx_version` or newer (90 for sm_90), so that
// a body guarded by __CUDA_ARCH__ exists: a library built for older targets alone reaches a newer
// GPU as their PTX, where such a kernel is empty. False where CUDA cannot say.
bool kernel_built_for(const void* kernel, int ptx_version);

// Throws FDNN_STATUS_DEVICE_ERROR naming the kernel and its configuration.
[[noreturn]] void throw_launch_error(cudaError_t error, const char* kernel_name, dim3 grid,
                                     dim3 block, size_t shared_bytes);

namespace detail {
template <typename Params>
void launch(void (*kernel)(Params), const char* kernel_name, dim3 grid, dim3 block,
            size_t shared_bytes, cudaStream_t stream, const Params& params, bool dependent) {
  void* arguments[] = {const_cast<Params*>(&params)};
  const void* function = reinterpret_cast<const void*>(kernel);
  cudaError_t error;
  if (dependent) {
    cudaLaunchAttribute attribute{};
    attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attribute.val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t config{};
    config.gridDim = grid;
    config.blockDim = block;
    config.dynamicSmemBytes = shared_bytes;
    config.stream = stream;
    config.attrs = &attribute;
    config.numAttrs = 1;
    error = cudaLaunchKernelExC(&config, function, arguments);
  } else {
    error = cudaLaunchKernel(function, grid, block, arguments, shared_bytes, stream);
  }
  if (error != cudaSuccess) throw_launch_error(error, kernel_name, grid, block, shared_bytes);
  if (active_capture_log() != nullptr) {
    record_captured_launch(stream, function, grid, block, shared_bytes, &params, sizeof(Params));
  }
}
}  // namespace detail

template <typename Params>
void launch_kernel(void (*kernel)(Params), const char* kernel_name, dim3 grid, dim3 block,
                   size_t shared_bytes, cudaStream_t stream, const Params& params) {
  detail::launch(kernel, kernel_name, grid, block, shared_bytes, stream, params, false);
}

// Whether launch_dependent_kernel() makes programmatic dependent launches (compute capability
// 9.0 and newer). Not in a latency probe's build (kernel_timeline.cuh): its stamps need launches
// that do not overlap.
#if defined(FUSEDNN_KERNEL_TIMELINE)
inline constexpr bool kDependentLaunches = false;
#else
inline constexpr bool kDependentLaunches = true;
#endif

// launch_kernel() for a kernel that may start before the previous kernel on `stream` has
// finished: it calls wait_for_previous_grid() (dependent_launch.cuh) before it reads anything
// that kernel may write or writes anything it may read, and only weights and its own shared
// memory before that.
template <typename Params>
void launch_dependent_kernel(void (*kernel)(Params), const char* kernel_name, dim3 grid, dim3 block,
                             size_t shared_bytes, cudaStream_t stream, const Params& params) {
  detail::launch(kernel, kernel_name, grid, block, shared_bytes, stream, params,
                 kDependentLaunches);
}

// Blocks of `threads` for `work` items, capped at `max_blocks` (grid-stride loops do the rest).
inline unsigned grid_for(long long work, int threads, long long max_blocks) {
  long long blocks = (work + threads - 1) / threads;
  if (blocks > max_blocks) blocks = max_blocks;
  if (blocks < 1) blocks = 1;
  return static_cast<unsigned>(blocks);
}

}  // namespace fusednn::cuda
