// SPDX-License-Identifier: Apache-2.0
// Device memory running out for real (allocation_failure_internal_test.cpp injects failures
// instead): a context whose workspace does not fit on the GPU is refused with
// FDNN_STATUS_OUT_OF_MEMORY and a message when it is created, and what it had taken is released;
// under the default max_workspace_bytes, contexts are created until the device is full, the next
// one fails the same way, and the contexts that exist still run bit for bit as before. After
// everything is destroyed the device's free memory is back at its start (within kFreeSlack).
//
// The workspace sizes are read from fdnn_model_memory_info, not assumed. compute-sanitizer's
// tools shadow every allocation, so tools/gpu_checks.sh leaves this file's tests out of their
// runs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "cuda_test_support.hpp"
#include "fusednn/fusednn.h"

namespace {

using namespace fusednn_cuda_test;

#if FUSEDNN_TEST_WITH_CUDART

// How far free memory may stay below its start once everything is destroyed: the driver's own
// pools (graph uploads, cuBLASLt's handle) come and go in 2 MiB pages; the workspaces here are
// gigabytes.
constexpr size_t kFreeSlack = size_t{64} << 20;

struct DeviceMemory {
  size_t free = 0;
  size_t total = 0;
};

DeviceMemory device_memory() {
  DeviceMemory memory;
  EXPECT_EQ(cudaMemGetInfo(&memory.free, &memory.total), cudaSuccess);
  return memory;
}

// Linear 64 -> 4096, GELU, LayerNorm over 4096, Linear 4096 -> 8: the 4096-wide activations
// live in the workspace, so a context's memory grows with max_batch while its inputs and
// outputs (in pinned staging) stay small.
Net wide_middle() {
  Net net({64});
  net.linear("up", 64, 4096).act(R"({"type": "GELU"})");
  net.layer_norm("norm", 4096);
  net.linear("down", 4096, 8);
  return net;
}

fdnn_model* create_with(const Net& net, const std::vector<std::vector<float>>& weights,
                        int64_t max_batch, uint64_t max_workspace_bytes) {
  fdnn_model_options options;
  fdnn_model_options_init(&options, sizeof options);
  options.max_batch = max_batch;
  options.device = FDNN_DEVICE_CUDA;
  options.max_workspace_bytes = max_workspace_bytes;
  fdnn_model* model = nullptr;
  const std::string spec = net.spec();
  EXPECT_EQ(fdnn_model_create_from_spec(spec.data(), spec.size(), &options, &model), FDNN_STATUS_OK)
      << fdnn_last_error_message();
  if (model != nullptr) set_weights(model, net, weights);
  return model;
}

size_t context_bytes(fdnn_model* model) {
  fdnn_memory_info info{};
  info.struct_size = sizeof info;
  EXPECT_EQ(fdnn_model_memory_info(model, &info), FDNN_STATUS_OK) << fdnn_last_error_message();
  return info.context_bytes;
}

// The workspace bytes one sample adds to a context (from two max_batch values, so the fixed
// part cancels).
double bytes_per_sample(const Net& net, const std::vector<std::vector<float>>& weights) {
  fdnn_model* small = create_with(net, weights, 1024, 0);
  fdnn_model* large = create_with(net, weights, 2048, 0);
  const double per_sample =
      (static_cast<double>(context_bytes(large)) - static_cast<double>(context_bytes(small))) /
      1024.0;
  fdnn_model_destroy(small);
  fdnn_model_destroy(large);
  return per_sample;
}

void expect_out_of_memory_message(const std::string& message) {
  EXPECT_NE(message.find("out of memory"), std::string::npos) << message;
  EXPECT_NE(message.find("max_batch"), std::string::npos) << message;
}

TEST(DeviceOutOfMemory, AContextLargerThanTheDeviceIsRefusedAndLeaksNothing) {
  REQUIRE_CUDA();
  std::mt19937 random(11);
  const Net net = wide_middle();
  const auto weights = draw_weights(net, random);
  const double per_sample = bytes_per_sample(net, weights);
  ASSERT_GT(per_sample, 4096.0 * sizeof(float)) << "the wide activations are in the workspace";
  const DeviceMemory start = device_memory();
  // One and a half times the device: no limit on the workspace (0), so the allocation is tried.
  const auto max_batch =
      std::min<int64_t>(FDNN_MAX_BATCH_LIMIT,
                        static_cast<int64_t>(1.5 * static_cast<double>(start.total) / per_sample));
  fdnn_model* model = create_with(net, weights, max_batch, 0);
  ASSERT_NE(model, nullptr);
  ASSERT_GT(context_bytes(model), start.total);
  fdnn_context* context = nullptr;
  EXPECT_EQ(fdnn_context_create(model, &context), FDNN_STATUS_OUT_OF_MEMORY)
      << fdnn_last_error_message();
  EXPECT_EQ(context, nullptr);
  expect_out_of_memory_message(fdnn_last_error_message());
  // The run's pool creates a context the same way, and fails the same way.
  const std::vector<float> input(64, 0.5f);
  std::vector<float> output(8, NAN);
  EXPECT_EQ(fdnn_model_run(model, 1, input.data(), input.size(), output.data(), output.size()),
            FDNN_STATUS_OUT_OF_MEMORY)
      << fdnn_last_error_message();
  fdnn_model_destroy(model);
  CUDA_OK(cudaDeviceSynchronize());
  EXPECT_GE(device_memory().free + kFreeSlack, start.free);
}

TEST(DeviceOutOfMemory, ContextsUntilTheDeviceIsFullThenTheRestStillRun) {
  REQUIRE_CUDA();
  std::mt19937 random(12);
  const Net net = wide_middle();
  const auto weights = draw_weights(net, random);
  const double per_sample = bytes_per_sample(net, weights);
  const int64_t batch = 17;
  const std::vector<float> input = normal(static_cast<size_t>(batch * 64), random, 0.0f, 1.0f);
  const size_t output_count = static_cast<size_t>(batch * 8);

  // A small model with the same weights, before memory is short: the first large context must
  // agree with it within the fp32 bound (the forms may differ with max_batch), and every later
  // context with the first bit for bit.
  fdnn_model* small = create_with(net, weights, 64, FDNN_DEFAULT_MAX_WORKSPACE_BYTES);
  ASSERT_NE(small, nullptr);
  std::vector<float> small_output(output_count, NAN);
  ASSERT_EQ(
      fdnn_model_run(small, batch, input.data(), input.size(), small_output.data(), output_count),
      FDNN_STATUS_OK)
      << fdnn_last_error_message();
  fdnn_model_destroy(small);
  CUDA_OK(cudaDeviceSynchronize());
  std::vector<float> expected;

  const DeviceMemory start = device_memory();
  // Each context takes about a quarter of the free memory (and stays under the default limit),
  // so the fourth or fifth cannot be allocated.
  const double target = std::min(static_cast<double>(start.free) / 4.2,
                                 0.9 * static_cast<double>(FDNN_DEFAULT_MAX_WORKSPACE_BYTES));
  const auto max_batch = std::max<int64_t>(batch, static_cast<int64_t>(target / per_sample));
  fdnn_model* model = create_with(net, weights, max_batch, FDNN_DEFAULT_MAX_WORKSPACE_BYTES);
  ASSERT_NE(model, nullptr);
  std::vector<fdnn_context*> contexts;
  fdnn_status refused = FDNN_STATUS_OK;
  std::string message;
  for (int i = 0; i < 32 && refused == FDNN_STATUS_OK; ++i) {
    fdnn_context* context = nullptr;
    refused = fdnn_context_create(model, &context);
    if (refused != FDNN_STATUS_OK) {
      message = fdnn_last_error_message();
      EXPECT_EQ(context, nullptr);
      break;
    }
    contexts.push_back(context);
    std::vector<float> output(output_count, NAN);
    ASSERT_EQ(
        fdnn_context_run(context, batch, input.data(), input.size(), output.data(), output_count),
        FDNN_STATUS_OK)
        << fdnn_last_error_message();
    if (expected.empty()) {
      expected = output;
      EXPECT_LE(relative_error(expected, small_output), kTolerance);
    }
    EXPECT_EQ(output, expected) << "context " << i;
  }
  std::printf(
      "[ memory   ] %zu contexts of %zu bytes (max_batch %lld) on %zu free bytes; the next: "
      "%s\n",
      contexts.size(), context_bytes(model), static_cast<long long>(max_batch), start.free,
      message.c_str());
  EXPECT_EQ(refused, FDNN_STATUS_OUT_OF_MEMORY) << message;
  EXPECT_GE(contexts.size(), 1u);
  expect_out_of_memory_message(message);
  // The contexts that exist run as before, on the host and the device path.
  float* device_input = nullptr;
  float* device_output = nullptr;
  CUDA_OK(cudaMalloc(reinterpret_cast<void**>(&device_input), input.size() * sizeof(float)));
  CUDA_OK(cudaMalloc(reinterpret_cast<void**>(&device_output), output_count * sizeof(float)));
  for (fdnn_context* context : contexts) {
    std::vector<float> output(output_count, NAN);
    ASSERT_EQ(
        fdnn_context_run(context, batch, input.data(), input.size(), output.data(), output_count),
        FDNN_STATUS_OK)
        << fdnn_last_error_message();
    EXPECT_EQ(output, expected);
    std::vector<float> device_result;
    ASSERT_NO_FATAL_FAILURE(run_device(context, batch, input, output_count, device_input,
                                       device_output, nullptr, &device_result));
    EXPECT_EQ(device_result, expected);
  }
  cudaFree(device_input);
  cudaFree(device_output);
  for (fdnn_context* context : contexts) fdnn_context_destroy(context);
  fdnn_model_destroy(model);
  CUDA_OK(cudaDeviceSynchronize());
  EXPECT_GE(device_memory().free + kFreeSlack, start.free);
}

#else

TEST(DeviceOutOfMemory, NeedsTheCudaRuntime) {
  GTEST_SKIP() << "this build has no CUDA backend: no device memory to run out of";
}

#endif

}  // namespace
