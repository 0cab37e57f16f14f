// The precision option on the GPU: every fdnn_precision is accepted, the model reports a
// precision it may run in (the one asked for, or fp32), and its error against the CPU backend
// (fp32) stays within that precision's bound from the accuracy contract in fusednn.h:
// tf32 1e-3, fp16 and bf16 1e-2 (fp32: 1e-5, fp32 summed in another order). The comparison with
// PyTorch in the same precision is in tests/python/test_precision.py.
//
// Fresh random weights and inputs for each check; outputs poisoned with NaN before every run.
// Without a GPU every test skips with a message.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "fusednn/fusednn.h"

namespace {

#define REQUIRE_CUDA()                                                                       \
  do {                                                                                       \
    int32_t gpus_ = 0;                                                                       \
    ASSERT_EQ(fdnn_cuda_device_count(&gpus_), FDNN_STATUS_OK) << fdnn_last_error_message(); \
    if (gpus_ == 0) {                                                                        \
      GTEST_SKIP() << "no CUDA device: fdnn_cuda_device_count() is 0 (this libfusednn has " \
                      "no CUDA backend, or no GPU is visible); nothing to compare";         \
    }                                                                                        \
  } while (0)

struct PrecisionCase {
  fdnn_precision precision;
  const char* name;
  double bound;  // the contract's relative error
};

const PrecisionCase kCases[] = {
    {FDNN_PRECISION_FP32, "fp32", 1e-5},
    {FDNN_PRECISION_TF32, "tf32", 1e-3},
    {FDNN_PRECISION_FP16, "fp16", 1e-2},
    {FDNN_PRECISION_BF16, "bf16", 1e-2},
};

// An MLP wide enough for tensor-core tiles, and a small convolutional net.
struct Network {
  std::string spec;
  std::vector<std::pair<std::string, std::vector<int64_t>>> weights;  // name, shape
  int64_t input_elements;
  int64_t output_elements;
};

Network mlp() {
  return {R"({"fusednn": 1, "name": "precision_mlp", "input": {"shape": [256], "dtype": "float32"},
    "layers": [
      {"type": "Linear", "name": "fc1", "in_features": 256, "out_features": 512},
      {"type": "GELU", "approximate": "none"},
      {"type": "Linear", "name": "fc2", "in_features": 512, "out_features": 256},
      {"type": "ReLU"},
      {"type": "Linear", "name": "fc3", "in_features": 256, "out_features": 10}]})",
          {{"fc1.weight", {512, 256}}, {"fc1.bias", {512}}, {"fc2.weight", {256, 512}},
           {"fc2.bias", {256}}, {"fc3.weight", {10, 256}}, {"fc3.bias", {10}}},
          256,
          10};
}

Network conv_net() {
  return {R"({"fusednn": 1, "name": "precision_cnn", "input": {"shape": [3, 16, 16], "dtype": "float32"},
    "layers": [
      {"type": "Conv2d", "name": "conv", "in_channels": 3, "out_channels": 16, "kernel_size": 3,
       "padding": 1},
      {"type": "ReLU"},
      {"type": "MaxPool2d", "kernel_size": 2},
      {"type": "Flatten"},
      {"type": "Linear", "name": "fc", "in_features": 1024, "out_features": 10}]})",
          {{"conv.weight", {16, 3, 3, 3}}, {"conv.bias", {16}}, {"fc.weight", {10, 1024}},
           {"fc.bias", {10}}},
          3 * 16 * 16,
          10};
}

std::vector<float> normal(size_t count, std::mt19937& random, float deviation) {
  std::normal_distribution<float> distribution(0.0f, deviation);
  std::vector<float> values(count);
  for (float& v : values) v = distribution(random);
  return values;
}

fdnn_model* create(const Network& net, fdnn_device device, fdnn_precision precision,
                   const std::vector<std::vector<float>>& values) {
  fdnn_model_options options;
  fdnn_model_options_init(&options, sizeof options);
  options.max_batch = 64;
  options.device = device;
  options.precision = precision;
  fdnn_model* model = nullptr;
  EXPECT_EQ(fdnn_model_create_from_spec(net.spec.data(), net.spec.size(), &options, &model),
            FDNN_STATUS_OK)
      << fdnn_last_error_message();
  if (model == nullptr) return nullptr;
  for (size_t i = 0; i < net.weights.size(); ++i) {
    const auto& [name, shape] = net.weights[i];
    EXPECT_EQ(fdnn_model_set_weight(model, name.c_str(), FDNN_DTYPE_FLOAT32, values[i].data(),
                                    shape.data(), static_cast<int32_t>(shape.size())),
              FDNN_STATUS_OK)
        << fdnn_last_error_message();
  }
  return model;
}

// max |got - expected| / max |expected|; infinite when got has a NaN or Inf.
double relative_error(const std::vector<float>& got, const std::vector<float>& expected) {
  double worst = 0, scale = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    worst = std::max(worst, std::fabs(double(got[i]) - double(expected[i])));
    scale = std::max(scale, std::fabs(double(expected[i])));
  }
  return worst / std::max(scale, 1e-30);
}

void expect_within_contract(const Network& net, uint32_t seed) {
  std::mt19937 random(seed);
  for (const PrecisionCase& c : kCases) {
    SCOPED_TRACE(c.name);
    std::vector<std::vector<float>> values;
    for (const auto& [name, shape] : net.weights) {
      size_t count = 1;
      for (int64_t extent : shape) count *= static_cast<size_t>(extent);
      const float fan_in = static_cast<float>(count / static_cast<size_t>(shape[0]));
      values.push_back(normal(count, random, shape.size() == 1 ? 0.1f : 1.0f / std::sqrt(fan_in)));
    }
    fdnn_model* cpu = create(net, FDNN_DEVICE_CPU, FDNN_PRECISION_FP32, values);
    fdnn_model* gpu = create(net, FDNN_DEVICE_CUDA, c.precision, values);
    ASSERT_NE(cpu, nullptr);
    ASSERT_NE(gpu, nullptr);

    // What runs is the precision asked for or fp32, never anything else.
    const fdnn_precision neither =
        c.precision == FDNN_PRECISION_TF32 ? FDNN_PRECISION_FP16 : FDNN_PRECISION_TF32;
    fdnn_precision actual = neither;
    ASSERT_EQ(fdnn_model_precision(gpu, &actual), FDNN_STATUS_OK) << fdnn_last_error_message();
    EXPECT_TRUE(actual == c.precision || actual == FDNN_PRECISION_FP32) << actual;

    for (int64_t batch : {1, 7, 64}) {
      SCOPED_TRACE("batch " + std::to_string(batch));
      const std::vector<float> input =
          normal(static_cast<size_t>(batch * net.input_elements), random, 1.0f);
      const size_t count = static_cast<size_t>(batch * net.output_elements);
      std::vector<float> expected(count, NAN), got(count, NAN);
      ASSERT_EQ(fdnn_model_run(cpu, batch, input.data(), input.size(), expected.data(), count),
                FDNN_STATUS_OK)
          << fdnn_last_error_message();
      ASSERT_EQ(fdnn_model_run(gpu, batch, input.data(), input.size(), got.data(), count),
                FDNN_STATUS_OK)
          << fdnn_last_error_message();
      EXPECT_LE(relative_error(got, expected), c.bound);
    }
    // The query answers the same once the model has run.
    fdnn_precision after = neither;
    ASSERT_EQ(fdnn_model_precision(gpu, &after), FDNN_STATUS_OK);
    EXPECT_EQ(after, actual);
    fdnn_model_destroy(gpu);
    fdnn_model_destroy(cpu);
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
