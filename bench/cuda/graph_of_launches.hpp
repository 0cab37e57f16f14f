// SPDX-License-Identifier: Apache-2.0
// The probes' device-paced loop: `count` calls of launch(stream) captured back to back in one CUDA
// graph and instantiated, so that a replay times the kernels without the host's launch cost.
#pragma once

#include <cuda_runtime_api.h>

template <class Launch>
cudaGraphExec_t capture_launches(cudaStream_t stream, int count, Launch launch) {
  cudaGraph_t graph;
  cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal);
  for (int i = 0; i < count; ++i) launch(stream);
  cudaStreamEndCapture(stream, &graph);
  cudaGraphExec_t exec;
  cudaGraphInstantiate(&exec, graph, 0);
  return exec;
}
