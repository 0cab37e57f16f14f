// SPDX-License-Identifier: Apache-2.0

#include "backends/cuda/platform/launch.hpp"

#include <cstdlib>
#include <cstring>

#include "common/error.hpp"

namespace fusednn::cuda {
namespace {
thread_local CaptureLog* g_capture_log = nullptr;
}  // namespace

CaptureLog* active_capture_log() noexcept { return g_capture_log; }

bool kernel_built_for(const void* kernel, int ptx_version) {
  cudaFuncAttributes attributes{};
  if (cudaFuncGetAttributes(&attributes, kernel) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return attributes.ptxVersion >= ptx_version;
}

ScopedCaptureLog::ScopedCaptureLog(CaptureLog* log) { g_capture_log = log; }
ScopedCaptureLog::~ScopedCaptureLog() { g_capture_log = nullptr; }

void record_captured_launch(cudaStream_t stream, const void* function, dim3 grid, dim3 block,
                            size_t shared_bytes, const void* parameters, size_t parameter_bytes) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  const cudaGraphNode_t* dependencies = nullptr;
  size_t dependency_count = 0;
#if CUDART_VERSION >= 13000
  FDNN_CUDA_CHECK(cudaStreamGetCaptureInfo(stream, &status, nullptr, nullptr, &dependencies,
                                           nullptr, &dependency_count));
#else
  FDNN_CUDA_CHECK(cudaStreamGetCaptureInfo_v2(stream, &status, nullptr, nullptr, &dependencies,
                                              &dependency_count));
#endif
  // A capture on one stream is a chain: the launch just made is the one node the next would
  // depend on.
  if (status != cudaStreamCaptureStatusActive || dependency_count != 1) {
    fail(FDNN_STATUS_INTERNAL_ERROR,
         "graph capture: expected one dependency after a kernel "
         "launch, found ",
         dependency_count, "; run with cuda_graphs = 0 and report this");
  }
  CapturedLaunch launch;
  launch.node = dependencies[0];
  launch.function = function;
  launch.grid = grid;
  launch.block = block;
  launch.shared_bytes = shared_bytes;
  launch.parameters.resize(parameter_bytes);
  std::memcpy(launch.parameters.data(), parameters, parameter_bytes);
  g_capture_log->launches.push_back(std::move(launch));
}

void throw_launch_error(cudaError_t error, const char* kernel_name, dim3 grid, dim3 block,
                        size_t shared_bytes) {
  fail(is_out_of_memory(error) ? FDNN_STATUS_OUT_OF_MEMORY : FDNN_STATUS_DEVICE_ERROR,
       "CUDA launch of ", kernel_name, " (grid ", grid.x, "x", grid.y, "x", grid.z, ", block ",
       block.x, ", ", shared_bytes, " bytes of shared memory) failed: ", cudaGetErrorString(error),
       " (", cudaGetErrorName(error), ")");
}

}  // namespace fusednn::cuda
