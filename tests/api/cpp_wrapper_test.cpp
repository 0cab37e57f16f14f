// SPDX-License-Identifier: Apache-2.0
// The header-only C++ wrapper (fusednn.hpp) over the same C API: options, queries, errors.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "api_test_support.hpp"
#include "fusednn/fusednn.hpp"

using namespace fusednn_test;

TEST(CppWrapper, PrecisionOptionAndQuery) {
  // The CPU computes in fp32 whatever precision the options allow.
  for (fdnn_precision asked : {FDNN_PRECISION_FP32, FDNN_PRECISION_FP16, FDNN_PRECISION_BF16}) {
    fusednn::Model model = fusednn::Model::from_spec(
        tiny_linear_spec(), fusednn::ModelOptions().max_batch(4).precision(asked));
    EXPECT_EQ(model.precision(), FDNN_PRECISION_FP32);
    EXPECT_EQ(model.device(), FDNN_DEVICE_CPU);
  }
}

TEST(CppWrapper, UnknownPrecisionThrowsNamingTheOption) {
  const int32_t unknown = 9;
  fdnn_precision precision;
  std::memcpy(&precision, &unknown, sizeof precision);
  try {
    fusednn::Model::from_spec(tiny_linear_spec(), fusednn::ModelOptions().precision(precision));
    FAIL() << "an unknown precision was accepted";
  } catch (const fusednn::Error& error) {
    EXPECT_EQ(error.status(), FDNN_STATUS_INVALID_ARGUMENT);
    EXPECT_NE(std::string(error.what()).find("options.precision"), std::string::npos)
        << error.what();
  }
}

TEST(CppWrapper, HostIoOptionAndCpuContextQuery) {
  fusednn::Model model = fusednn::Model::from_spec(
      tiny_linear_spec(), fusednn::ModelOptions().host_io(FDNN_HOST_IO_MAPPED));
  EXPECT_EQ(model.device(), FDNN_DEVICE_CPU);
  set_tiny_weights(model.get());
  fusednn::Context context = model.create_context();
  try {
    context.host_io();
    FAIL() << "a CPU context reported a host I/O path";
  } catch (const fusednn::Error& error) {
    EXPECT_EQ(error.status(), FDNN_STATUS_UNSUPPORTED);
  }
}

TEST(CppWrapper, FromMemoryTakesABundleAndThrowsOnBadBytes) {
  const std::string spec = tiny_linear_spec();
  fusednn::Model model =
      fusednn::Model::from_memory(spec.data(), spec.size(), fusednn::ModelOptions().max_batch(2));
  EXPECT_EQ(model.device(), FDNN_DEVICE_CPU);
  const char garbage[] = "not a model";
  try {
    fusednn::Model::from_memory(garbage, sizeof garbage - 1);
    FAIL() << "garbage was accepted";
  } catch (const fusednn::Error& error) {
    EXPECT_EQ(error.status(), FDNN_STATUS_PARSE_ERROR);
    EXPECT_NE(std::string(error.what()).find("<memory>"), std::string::npos) << error.what();
  }
}

TEST(CppWrapper, MemoryLimitsAndPerSampleCost) {
  // The tiny Linear 3 -> 2 declares 8 weights: 32 bytes as float32.
  try {
    fusednn::Model::from_spec(tiny_linear_spec(), fusednn::ModelOptions().max_weight_bytes(31));
    FAIL() << "a weight limit below the declared weights was accepted";
  } catch (const fusednn::Error& error) {
    EXPECT_EQ(error.status(), FDNN_STATUS_OUT_OF_MEMORY);
    EXPECT_NE(std::string(error.what()).find("options.max_weight_bytes"), std::string::npos)
        << error.what();
  }
  fusednn::Model model = fusednn::Model::from_spec(
      tiny_linear_spec(), fusednn::ModelOptions().max_weight_bytes(32).max_workspace_bytes(0));
  const fdnn_memory_info memory = model.memory_info();
  EXPECT_EQ(memory.flops_per_sample, 2.0 * 3 * 2);
  EXPECT_EQ(memory.bytes_per_sample, 4.0 * (3 + 2));
}
