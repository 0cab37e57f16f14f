// SPDX-License-Identifier: Apache-2.0
// The timeline probes' report (small_batch_mlp_timeline.cu, conv_net_timeline.cu): each phase's
// median time since entry over the recorded launches, the median gap from one launch's last stamp
// to the next one's entry, and the SM clock the kernel ran at (clock64 against %globaltimer).
// Include it after the kernel file, which (built with FUSEDNN_KERNEL_TIMELINE) defines the
// timeline's device arrays.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "graph_of_launches.hpp"

// Prints one JSON object: `fields` (already JSON, e.g. "\"paced_by\": \"graph\""), then the
// phases 1 to phases - 1 named by name_of(phase).
template <class NameOf>
void print_timeline(const std::string& fields, int launches, int phases, NameOf name_of) {
  using fusednn::cuda::kTimelinePhases;
  using fusednn::cuda::kTimelineSlots;
  static unsigned long long ns[kTimelineSlots][kTimelinePhases];
  static long long clocks[kTimelineSlots][kTimelinePhases];
  cudaMemcpyFromSymbol(ns, fusednn::cuda::kernel_timeline, sizeof ns);
  cudaMemcpyFromSymbol(clocks, fusednn::cuda::kernel_timeline_clocks, sizeof clocks);
  std::vector<std::vector<double>> since_entry(phases);
  std::vector<double> gaps, megahertz;
  const int last = phases - 1;
  for (int i = 0; i < launches; ++i) {
    for (int s = 1; s < phases; ++s) since_entry[s].push_back(double(ns[i][s] - ns[i][0]));
    if (i > 0) gaps.push_back(double(ns[i][0]) - double(ns[i - 1][last]));
    megahertz.push_back(1e3 * double(clocks[i][last] - clocks[i][0]) /
                        double(ns[i][last] - ns[i][0]));
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  std::printf("{%s, \"ns_since_entry\": {", fields.c_str());
  for (int s = 1; s < phases; ++s) {
    std::printf("%s\"%s\": %.0f", s > 1 ? ", " : "", std::string(name_of(s)).c_str(),
                median(since_entry[s]));
  }
  std::printf("}, \"gap_to_next_entry_ns\": %.0f, \"sm_clock_mhz\": %.0f, \"status\": \"%s\"}\n",
              median(gaps), median(megahertz), cudaGetErrorString(cudaGetLastError()));
}

// Runs launch(stream) `launches` times back to back in one CUDA graph (device-paced), three
// times, then from a host loop (host-paced, as the library's device path is), twice, with the
// host loop's time per call; report(how) prints each run's timeline.
template <class Launch, class Report>
void run_timelines(cudaStream_t stream, int launches, Launch launch, Report report) {
  const cudaGraphExec_t exec = capture_launches(stream, launches, launch);
  const unsigned int zero = 0;
  for (int repeat = 0; repeat < 3; ++repeat) {
    cudaMemcpyToSymbol(fusednn::cuda::kernel_timeline_launches, &zero, sizeof zero);
    cudaGraphLaunch(exec, stream);
    cudaStreamSynchronize(stream);
    report("graph");
  }
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  for (int repeat = 0; repeat < 2; ++repeat) {
    cudaMemcpyToSymbol(fusednn::cuda::kernel_timeline_launches, &zero, sizeof zero);
    cudaEventRecord(start, stream);
    for (int i = 0; i < launches; ++i) launch(stream);
    cudaEventRecord(stop, stream);
    cudaStreamSynchronize(stream);
    float ms = 0.0f;
    cudaEventElapsedTime(&ms, start, stop);
    std::printf("{\"host_loop_us_per_call\": %.2f}\n", 1e3 * ms / launches);
    report("host loop");
  }
}

// The device's facts the planners read (device 0).
inline fusednn::cuda::DeviceInfo probe_device_info() {
  fusednn::cuda::DeviceInfo device;
  int value = 0;
  cudaDeviceGetAttribute(&value, cudaDevAttrComputeCapabilityMajor, 0);
  device.major = value;
  cudaDeviceGetAttribute(&value, cudaDevAttrMultiProcessorCount, 0);
  device.sm_count = value;
  cudaDeviceGetAttribute(&value, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0);
  device.shared_per_block_optin = static_cast<size_t>(value);
  cudaDeviceGetAttribute(&value, cudaDevAttrMaxSharedMemoryPerMultiprocessor, 0);
  device.shared_per_sm = static_cast<size_t>(value);
  return device;
}

// A probe's main: run(), with a library failure (a thrown fusednn error) printed, not fatal.
template <class Run>
int run_probe(Run run) {
  try {
    return run();
  } catch (const std::exception& error) {
    std::fprintf(stderr, "failed: %s\n", error.what());
    return 1;
  }
}
