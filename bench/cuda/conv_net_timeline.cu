// SPDX-License-Identifier: Apache-2.0
// Where the whole-network kernel's time goes for LeNet-5 (1x28x28, conv 6@5x5 pad 2 + tanh + avg
// pool, conv 16@5x5 + tanh + avg pool, 400-120-84-10 with tanh) at batch 1: conv_net.cu compiled
// with FUSEDNN_KERNEL_TIMELINE, so that block 0's thread 0 stamps %globaltimer at each phase
// (kernel_timeline.cuh). Back to back in one CUDA graph (device-paced) and from a host loop
// (host-paced). Prints each phase's median time since entry and the largest difference from a
// plain CPU LeNet-5 (a probe's sanity check; the tests hold the real comparison). Links the
// library's own objects for the conv + pool plans (build-gpu first):
//   O=build-gpu/src/backends/cuda/CMakeFiles
//   nvcc -std=c++17 -O3 -arch=sm_90 -Isrc -Iinclude bench/cuda/conv_net_timeline.cu \
//     $O/fusednn_cuda_kernels.dir/conv/conv_pool*.cu.o \
//     $O/fusednn_cuda.dir/platform/{launch,cuda_check}.cpp.o \
//     -o conv_net_timeline
#define FUSEDNN_KERNEL_TIMELINE
#include "backends/cuda/conv/conv_net.cu"

#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "timeline_report.hpp"

