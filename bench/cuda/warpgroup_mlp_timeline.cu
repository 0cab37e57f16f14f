// SPDX-License-Identifier: Apache-2.0
// Where the Warpgroup form's time goes at large batches
// (fused_mlp_warpgroup.cu): every warpgroup's issuing thread stamps
// %globaltimer when it issues a tile's input copy, when the input has landed,
// when the warpgroup has read it, when each layer is done and when the tile is
// done (kernel_timeline.cuh's FDNN_TILE_STAMP); each block stamps its entry and
// the moment its weights are in shared memory. Prints, per chain, the time per
// launch (events, this instrumented build), the start-up (entry to weights to
// the first input landed), the steady state (per tile: input wait, read, each
// layer, copy latency) and the end (the spread of the warpgroups' last tiles),
// from the last of several back-to-back launches.
//   nvcc -std=c++17 -O3 -gencode arch=compute_90a,code=sm_90a
//   -DFUSEDNN_WGMMA_BUILT -Isrc \
//     -Iinclude bench/cuda/warpgroup_mlp_timeline.cu
//     src/backends/cuda/mlp/fused_mlp_warpgroup_image.cpp \
//     src/backends/cuda/platform/launch.cpp src/backends/cuda/platform/cuda_check.cpp \
//     -o warpgroup_mlp_timeline
// -DPROBE_NO_STAMPS builds the same program with the kernel's stamps compiled
// out (the time per launch without their cost; the timeline then reads zeros).
#define FUSEDNN_KERNEL_TIMELINE
#include "backends/cuda/device/kernel_timeline.cuh"
#ifdef PROBE_NO_STAMPS
#undef FDNN_TILE_STAMP
#undef FDNN_BLOCK_STAMP
#define FDNN_TILE_STAMP(worker, tile, phase) (void)(tile)
#define FDNN_BLOCK_STAMP(phase) (void)0
#endif
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backends/cuda/mlp/fused_mlp_warpgroup.cu"

namespace {

using fusednn::cuda::block_timeline;
using fusednn::cuda::DeviceInfo;
using fusednn::cuda::FusedMlpLayerDesc;
using fusednn::cuda::kBlockTimelinePhases;
using fusednn::cuda::kTileTimelineBlocks;
using fusednn::cuda::kTileTimelinePhases;
using fusednn::cuda::kTileTimelineTiles;
using fusednn::cuda::kTileTimelineWorkers;
using fusednn::cuda::TensorCoreMath;
using fusednn::cuda::tile_timeline;
using fusednn::cuda::WarpgroupMlpPlan;

using Stamps = unsigned long long[kTileTimelineBlocks][kTileTimelineWorkers][kTileTimelineTiles]
                                 [kTileTimelinePhases];
using BlockStamps = unsigned long long[kTileTimelineBlocks][kBlockTimelinePhases];

double percentile(std::vector<double> values, double fraction) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  return values[std::min(values.size() - 1, size_t(fraction * double(values.size())))];
}

void print_spread(const char *name, const std::vector<double> &values) {
  std::printf("  \"%s\": [%.0f, %.0f, %.0f, %.0f]", name, percentile(values, 0.0),
              percentile(values, 0.1), percentile(values, 0.5), percentile(values, 0.999));
}

