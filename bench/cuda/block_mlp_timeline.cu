// Where the single-block MLP kernel's time goes (fused_mlp_block.cu) for the seed MLP
// 100-128-64-10 at batch 1: the kernel compiled with FUSEDNN_BLOCK_MLP_TIMELINE, whose block 0
// thread 0 stamps %globaltimer at entry, after issuing the staging, after storing x, and before
// and after each layer. Back to back in one CUDA graph (device-paced) and from a host loop
// (host-paced, as fdnn_context_run_device is). Prints the median of each phase's time since
// entry, and the gap from one launch's end to the next one's entry.
//   nvcc -std=c++17 -O3 -arch=sm_90 -Isrc -Iinclude bench/cuda/block_mlp_timeline.cu \
//     src/backends/cuda/launch.cpp src/backends/cuda/cuda_check.cpp -o block_mlp_timeline
#define FUSEDNN_BLOCK_MLP_TIMELINE
#include "backends/cuda/fused_mlp_block.cu"

#include <cstdio>
#include <random>

namespace {

using fusednn::cuda::FusedMlpLayerDesc;
using fusednn::cuda::FusedMlpPlan;

constexpr int kLaunches = 200;
constexpr int kStamps = 4 + 2 * fusednn::cuda::kFusedMlpMaxLayers;

void report(const char* how, int layer_count) {
  unsigned long long host[fusednn::cuda::kTimelineSlots][kStamps];
  cudaMemcpyFromSymbol(host, fusednn::cuda::block_mlp_timeline, sizeof host);
  const int phases = 3 + 2 * layer_count;
  std::vector<std::vector<double>> since_entry(phases);
  std::vector<double> gaps;
  for (int i = 0; i < kLaunches; ++i) {
    for (int s = 1; s < phases; ++s) since_entry[s].push_back(double(host[i][s] - host[i][0]));
    if (i > 0) gaps.push_back(double(host[i][0]) - double(host[i - 1][phases - 1]));
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  std::printf("{\"paced_by\": \"%s\", \"ns_since_entry\": {", how);
  const char* names[] = {"entry", "staging issued", "x stored"};
  for (int s = 1; s < phases; ++s) {
    char name[64];
    if (s < 3) {
      std::snprintf(name, sizeof name, "%s", names[s]);
    } else {
      std::snprintf(name, sizeof name, "layer %d %s", (s - 3) / 2, (s - 3) % 2 ? "done" : "ready");
    }
    std::printf("%s\"%s\": %.0f", s > 1 ? ", " : "", name, median(since_entry[s]));
  }
  std::printf("}, \"gap_to_next_entry_ns\": %.0f, \"status\": \"%s\"}\n", median(gaps),
              cudaGetErrorString(cudaGetLastError()));
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
  const std::vector<float> image = build_fused_mlp_block_image(layers, weight_pointers, bias_pointers);
  float *device_image, *x, *y;
  cudaMalloc(&device_image, image.size() * sizeof(float));
  cudaMemcpy(device_image, image.data(), image.size() * sizeof(float), cudaMemcpyHostToDevice);
  cudaMalloc(&x, 100 * sizeof(float));
  cudaMemset(x, 0, 100 * sizeof(float));
  cudaMalloc(&y, 10 * sizeof(float));
  FusedMlpPlan plan;
  plan.layers = layers;
  plan.block_image = device_image;
  plan.block_shared_bytes = fused_mlp_block_shared_bytes(plan);
  DeviceInfo device;
  int value = 0;
  cudaDeviceGetAttribute(&value, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0);
  device.shared_per_block_optin = size_t(value);
  prepare_fused_mlp_block_kernels(1, device);
  cudaStream_t stream;
  cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);

  cudaGraph_t graph;
  cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal);
  for (int i = 0; i < kLaunches; ++i) launch_fused_mlp_block(plan, x, y, 1, stream);
  cudaStreamEndCapture(stream, &graph);
  cudaGraphExec_t exec;
  cudaGraphInstantiate(&exec, graph, 0);
  for (int repeat = 0; repeat < 3; ++repeat) {
    unsigned int zero = 0;
    cudaMemcpyToSymbol(block_mlp_launches, &zero, sizeof zero);
    cudaGraphLaunch(exec, stream);
    cudaStreamSynchronize(stream);
    report("graph", 3);
  }
  for (int repeat = 0; repeat < 3; ++repeat) {
    unsigned int zero = 0;
    cudaMemcpyToSymbol(block_mlp_launches, &zero, sizeof zero);
    for (int i = 0; i < kLaunches; ++i) launch_fused_mlp_block(plan, x, y, 1, stream);
    cudaStreamSynchronize(stream);
    report("host loop", 3);
  }
  return 0;
}

int main() {
  try {
    return run();
  } catch (const std::exception& error) {
    std::fprintf(stderr, "failed: %s\n", error.what());
    return 1;
  }
}