namespace {

using namespace fusednn::cuda;

constexpr int kLaunches = 200;

struct HostConv {
  int in_channels, size, out_channels, padding;  // square planes, 5x5 kernels, stride 1
  std::vector<float> weight, bias;
};

// conv (5x5, stride 1) + tanh + 2x2 average pooling, as PyTorch computes it.
std::vector<float> cpu_conv_tanh_pool(const HostConv& c, const std::vector<float>& x) {
  const int conv = c.size + 2 * c.padding - 4, pooled = conv / 2;
  std::vector<float> y(size_t(c.out_channels) * pooled * pooled, 0.0f);
  for (int o = 0; o < c.out_channels; ++o) {
    for (int i = 0; i < pooled * 2; ++i) {
      for (int j = 0; j < pooled * 2; ++j) {
        double sum = c.bias[o];
        for (int ci = 0; ci < c.in_channels; ++ci) {
          for (int kh = 0; kh < 5; ++kh) {
            for (int kw = 0; kw < 5; ++kw) {
              const int r = i + kh - c.padding, q = j + kw - c.padding;
              if (r < 0 || r >= c.size || q < 0 || q >= c.size) continue;
              sum += double(x[(size_t(ci) * c.size + r) * c.size + q]) *
                     c.weight[((size_t(o) * c.in_channels + ci) * 5 + kh) * 5 + kw];
            }
          }
        }
        y[(size_t(o) * pooled + i / 2) * pooled + j / 2] += float(std::tanh(sum)) * 0.25f;
      }
    }
  }
  return y;
}

const char* const kLayerNames[] = {"conv1", "conv2", "fc1", "fc2", "fc3"};
const char* const kLeadPhases[] = {"entry",           "params copied",     "zeros issued",
                                   "mbarriers ready", "set-up issued",     "previous grid done",
                                   "x issued",        "own copies landed", "block's landed"};
const char* const kLayerPhases[] = {"input arrived", "block synced", "partials done",
                                    "first output", "sent"};
constexpr int kLead = 9, kPerLayer = 5;

void report(const char* how, int layer_count) {
  print_timeline(std::string("\"paced_by\": \"") + how + "\"", kLaunches,
                 kLead + kPerLayer * layer_count, [](int s) {
                   return s < kLead ? std::string(kLeadPhases[s])
                                    : std::string(kLayerNames[(s - kLead) / kPerLayer]) + " " +
                                          kLayerPhases[(s - kLead) % kPerLayer];
                 });
}

template <typename T>
T* upload(const std::vector<T>& host) {
  T* device = nullptr;
  cudaMalloc(&device, host.size() * sizeof(T));
  cudaMemcpy(device, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice);
  return device;
}

int run() {
  std::mt19937 random(5);
  std::normal_distribution<float> normal(0.0f, 0.2f);
  auto fill = [&](std::vector<float>& v, size_t n) {
    v.resize(n);
    for (float& e : v) e = normal(random);
  };
  const DeviceInfo device = probe_device_info();

  HostConv convs[2] = {{1, 28, 6, 2, {}, {}}, {6, 14, 16, 0, {}, {}}};
  std::vector<ConvPoolPlan> plans(2);
  std::vector<ConvNetStageDesc> stages(2);
  for (int s = 0; s < 2; ++s) {
    HostConv& c = convs[s];
    fill(c.weight, size_t(c.out_channels) * c.in_channels * 25);
    fill(c.bias, size_t(c.out_channels));
    ConvPoolDesc d;
    d.in_channels = c.in_channels;
    d.in_height = d.in_width = c.size;
    d.out_channels = c.out_channels;
    d.conv_height = d.conv_width = c.size + 2 * c.padding - 4;
    d.kernel_height = d.kernel_width = 5;
    d.padding_height = d.padding_width = c.padding;
    d.pool = ConvPoolKind::Average;
    d.pool_window = 2;
    d.pooled_height = d.pooled_width = d.conv_height / 2;
    d.epilogue.count = 1;
    d.epilogue.kind[0] = kOpTanh;
    if (!plan_conv_pool(d, device, &plans[s])) {
      std::fprintf(stderr, "conv %d does not fit\n", s);
      return 1;
    }
    stages[s].plan = &plans[s];
    stages[s].weights = upload(build_conv_pool_weights(plans[s], c.weight));
    stages[s].bias = upload(c.bias);
  }
  const int widths[] = {400, 120, 84, 10};
  std::vector<FusedMlpLayerDesc> head(3);
  std::vector<std::vector<float>> head_weights(3), head_biases(3);
  for (int l = 0; l < 3; ++l) {
    FusedMlpLayerDesc& layer = head[l];
    layer.in = widths[l];
    layer.out = widths[l + 1];
    layer.padded_out = (layer.out + 3) / 4 * 4;
    if (l < 2) {
      layer.epilogue.count = 1;
      layer.epilogue.kind[0] = kOpTanh;
    }
    fill(head_weights[l], size_t(layer.out) * layer.in);  // [out][in]
    fill(head_biases[l], size_t(layer.out));
    std::vector<float> transposed(size_t(layer.in) * layer.padded_out, 0.0f);
    for (int o = 0; o < layer.out; ++o) {
      for (int i = 0; i < layer.in; ++i) {
        transposed[size_t(i) * layer.padded_out + o] = head_weights[l][size_t(o) * layer.in + i];
      }
    }
    layer.weight_t = upload(transposed);
    layer.bias = upload(head_biases[l]);
  }
  ConvNetPlan plan;
  if (!plan_conv_net(stages, head, 1, 1, device, &plan)) {
    std::fprintf(stderr, "the network does not fit one launch\n");
    return 1;
  }
  std::vector<float> x;
  fill(x, 28 * 28);
  const float* device_x = upload(x);
  float* y = nullptr;
  cudaMalloc(&y, 10 * sizeof(float));

  // The CPU reference, and the kernel's first output against it.
  std::vector<float> reference = cpu_conv_tanh_pool(convs[1], cpu_conv_tanh_pool(convs[0], x));
  for (int l = 0; l < 3; ++l) {
    std::vector<float> next(static_cast<size_t>(widths[l + 1]));
    for (int o = 0; o < widths[l + 1]; ++o) {
      double sum = head_biases[l][o];
      for (int i = 0; i < widths[l]; ++i) {
        sum += double(reference[i]) * head_weights[l][size_t(o) * widths[l] + i];
      }
      next[o] = l < 2 ? float(std::tanh(sum)) : float(sum);
    }
    reference = next;
  }
  cudaStream_t stream;
  cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  launch_conv_net(plan, device_x, y, 1, stream);
  std::vector<float> result(10);
  cudaMemcpyAsync(result.data(), y, 10 * sizeof(float), cudaMemcpyDeviceToHost, stream);
  cudaStreamSynchronize(stream);
  double worst = 0.0;
  for (int o = 0; o < 10; ++o) {
    worst = std::max(worst, std::fabs(double(result[o]) - reference[o]) /
                                std::max(1e-3, std::fabs(double(reference[o]))));
  }
  std::printf("{\"max_relative_error\": %.3g}\n", worst);

  run_timelines(
      stream, kLaunches, [&](cudaStream_t on) { launch_conv_net(plan, device_x, y, 1, on); },
      [](const char* how) { report(how, 5); });
  return 0;
}

}  // namespace

int main() { return run_probe(run); }
