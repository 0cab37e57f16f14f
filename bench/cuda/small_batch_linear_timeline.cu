// SPDX-License-Identifier: Apache-2.0
// Where the small-batch Linear's time goes (small_batch_linear.cu, the cluster form it takes from
// 16 rows) for Linear 768 -> 3072 + GELU(tanh), issue #3's case: the kernel file compiled with
// FUSEDNN_KERNEL_TIMELINE, so that one block's thread 0 stamps %globaltimer at each phase
// (kernel_timeline.cuh; block 0, or -DFDNN_SMALL_BATCH_TIMELINE_BLOCK=N). Back to back in one
// CUDA graph (device-paced) and from a host loop (host-paced). Prints each phase's median time
// since entry, and the largest relative difference of a few outputs from a CPU product (a
// probe's sanity check; the tests hold the real comparison).
//   small_batch_linear_timeline [ROWS=32]   (16 to 32: the rows the cluster form takes)
//   nvcc -std=c++17 -O3 -arch=sm_90 -Xptxas=-suppress-async-bulk-multicast-advisory-warning \
//     -Isrc -Iinclude bench/cuda/small_batch_linear_timeline.cu \
//     src/backends/cuda/platform/launch.cpp src/backends/cuda/platform/cuda_check.cpp \
//     -o small_batch_linear_timeline
#define FUSEDNN_KERNEL_TIMELINE
#include "backends/cuda/linear/small_batch_linear.cu"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "timeline_report.hpp"

namespace {

constexpr int kLaunches = 200;
constexpr int kIn = 768;
constexpr int kOut = 3072;
constexpr int kMaxRowCount = 32;

const char* const kPhaseNames[] = {"entry", "mbarriers ready", "copies issued"};

std::string phase_name(int phase) {
  using namespace fusednn::cuda;
  if (phase < 3) return kPhaseNames[phase];
  if (phase < 3 + kStampedChunks) return "chunk " + std::to_string(phase - 3) + " landed";
  if (phase == 3 + kStampedChunks) return "products done";
  if (phase == 4 + kStampedChunks) return "outputs stored";
  return "exit";
}

double gelu_tanh(double v) {
  return 0.5 * v * (1.0 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
}

}  // namespace

int run(int rows) {
  using namespace fusednn::cuda;
  std::mt19937 random(5);
  std::normal_distribution<float> normal(0.0f, 0.05f);
  std::vector<float> x(size_t(kMaxRowCount) * kIn), w(size_t(kOut) * kIn), bias(kOut);
  for (float& v : x) v = normal(random) * 20.0f;
  for (float& v : w) v = normal(random);
  for (float& v : bias) v = normal(random);
  float *dx, *dw, *db, *dy;
  cudaMalloc(&dx, x.size() * sizeof(float));
  cudaMalloc(&dw, w.size() * sizeof(float));
  cudaMalloc(&db, bias.size() * sizeof(float));
  cudaMalloc(&dy, size_t(kMaxRowCount) * kOut * sizeof(float));
  cudaMemcpy(dx, x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemcpy(dw, w.data(), w.size() * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemcpy(db, bias.data(), bias.size() * sizeof(float), cudaMemcpyHostToDevice);

  const DeviceInfo device = probe_device_info();
  SmallBatchLinearPlan plan;
  if (!plan_small_batch_linear(kIn, kOut, device, SmallBatchLinearMode::Auto, &plan) ||
      !plan.cluster) {
    std::printf("{\"error\": \"the cluster form is not planned here\"}\n");
    return 1;
  }
  prepare_small_batch_linear_kernel(plan);
  LinearArgs args;
  args.x = dx;
  args.weight = dw;
  args.bias = db;
  args.y = dy;
  args.rows = rows;
  args.in = kIn;
  args.out = kOut;
  args.epilogue.count = 1;
  args.epilogue.kind[0] = kOpGeluTanh;
  cudaStream_t stream;
  cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);

  launch_small_batch_linear(plan, args, stream);
  std::vector<float> y(size_t(rows) * kOut);
  cudaMemcpy(y.data(), dy, y.size() * sizeof(float), cudaMemcpyDeviceToHost);
  double worst = 0.0;
  for (int row = 0; row < rows; row += 7) {
    for (int n = 0; n < kOut; n += 97) {
      double sum = bias[n];
      for (int k = 0; k < kIn; ++k) {
        sum += double(x[size_t(row) * kIn + k]) * w[size_t(n) * kIn + k];
      }
      const double expected = gelu_tanh(sum);
      worst = std::max(worst, std::abs(y[size_t(row) * kOut + n] - expected) /
                                  std::max(1e-3, std::abs(expected)));
    }
  }
  std::printf("{\"kernel\": \"%s\", \"rows\": %d, \"max_relative_error\": %.2e}\n",
              kVariants[plan.variant].cluster_name, rows, worst);

  run_timelines(
      stream, kLaunches, [&](cudaStream_t on) { launch_small_batch_linear(plan, args, on); },
      [](const char* how) {
        print_timeline(std::string("\"paced_by\": \"") + how + "\"", kLaunches,
                       fusednn::cuda::kLastStamp + 1, phase_name);
      });
  return 0;
}

int main(int argc, char** argv) {
  const int rows = argc > 1 ? std::max(int(fusednn::cuda::kClusterMinRows),
                                       std::min(kMaxRowCount, std::atoi(argv[1])))
                            : kMaxRowCount;
  return run_probe([&] { return run(rows); });
}
