// SPDX-License-Identifier: Apache-2.0
// The precision option on the GPU: every fdnn_precision is accepted, the model reports a
// precision it may run in (the one asked for, or fp32), and its error against the CPU backend
// (fp32) stays within that precision's bound from the accuracy contract in fusednn.h:
// tf32 1e-3, fp16 and bf16 1e-2 (fp32: 1e-5, fp32 summed in another order). The comparison with
// PyTorch in the same precision is in tests/python/test_precision.py; the tensor-core chains
// themselves are covered in depth by cuda_backend_test.cpp's reduced-precision tests.
//
// The method of cuda_test_support.hpp: fresh random weights and inputs for each check, outputs
// poisoned with NaN before every run, every path. Without a GPU every test skips with a message.
#include <gtest/gtest.h>

#include <string>

#include "cuda_test_support.hpp"

namespace {

using namespace fusednn_cuda_test;

// An MLP with a lone wide layer (cuBLASLt) and a chain after it (the fused MLP).
Net mlp() {
  Net net({256});
  net.linear("fc1", 256, 512).act(R"({"type": "GELU", "approximate": "none"})");
  net.linear("fc2", 512, 256).act(R"({"type": "ReLU"})").linear("fc3", 256, 10);
  return net;
}

// A small convolutional net: its convolution runs in fp32 whatever the precision.
Net conv_net() {
  Net net({3, 16, 16});
  net.conv("conv", 3, 16, {3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, true).act(R"({"type": "ReLU"})");
  net.layer(R"({"type": "MaxPool2d", "name": "pool", "kernel_size": 2})");
  net.layer(R"({"type": "Flatten"})").linear("fc", 1024, 10);
  return net;
}

void expect_within_contract(const Net& net, uint32_t seed) {
  for (const PrecisionBound& c : precision_bounds(true)) {
    SCOPED_TRACE(c.name);
    fdnn_precision before_runs = FDNN_PRECISION_FP32;
    GpuHooks hooks;
    // What runs is the precision asked for or fp32, never anything else, and the query
    // answers the same before and after the runs.
    hooks.before_runs = [&](fdnn_model* model) {
      ASSERT_EQ(fdnn_model_precision(model, &before_runs), FDNN_STATUS_OK)
          << fdnn_last_error_message();
      EXPECT_TRUE(before_runs == c.precision || before_runs == FDNN_PRECISION_FP32) << before_runs;
    };
    hooks.after_runs = [&](fdnn_model* model) {
      fdnn_precision after = FDNN_PRECISION_FP32;
      ASSERT_EQ(fdnn_model_precision(model, &after), FDNN_STATUS_OK);
      EXPECT_EQ(after, before_runs);
    };
    expect_matches_cpu(net, {1, 7, 64}, seed++, c.name, hooks, c.precision, c.bound);
  }
}

TEST(CudaPrecision, MlpWithinTheContractOfEachPrecision) {
  REQUIRE_CUDA();
  expect_within_contract(mlp(), 20240611u);
}

TEST(CudaPrecision, ConvNetWithinTheContractOfEachPrecision) {
  REQUIRE_CUDA();
  expect_within_contract(conv_net(), 977u);
}

}  // namespace