void probe(const char *name, const std::vector<int> &widths, TensorCoreMath math, int64_t rows) {
  DeviceInfo device;
  cudaDeviceProp properties{};
  cudaGetDeviceProperties(&properties, 0);
  device.major = properties.major, device.minor = properties.minor;
  device.sm_count = properties.multiProcessorCount;
  device.shared_per_block_optin = properties.sharedMemPerBlockOptin;
  device.shared_per_sm = properties.sharedMemPerMultiprocessor;

  std::mt19937 random(7);
  std::normal_distribution<float> normal(0.0f, 0.3f);
  const size_t count = widths.size() - 1;
  std::vector<std::vector<float>> weights(count), biases(count);
  std::vector<FusedMlpLayerDesc> layers(count);
  std::vector<const float *> weight_pointers, bias_pointers;
  for (size_t l = 0; l < count; ++l) {
    weights[l].resize(size_t(widths[l]) * widths[l + 1]);
    biases[l].resize(size_t(widths[l + 1]));
    for (float &v : weights[l]) v = normal(random);
    for (float &v : biases[l]) v = normal(random);
    layers[l].in = widths[l], layers[l].out = widths[l + 1];
    layers[l].padded_out = (widths[l + 1] + 3) / 4 * 4;
    if (l + 1 < count) layers[l].epilogue.count = 1;  // ReLU (kind 0)
    weight_pointers.push_back(weights[l].data());
    bias_pointers.push_back(biases[l].data());
  }
  WarpgroupMlpPlan plan;
  if (!fusednn::cuda::plan_warpgroup_mlp(layers, math, device, {}, &plan)) {
    std::printf("{\"chain\": \"%s\", \"error\": \"not planned\"}\n", name);
    return;
  }
  const std::vector<uint32_t> image =
      fusednn::cuda::build_warpgroup_mlp_image(plan, weight_pointers, bias_pointers);
  void *image_device = nullptr;
  float *x = nullptr, *y = nullptr;
  cudaMalloc(&image_device, image.size() * 4);
  cudaMemcpy(image_device, image.data(), image.size() * 4, cudaMemcpyHostToDevice);
  // Several input buffers in turn, so that a launch finds none of its input in
  // L2.
  constexpr int kSets = 4;
  const size_t in_floats = size_t(rows) * widths.front(), out_floats = size_t(rows) * widths.back();
  cudaMalloc(&x, kSets * in_floats * 4);
  cudaMalloc(&y, kSets * out_floats * 4);
  std::vector<float> host(in_floats);
  for (float &v : host) v = normal(random);
  for (int s = 0; s < kSets; ++s) {
    cudaMemcpy(x + s * in_floats, host.data(), in_floats * 4, cudaMemcpyHostToDevice);
  }
  cudaStream_t stream;
  cudaStreamCreate(&stream);
  cudaEvent_t start, stop;
  cudaEventCreate(&start), cudaEventCreate(&stop);
  constexpr int kLaunches = 40;
  for (int i = 0; i < 8; ++i) {
    launch_warpgroup_mlp(plan, image_device, x + (i % kSets) * in_floats,
                         y + (i % kSets) * out_floats, rows, device, stream);
  }
  cudaEventRecord(start, stream);
  for (int i = 0; i < kLaunches; ++i) {
    launch_warpgroup_mlp(plan, image_device, x + (i % kSets) * in_floats,
                         y + (i % kSets) * out_floats, rows, device, stream);
  }
  cudaEventRecord(stop, stream);
  cudaEventSynchronize(stop);
  float ms = 0.0f;
  cudaEventElapsedTime(&ms, start, stop);

  // One more launch alone, after a clean slate of stamps, for the timeline.
  static Stamps stamps;
  static BlockStamps block_stamps;
  std::memset(stamps, 0, sizeof stamps);
  cudaMemcpyToSymbol(tile_timeline, stamps, sizeof stamps);
  cudaStreamSynchronize(stream);
  launch_warpgroup_mlp(plan, image_device, x, y, rows, device, stream);
  cudaStreamSynchronize(stream);
  cudaMemcpyFromSymbol(stamps, tile_timeline, sizeof stamps);
  cudaMemcpyFromSymbol(block_stamps, block_timeline, sizeof block_stamps);
  const int blocks = std::min<int>(device.sm_count, kTileTimelineBlocks);
  unsigned long long origin = ~0ull;
  for (int b = 0; b < blocks; ++b) origin = std::min(origin, block_stamps[b][0]);
  std::vector<double> entry, weights_ready, first_landed, wait, compute, latency, last_done,
      read_time;
  const int layer_count = static_cast<int>(count);
  std::vector<std::vector<double>> layer_time(count);
  for (int b = 0; b < blocks; ++b) {
    entry.push_back(double(block_stamps[b][0] - origin));
    weights_ready.push_back(double(block_stamps[b][1] - origin));
    for (int w = 0; w < plan.warpgroups; ++w) {
      const auto &tiles = stamps[b][w];
      double last = 0.0;
      for (int k = 0; k < kTileTimelineTiles && tiles[k][3] != 0; ++k) {
        if (k == 0) first_landed.push_back(double(tiles[0][1] - origin));
        if (k > 0) wait.push_back(double(tiles[k][1]) - double(tiles[k - 1][3]));
        compute.push_back(double(tiles[k][3] - tiles[k][1]));
        read_time.push_back(double(tiles[k][2] - tiles[k][1]));
        for (int l = 0; l < layer_count && 4 + l < kTileTimelinePhases; ++l) {
          const unsigned long long before = l == 0 ? tiles[k][2] : tiles[k][3 + l];
          layer_time[l].push_back(double(tiles[k][4 + l]) - double(before));
        }
        if (tiles[k][0] != 0) latency.push_back(double(tiles[k][1]) - double(tiles[k][0]));
        last = double(tiles[k][3] - origin);
      }
      last_done.push_back(last);
    }
  }
  std::printf(
      "{\"chain\": \"%s\", \"rows\": %lld, \"warpgroups\": %d, \"stages\": %d, "
      "\"us_per_launch\": %.2f, \"status\": \"%s\",\n  \"ns, [min, p10, "
      "median, "
      "p99.9]\": 0,\n",
      name, static_cast<long long>(rows), plan.warpgroups, plan.stages, 1000.0 * ms / kLaunches,
      cudaGetErrorString(cudaGetLastError()));
  print_spread("block entry", entry), std::printf(",\n");
  print_spread("weights ready", weights_ready), std::printf(",\n");
  print_spread("first input landed", first_landed), std::printf(",\n");
  print_spread("input wait per tile", wait), std::printf(",\n");
  print_spread("input read per tile", read_time), std::printf(",\n");
  print_spread("landed to done per tile", compute), std::printf(",\n");
  print_spread("copy issue to landed", latency), std::printf(",\n");
  for (int l = 0; l < layer_count; ++l) {
    print_spread(("layer " + std::to_string(l)).c_str(), layer_time[l]), std::printf(",\n");
  }
  print_spread("warpgroup's last tile done", last_done), std::printf("}\n");
  cudaFree(image_device), cudaFree(x), cudaFree(y);
  cudaStreamDestroy(stream);
}

}  // namespace

// An argument picks the chains whose name contains it ("64-wide" alone under ncu, say).
int main(int argc, char **argv) {
  const std::string only = argc > 1 ? argv[1] : "";
  const auto wanted = [&](const char *name) {
    return std::string(name).find(only) != std::string::npos;
  };
  if (wanted("seed 100-128-64-10 bf16")) {
    probe("seed 100-128-64-10 bf16", {100, 128, 64, 10}, TensorCoreMath::Bf16, 262144);
  }
  if (wanted("64-wide 32-64x4-16 fp16")) {
    probe("64-wide 32-64x4-16 fp16", {32, 64, 64, 64, 64, 16}, TensorCoreMath::Fp16, 1 << 21);
  }
  return 0;
}
