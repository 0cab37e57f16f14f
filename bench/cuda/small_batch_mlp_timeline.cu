// SPDX-License-Identifier: Apache-2.0
// Where a small-batch MLP kernel's time goes for the seed MLP 100-128-64-10 at batch 1: the
// single-block form (fused_mlp_block.cu) or, built with -DCLUSTER_FORM, the cluster form
// (fused_mlp_cluster.cu, sm_90), compiled with FUSEDNN_KERNEL_TIMELINE so that one block's
// thread 0 stamps %globaltimer at each phase (kernel_timeline.cuh; each kernel file lists its
// phases). Back to back in one CUDA graph (device-paced) and from a host loop (host-paced, as
// fdnn_context_run_device is). Prints the median of each phase's time since entry, and the gap
// from one launch's end to the next one's entry.
//   nvcc -std=c++17 -O3 -arch=sm_90 [-DCLUSTER_FORM] -Isrc -Iinclude \
//     bench/cuda/small_batch_mlp_timeline.cu src/backends/cuda/mlp/fused_mlp_row_image.cpp \
//     src/backends/cuda/platform/launch.cpp src/backends/cuda/platform/cuda_check.cpp \
//     -o small_batch_mlp_timeline
#define FUSEDNN_KERNEL_TIMELINE
#ifdef CLUSTER_FORM
#include "backends/cuda/mlp/fused_mlp_cluster.cu"
#else
#include "backends/cuda/mlp/fused_mlp_block.cu"
#endif

#include <cstdio>
#include <random>
#include <string>

#include "timeline_report.hpp"

namespace {

using fusednn::cuda::FusedMlpLayerDesc;
using fusednn::cuda::FusedMlpPlan;

constexpr int kLaunches = 200;

// Each form's phases: a few before the layers, then a few per layer (the kernel files' stamps).
#ifdef CLUSTER_FORM
const char* const kFormName = "cluster";
const char* const kLeadPhases[] = {"entry", "slices issued", "cluster barrier arrived"};
const char* const kLayerPhases[] = {"slice landed", "input complete", "outputs sent"};
#else
const char* const kFormName = "single block";
const char* const kLeadPhases[] = {"entry", "staging issued", "x stored"};
const char* const kLayerPhases[] = {"ready", "done"};
#endif
constexpr int kLead = sizeof(kLeadPhases) / sizeof(kLeadPhases[0]);
constexpr int kPerLayer = sizeof(kLayerPhases) / sizeof(kLayerPhases[0]);

void report(const char* how, int layer_count) {
  const std::string fields =
      std::string("\"form\": \"") + kFormName + "\", \"paced_by\": \"" + how + "\"";
  print_timeline(fields, kLaunches, kLead + kPerLayer * layer_count, [](int s) {
    return s < kLead ? std::string(kLeadPhases[s])
                     : "layer " + std::to_string((s - kLead) / kPerLayer) + " " +
                           kLayerPhases[(s - kLead) % kPerLayer];
  });
}

void launch(const FusedMlpPlan& plan, const float* x, float* y, cudaStream_t stream) {
#ifdef CLUSTER_FORM
  fusednn::cuda::launch_fused_mlp_cluster(plan, x, y, 1, stream);
#else
  fusednn::cuda::launch_fused_mlp_block(plan, x, y, 1, stream);
#endif
}

}  // namespace

int run() {
  using namespace fusednn::cuda;
  const int widths[] = {100, 128, 64, 10};
  std::mt19937 random(3);
  std::normal_distribution<float> normal(0.0f, 0.1f);
  std::vector<FusedMlpLayerDesc> layers(3);
  std::vector<std::vector<float>> weights(3), biases(3);
  std::vector<const float*> weight_pointers, bias_pointers;
  for (int l = 0; l < 3; ++l) {
    layers[l].in = widths[l];
    layers[l].out = widths[l + 1];
    layers[l].padded_out = (widths[l + 1] + 3) / 4 * 4;
    if (l < 2) {
      layers[l].epilogue.count = 1;
      layers[l].epilogue.kind[0] = kOpReLU;
    }
    weights[l].resize(size_t(widths[l]) * widths[l + 1]);
    biases[l].resize(size_t(widths[l + 1]));
    for (float& v : weights[l]) v = normal(random);
    for (float& v : biases[l]) v = normal(random);
    weight_pointers.push_back(weights[l].data());
    bias_pointers.push_back(biases[l].data());
  }
#ifdef CLUSTER_FORM
  const std::vector<float> image =
      build_fused_mlp_cluster_image(layers, weight_pointers, bias_pointers);
#else
  const std::vector<float> image =
      build_fused_mlp_row_image(layers, weight_pointers, bias_pointers);
#endif
  float *device_image, *x, *y;
  cudaMalloc(&device_image, image.size() * sizeof(float));
  cudaMemcpy(device_image, image.data(), image.size() * sizeof(float), cudaMemcpyHostToDevice);
  cudaMalloc(&x, 100 * sizeof(float));
  cudaMemset(x, 0, 100 * sizeof(float));
  cudaMalloc(&y, 10 * sizeof(float));
  FusedMlpPlan plan;
  plan.layers = layers;
#ifdef CLUSTER_FORM
  plan.cluster_image = device_image;
#else
  plan.block_image = device_image;
#endif
  const DeviceInfo device = probe_device_info();
#ifdef CLUSTER_FORM
  plan.cluster_shared_bytes = fused_mlp_cluster_shared_bytes(plan, 1);
  plan.cluster_max_rows = 1;
  prepare_fused_mlp_cluster_kernels(1, device);
#else
  plan.block_shared_bytes = fused_mlp_block_shared_bytes(plan);
  prepare_fused_mlp_block_kernels(1, device);
#endif
  cudaStream_t stream;
  cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);

  run_timelines(
      stream, kLaunches, [&](cudaStream_t on) { launch(plan, x, y, on); },
      [](const char* how) { report(how, 3); });
  return 0;
}

int main() { return run_probe(run); }
