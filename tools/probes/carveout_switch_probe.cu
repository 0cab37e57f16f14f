// SPDX-License-Identifier: Apache-2.0
// Does a kernel that asks for a large shared-memory carve-out slow the kernels around it down?
// The tensor-core MLP forms take most of an SM's shared memory; the row and elementwise kernels
// around them take none, and an SM switches its L1/shared split between such kernels. This
// times, in CUDA graphs replayed back to back, four launches of trivial one-block kernels:
// all without shared memory, all with `shared` bytes of it, the two alternating, and the two
// alternating with the small kernel told to prefer the largest carve-out as well. It prints the
// microseconds per graph of each (the median of several windows).
//
//   nvcc -std=c++17 -O2 -arch=sm_90 tools/probes/carveout_switch_probe.cu -o probe
//   ./probe [shared_kib (default 200)] [blocks (default 1)]
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

__global__ void without_shared(float* out) {
  if (threadIdx.x == 0) out[blockIdx.x] += 1.0f;
}

__global__ void with_shared(float* out) {
  extern __shared__ float buffer[];
  buffer[threadIdx.x] = static_cast<float>(threadIdx.x);
  __syncthreads();
  if (threadIdx.x == 0) out[blockIdx.x] += buffer[blockDim.x - 1];
}

bool ok(cudaError_t status, const char* what) {
  if (status == cudaSuccess) return true;
  std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(status));
  return false;
}

// Captures `pattern` (true: the shared-memory kernel) as one graph and returns its median
// microseconds per replay, or a negative value on an error.
double time_pattern(const std::vector<bool>& pattern, int blocks, size_t shared, float* out,
                    cudaStream_t stream) {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  if (!ok(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), "capture")) return -1;
  for (bool big : pattern) {
    if (big) {
      with_shared<<<blocks, 128, shared, stream>>>(out);
    } else {
      without_shared<<<blocks, 128, 0, stream>>>(out);
    }
  }
  if (!ok(cudaStreamEndCapture(stream, &graph), "end capture") ||
      !ok(cudaGraphInstantiate(&exec, graph, 0), "instantiate")) {
    return -1;
  }
  cudaEvent_t start = nullptr, stop = nullptr;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  constexpr int kWarmup = 50, kReplays = 200, kWindows = 9;
  for (int i = 0; i < kWarmup; ++i) cudaGraphLaunch(exec, stream);
  std::vector<double> windows;
  for (int w = 0; w < kWindows; ++w) {
    cudaEventRecord(start, stream);
    for (int i = 0; i < kReplays; ++i) cudaGraphLaunch(exec, stream);
    cudaEventRecord(stop, stream);
    if (!ok(cudaEventSynchronize(stop), "replay")) return -1;
    float ms = 0.0f;
    cudaEventElapsedTime(&ms, start, stop);
    windows.push_back(1000.0 * ms / kReplays);
  }
  std::sort(windows.begin(), windows.end());
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  return windows[windows.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const size_t shared = size_t(argc > 1 ? std::atoi(argv[1]) : 200) * 1024;
  const int blocks = argc > 2 ? std::atoi(argv[2]) : 1;
  float* out = nullptr;
  cudaStream_t stream = nullptr;
  if (!ok(cudaMalloc(&out, sizeof(float) * blocks), "cudaMalloc") ||
      !ok(cudaMemset(out, 0, sizeof(float) * blocks), "cudaMemset") ||
      !ok(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream") ||
      !ok(cudaFuncSetAttribute(with_shared, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               static_cast<int>(shared)),
          "shared-memory attribute")) {
    return 1;
  }
  const std::vector<bool> small(4, false), big(4, true), alternating = {true, false, true, false};
  std::printf("shared %zu KiB, %d block(s), 4 launches a graph, us per graph:\n", shared / 1024,
              blocks);
  std::printf("  none with shared memory          %8.2f\n",
              time_pattern(small, blocks, shared, out, stream));
  std::printf("  all with shared memory           %8.2f\n",
              time_pattern(big, blocks, shared, out, stream));
  std::printf("  alternating                      %8.2f\n",
              time_pattern(alternating, blocks, shared, out, stream));
  if (!ok(cudaFuncSetAttribute(without_shared, cudaFuncAttributePreferredSharedMemoryCarveout,
                               cudaSharedmemCarveoutMaxShared),
          "carve-out attribute")) {
    return 1;
  }
  std::printf("  alternating, both max carve-out  %8.2f\n",
              time_pattern(alternating, blocks, shared, out, stream));
  return ok(cudaDeviceSynchronize(), "synchronize") ? 0 : 1;
}
