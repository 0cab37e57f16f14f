// SPDX-License-Identifier: Apache-2.0
// The machine's floor for one call: back-to-back launches of an empty kernel on one stream, with
// an 8-byte parameter and with a parameter as large as the fused MLP's (1144 bytes). Per call:
// the host's submit time and the stream's time per launch (CUDA events). Two more rows tell the
// device side apart from the host's: an event recorded after each launch (what a run on a
// caller's stream adds), and a kernel that spins for a fixed 2 us, whose time per call less 2 us
// is the gap the stream leaves between kernels. Last, the same empty kernel as a cluster of 4
// blocks (what the small-batch MLP's cluster form launches), through the runtime and through the
// driver's cuLaunchKernelEx (fetched with cudaGetDriverEntryPointByVersion, no -lcuda), to tell
// the runtime's share of a launch; and what a call's device scope costs. Prints JSON lines.
//   nvcc -O2 -arch=sm_90 launch_floor.cu -o launch_floor
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

struct Large {
  char bytes[1144];
};

__global__ void empty_small(float* p) {
  if (p == nullptr && threadIdx.x == 1000) *p = 0;
}
// Spins until `nanoseconds` have passed on the SM's global timer.
__global__ void spin(long long nanoseconds) {
  long long start = 0, now = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < nanoseconds);
}
__global__ void empty_large(const __grid_constant__ Large p) {
  if (p.bytes[0] == 1 && threadIdx.x == 1000) printf("x");
}
__global__ void __cluster_dims__(4, 1, 1) empty_cluster(const __grid_constant__ Large p) {
  if (p.bytes[0] == 1 && threadIdx.x == 1000) printf("x");
}

template <typename Launch>
void measure(const char* name, Launch launch, cudaStream_t stream) {
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  const int calls = 2000;
  for (int i = 0; i < calls; ++i) launch();
  cudaStreamSynchronize(stream);
  std::vector<double> device, submit;
  for (int r = 0; r < 15; ++r) {
    cudaEventRecord(start, stream);
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) launch();
    const auto t1 = std::chrono::steady_clock::now();
    cudaEventRecord(stop, stream);
    cudaEventSynchronize(stop);
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    device.push_back(1000.0 * ms / calls);
    submit.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / calls);
  }
  std::sort(device.begin(), device.end());
  std::sort(submit.begin(), submit.end());
  std::printf("{\"floor\": \"%s\", \"per_call_us\": %.3f, \"submit_us\": %.3f}\n", name,
              device[device.size() / 2], submit[submit.size() / 2]);
}

int main() {
  cudaStream_t stream;
  cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  Large large{};
  measure(
      "empty kernel, 8-byte parameter", [&] { empty_small<<<1, 256, 0, stream>>>(nullptr); },
      stream);
  measure(
      "empty kernel, 1144-byte parameter", [&] { empty_large<<<1, 256, 0, stream>>>(large); },
      stream);
  cudaEvent_t order;
  cudaEventCreateWithFlags(&order, cudaEventDisableTiming);
  measure(
      "empty kernel + cudaEventRecord",
      [&] {
        empty_small<<<1, 256, 0, stream>>>(nullptr);
        cudaEventRecord(order, stream);
      },
      stream);
  measure(
      "2 us spin kernel", [&] { spin<<<1, 32, 0, stream>>>(2000); }, stream);
  measure(
      "2 us spin kernel + cudaEventRecord",
      [&] {
        spin<<<1, 32, 0, stream>>>(2000);
        cudaEventRecord(order, stream);
      },
      stream);
  measure(
      "empty kernel, 1144-byte parameter, cluster of 4 blocks",
      [&] { empty_cluster<<<4, 256, 0, stream>>>(large); }, stream);
  // The same two launches through the driver, with their configuration built once.
  using LaunchEx = CUresult (*)(const CUlaunchConfig*, CUfunction, void**, void**);
  void* entry = nullptr;
  cudaDriverEntryPointQueryResult found{};
  cudaGetDriverEntryPointByVersion("cuLaunchKernelEx", &entry, 12000, cudaEnableDefault, &found);
  cudaFunction_t large_function = nullptr, cluster_function = nullptr;
  cudaGetFuncBySymbol(&large_function, reinterpret_cast<const void*>(empty_large));
  cudaGetFuncBySymbol(&cluster_function, reinterpret_cast<const void*>(empty_cluster));
  if (entry != nullptr && found == cudaDriverEntryPointSuccess) {
    const auto launch_ex = reinterpret_cast<LaunchEx>(entry);
    void* arguments[] = {&large};
    CUlaunchConfig config{};
    config.gridDimX = config.gridDimY = config.gridDimZ = 1;
    config.blockDimX = 256;
    config.blockDimY = config.blockDimZ = 1;
    config.hStream = reinterpret_cast<CUstream>(stream);
    measure(
        "driver cuLaunchKernelEx, empty kernel, 1144-byte parameter",
        [&] {
          launch_ex(&config, reinterpret_cast<CUfunction>(large_function), arguments, nullptr);
        },
        stream);
    config.gridDimX = 4;
    measure(
        "driver cuLaunchKernelEx, cluster of 4 blocks (compiled-in dims)",
        [&] {
          launch_ex(&config, reinterpret_cast<CUfunction>(cluster_function), arguments, nullptr);
        },
        stream);
  } else {
    std::printf("{\"floor_status\": \"no cuLaunchKernelEx entry point\"}\n");
  }
  measure(
      "cudaGetDevice",
      [&] {
        int device = -1;
        cudaGetDevice(&device);
      },
      stream);
  measure(
      "cudaGetDevice + cudaSetDevice (same device)",
      [&] {
        int device = -1;
        cudaGetDevice(&device);
        cudaSetDevice(device);
      },
      stream);
  cudaStreamCaptureStatus status;
  measure(
      "cudaStreamIsCapturing", [&] { cudaStreamIsCapturing(stream, &status); }, stream);
  const cudaError_t error = cudaGetLastError();
  std::printf("{\"floor_status\": \"%s\"}\n", cudaGetErrorString(error));
  return 0;
}
