// The CUDA backend against the CPU backend (exact fp32, itself checked against PyTorch by the
// golden tests): every step kind, the fused MLP in all its tile shapes, every activation, the
// host path, the device path (caller's stream, NULL stream, rotating buffers), graphs on and off.
// The helpers and the comparison rules are in cuda_test_support.hpp; cuBLASLt's Linear has its
// own file, cublaslt_linear_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cuda_test_support.hpp"
#include "fusednn/fusednn.h"

namespace {

using namespace fusednn_cuda_test;

// ------------------------------------------------------------------------------------------

Net seed_mlp() {
  Net net({100});
  net.linear("fc1", 100, 128).act(R"({"type": "ReLU"})");
  net.linear("fc2", 128, 64).act(R"({"type": "ReLU"})");
  net.linear("fc3", 64, 10);
  return net;
}

TEST(CudaBackend, SeedMlpEveryBatchSize) {
  REQUIRE_CUDA();
  expect_matches_cpu(seed_mlp(), all_batches(), 1, "seed MLP 100-128-64-10");
}

TEST(CudaBackend, FusedMlpWidthsOffThePowerOfTwoGrid) {
  REQUIRE_CUDA();
  Net net({37});
  net.linear("a", 37, 200).act(R"({"type": "GELU", "approximate": "tanh"})");
  net.linear("b", 200, 13).act(R"({"type": "SiLU"})");
  net.linear("c", 13, 256).act(R"({"type": "LeakyReLU", "negative_slope": 0.1})");
  net.linear("d", 256, 255, false).act(R"({"type": "Scale", "alpha": 0.5})");
  net.linear("e", 255, 5).act(R"({"type": "Sigmoid"})");
  expect_matches_cpu(net, all_batches(), 2, "37-200-13-256-255-5");
}

TEST(CudaBackend, EveryActivationFusedAndStandalone) {
  REQUIRE_CUDA();
  uint32_t seed = 10;
  for (const auto& [name, layer] : activations()) {
    Net fused({33});
    fused.linear("fc1", 33, 70).act(layer).linear("fc2", 70, 9).act(layer);
    expect_matches_cpu(fused, few_batches(), seed++, name + " in a fused chain");
    // On the model input an activation has no step to join: an Elementwise step.
    Net standalone({45});
    standalone.act(layer).linear("fc", 45, 7);
    expect_matches_cpu(standalone, few_batches(), seed++, name + " as an Elementwise step");
  }
}

// fp32 chains on tensor cores (3xTF32 split products) at every batch size, not only the large
// ones the backend picks them for: the same 1e-5 bound as the FMA kernels.
TEST(CudaBackend, Fp32ChainsOnTensorCoresHoldFp32Accuracy) {
  REQUIRE_CUDA();
  ScopedEnvironment force("FUSEDNN_CUDA_FP32_TENSOR_CORES", "1");
  expect_matches_cpu(seed_mlp(), all_batches(), 21, "seed MLP, 3xTF32");
  // More tiles than resident blocks: the persistent loop and its double-buffered input.
  expect_matches_cpu(seed_mlp(), {20000}, 42, "seed MLP, 3xTF32, 20000 rows");
  Net net({37});
  net.linear("a", 37, 200).act(R"({"type": "GELU", "approximate": "tanh"})");
  net.linear("b", 200, 13).act(R"({"type": "SiLU"})");
  net.linear("c", 13, 256).act(R"({"type": "LeakyReLU", "negative_slope": 0.1})");
  net.linear("d", 256, 255, false).act(R"({"type": "Scale", "alpha": 0.5})");
  net.linear("e", 255, 5).act(R"({"type": "Sigmoid"})");
  expect_matches_cpu(net, all_batches(), 22, "37-200-13-256-255-5, 3xTF32");
  uint32_t seed = 23;
  for (const auto& [name, layer] : activations()) {
    Net fused({36});
    fused.linear("fc1", 36, 70).act(layer).linear("fc2", 70, 9).act(layer);
    expect_matches_cpu(fused, few_batches(), seed++, name + ", 3xTF32");
  }
  Net unaligned({7});  // input rows not a multiple of 16 bytes: 4-byte copies
  unaligned.linear("fc1", 7, 16).act(R"({"type": "Tanh"})").linear("fc2", 16, 3, false);
  expect_matches_cpu(unaligned, all_batches(), 40, "7-16-3, 3xTF32");
}

TEST(CudaBackend, Fp32ChainsOnFmaPipesOnly) {
  REQUIRE_CUDA();
  ScopedEnvironment force("FUSEDNN_CUDA_FP32_TENSOR_CORES", "0");  // today's default
  expect_matches_cpu(seed_mlp(), {1, 33, 4097, 20000}, 41, "seed MLP, FMA kernels");
}

// The single-block small-batch form (opt-in until timed): every batch size it takes (1 to 16
// rows) and one past it, every activation.
TEST(CudaBackend, SmallBatchSingleBlockForm) {
  REQUIRE_CUDA();
  ScopedEnvironment form("FUSEDNN_CUDA_SMALL_BATCH_MLP", "block");
  expect_matches_cpu(seed_mlp(), {1, 2, 3, 4, 5, 7, 8, 15, 16, 17, 33}, 50, "seed MLP, one block");
  Net net({37});
  net.linear("a", 37, 200).act(R"({"type": "GELU", "approximate": "tanh"})");
  net.linear("b", 200, 13).act(R"({"type": "SiLU"})");
  net.linear("c", 13, 256).act(R"({"type": "LeakyReLU", "negative_slope": 0.1})");
  net.linear("d", 256, 255, false).act(R"({"type": "Scale", "alpha": 0.5})");
  net.linear("e", 255, 5).act(R"({"type": "Sigmoid"})");
  // 326 KB of weights: too big for one block's shared memory, so this checks the fallback.
  expect_matches_cpu(net, {1, 2, 3, 16}, 51, "37-200-13-256-255-5, one block");
  Net fits({37});
  fits.linear("a", 37, 200).act(R"({"type": "GELU", "approximate": "tanh"})");
  fits.linear("b", 200, 13).act(R"({"type": "SiLU"})");
  fits.linear("c", 13, 255).act(R"({"type": "LeakyReLU", "negative_slope": 0.1})");
  fits.linear("e", 255, 5, false).act(R"({"type": "Sigmoid"})");
  expect_matches_cpu(fits, {1, 2, 3, 16}, 53, "37-200-13-255-5, one block");
  uint32_t seed = 52;
  for (const auto& [name, layer] : activations()) {
    Net fused({33});
    fused.linear("fc1", 33, 70).act(layer).linear("fc2", 70, 9).act(layer);
    expect_matches_cpu(fused, {1, 3}, seed++, name + ", one block");
  }
}

TEST(CudaBackend, EpilogueLongerThanOneKernelHolds) {
  REQUIRE_CUDA();
  Net net({20});
  net.linear("fc1", 20, 30)
      .act(R"({"type": "ReLU"})")
      .act(R"({"type": "Scale", "alpha": 1.5})")
      .act(R"({"type": "Tanh"})")
      .act(R"({"type": "Scale", "alpha": 2.0})")
      .act(R"({"type": "SiLU"})")
      .act(R"({"type": "Scale", "alpha": 0.5})");
  net.linear("fc2", 30, 6);
  expect_matches_cpu(net, few_batches(), 30, "six-op epilogue");
  Net elementwise({50});
  for (int i = 0; i < 3; ++i) {
    elementwise.act(R"({"type": "GELU"})").act(R"({"type": "Scale", "alpha": 1.25})");
  }
  expect_matches_cpu(elementwise, few_batches(), 31, "six-op Elementwise step");
}

TEST(CudaBackend, ChainLongerThanOneKernelHolds) {
  REQUIRE_CUDA();
  Net net({24});
  const int64_t widths[] = {24, 31, 17, 64, 9, 40, 40, 23, 5, 70, 12, 3};
  for (size_t i = 0; i + 1 < std::size(widths); ++i) {
    net.linear("fc" + std::to_string(i), widths[i], widths[i + 1]).act(R"({"type": "Tanh"})");
  }
  expect_matches_cpu(net, all_batches(), 40, "eleven Linear layers");
}

TEST(CudaBackend, RowsPerSampleAboveOne) {
  REQUIRE_CUDA();
  Net net({5, 24});
  net.linear("fc1", 24, 16).act(R"({"type": "ReLU"})").linear("fc2", 16, 8);
  expect_matches_cpu(net, all_batches(), 50, "Linear over [5, 24]");
}

// Wide layers run on cuBLASLt (cublaslt_linear_test.cpp tests that path in full), the narrow
// ones after them fused.
TEST(CudaBackend, WideLinearLayers) {
  REQUIRE_CUDA();
  Net gelu({768});
  gelu.linear("fc", 768, 3072).act(R"({"type": "GELU", "approximate": "tanh"})");
  expect_matches_cpu(gelu, few_batches(), 60, "768 -> 3072 + GELU(tanh)");
  Net wide({300});
  wide.linear("fc1", 300, 700).act(R"({"type": "ReLU"})").linear("fc2", 700, 10);
  expect_matches_cpu(wide, few_batches(), 61, "300 -> 700 -> 10");
  Net tall({5000});
  tall.linear("fc1", 5000, 300).act(R"({"type": "SiLU"})").linear("fc2", 300, 30, false);
  expect_matches_cpu(tall, few_batches(), 62, "5000 -> 300 -> 30");
}

TEST(CudaBackend, ConvolutionsAndPooling) {
  REQUIRE_CUDA();
  Net a({3, 17, 19});
  a.conv("conv", 3, 8, {3, 3}, {2, 2}, {1, 1}, {1, 1}, 1, true).act(R"({"type": "ReLU"})");
  a.layer(R"({"type": "MaxPool2d", "name": "pool", "kernel_size": 3, "stride": 2, "padding": 1})");
  a.batch_norm("bn", "BatchNorm2d", 8).act(R"({"type": "SiLU"})");
  a.layer(R"({"type": "Flatten"})").linear("fc", 200, 10);
  expect_matches_cpu(a, all_batches(), 70, "stride 2, padding, max pool, unfolded batch norm");

  Net b({4, 12, 12});
  b.conv("conv1", 4, 6, {3, 3}, {1, 1}, {2, 2}, {2, 2}, 2, false)
      .act(R"({"type": "GELU", "approximate": "none"})");
  b.layer(R"({"type": "AvgPool2d", "name": "pool", "kernel_size": 3, "stride": 2, "padding": 1,
              "count_include_pad": false})");
  b.conv("conv2", 6, 6, {1, 1}, {1, 1}, {0, 0}, {1, 1}, 3, true).act(R"({"type": "Sigmoid"})");
  b.layer(R"({"type": "Flatten"})").linear("fc", 216, 7);
  expect_matches_cpu(b, few_batches(), 71, "dilation 2, groups, avg pool without padding count");

  Net c({2, 9, 11});
  c.conv("conv", 2, 5, {3, 5}, {2, 1}, {1, 2}, {1, 1}, 1, true).act(R"({"type": "Tanh"})");
  c.layer(R"({"type": "AvgPool2d", "name": "pool", "kernel_size": [2, 3], "stride": [1, 2],
              "padding": [1, 1], "count_include_pad": true})");
  c.batch_norm("bn", "BatchNorm2d", 5);
  expect_matches_cpu(c, few_batches(), 72, "non-square kernel, avg pool counting padding");
}

TEST(CudaBackend, LayerNormAndSoftmax) {
  REQUIRE_CUDA();
  Net rows({7, 50});
  rows.layer_norm("norm", 50).act(R"({"type": "GELU"})").linear("fc", 50, 50);
  rows.layer(R"({"type": "Softmax", "dim": -1})");
  expect_matches_cpu(rows, all_batches(), 80, "7 rows of 50 per sample");
  Net long_rows({3000});
  long_rows.layer_norm("norm", 3000, false).layer(R"({"type": "Softmax", "dim": -1})");
  expect_matches_cpu(long_rows, few_batches(), 81, "rows of 3000 (block per row)");
  Net head({64});
  head.linear("fc1", 64, 128).layer_norm("norm", 128).act(R"({"type": "ReLU"})");
  head.linear("fc2", 128, 32).layer(R"({"type": "Softmax"})");
  expect_matches_cpu(head, all_batches(), 82, "Linear, LayerNorm, Softmax head");
}

TEST(CudaBackend, DagsWithAddAndConcat) {
  REQUIRE_CUDA();
  Net residual({48});
  residual.linear("fc1", 48, 96).act(R"({"type": "ReLU", "name": "relu"})");
  residual.linear("fc2", 96, 48);
  residual.layer(R"({"type": "Add", "name": "add", "inputs": ["fc2", "input"]})")
      .act(R"({"type": "ReLU"})");
  residual.layer(R"({"type": "Concat", "name": "cat", "dim": 1, "inputs": ["add", "input"]})");
  residual.linear("head", 96, 16);
  expect_matches_cpu(residual, all_batches(), 90, "residual block");

  Net many({16});
  std::string names;
  for (int i = 0; i < 10; ++i) {
    many.linear("l" + std::to_string(i), 16, 16, true, R"(["input"])");
    names += (i ? ", \"l" : "\"l") + std::to_string(i) + "\"";
  }
  many.layer(R"({"type": "Add", "name": "sum", "inputs": [)" + names + "]}")
      .act(R"({"type": "Tanh"})");
  expect_matches_cpu(many, few_batches(), 91, "Add of ten inputs");

  Net cat({4, 6});
  cat.linear("a", 6, 5, true, R"(["input"])").linear("b", 6, 3, true, R"(["input"])");
  cat.layer(R"({"type": "Concat", "name": "cat", "dim": 2, "inputs": ["a", "b", "input"]})");
  cat.layer(R"({"type": "Softmax"})");
  expect_matches_cpu(cat, few_batches(), 92, "Concat along the last of two dims");
}

TEST(CudaBackend, IdentityModelCopies) {
  REQUIRE_CUDA();
  Net net({5, 7});
  net.layer(R"({"type": "Flatten"})");
  expect_matches_cpu(net, few_batches(), 100, "Flatten only");
}

// Golden bundles, random inputs: CUDA against the CPU on the models PyTorch made.
TEST(CudaBackend, GoldenBundles) {
  REQUIRE_CUDA();
  const std::string root = std::string(FUSEDNN_TEST_FIXTURES_DIR) + "/golden/";
  int checked = 0;
  for (const auto& entry : std::filesystem::directory_iterator(root)) {
    const std::string path = entry.path().string() + "/model.safetensors";
    if (!std::filesystem::exists(path)) continue;
    SCOPED_TRACE(path);
    std::mt19937 random(200 + checked++);
    fdnn_model_options options;
    fdnn_model_options_init(&options, sizeof options);
    options.max_batch = 1000;
    fdnn_model* cpu = nullptr;
    ASSERT_EQ(fdnn_model_create_from_file(path.c_str(), &options, &cpu), FDNN_STATUS_OK)
        << fdnn_last_error_message();
    options.device = FDNN_DEVICE_CUDA;
    fdnn_model* gpu = nullptr;
    ASSERT_EQ(fdnn_model_create_from_file(path.c_str(), &options, &gpu), FDNN_STATUS_OK)
        << fdnn_last_error_message();
    fdnn_shape in_shape, out_shape;
    ASSERT_EQ(fdnn_model_input_shape(cpu, &in_shape), FDNN_STATUS_OK);
    ASSERT_EQ(fdnn_model_output_shape(cpu, &out_shape), FDNN_STATUS_OK);
    for (int64_t batch : {int64_t{1}, int64_t{3}, int64_t{257}, int64_t{1000}}) {
      const std::vector<float> input =
          normal(static_cast<size_t>(batch * elements(in_shape)), random, 0.0f, 1.0f);
      std::vector<float> expected(static_cast<size_t>(batch * elements(out_shape)), NAN);
      std::vector<float> got(expected.size(), NAN);
      ASSERT_EQ(fdnn_model_run(cpu, batch, input.data(), input.size(), expected.data(),
                               expected.size()),
                FDNN_STATUS_OK);
      ASSERT_EQ(fdnn_model_run(gpu, batch, input.data(), input.size(), got.data(), got.size()),
                FDNN_STATUS_OK)
          << fdnn_last_error_message();
      EXPECT_LE(relative_error(got, expected), kTolerance) << "batch " << batch;
    }
    fdnn_model_destroy(cpu);
    fdnn_model_destroy(gpu);
  }
  EXPECT_GT(checked, 0) << "no golden bundles under " << root;
}

#if FUSEDNN_TEST_WITH_CUDART
// The device path with the caller's buffers changing between runs (graphs re-pointed, not
// recaptured), a second stream, and runs queued back to back before one synchronisation.
TEST(CudaBackend, DevicePathRotatingBuffersAndStreams) {
  REQUIRE_CUDA();
  expect_rotating_buffers_match(seed_mlp(), 301, "seed MLP");
  Net lenet({1, 28, 28});
  lenet.conv("c1", 1, 6, {5, 5}, {1, 1}, {2, 2}, {1, 1}, 1, true).act(R"({"type": "Tanh"})");
  lenet.layer(R"({"type": "AvgPool2d", "name": "p1", "kernel_size": 2, "stride": 2})");
  lenet.conv("c2", 6, 16, {5, 5}, {1, 1}, {0, 0}, {1, 1}, 1, true).act(R"({"type": "Tanh"})");
  lenet.layer(R"({"type": "AvgPool2d", "name": "p2", "kernel_size": 2, "stride": 2})");
  lenet.layer(R"({"type": "Flatten"})").linear("f1", 400, 120).act(R"({"type": "Tanh"})");
  lenet.linear("f2", 120, 84).act(R"({"type": "Tanh"})").linear("f3", 84, 10);
  expect_rotating_buffers_match(lenet, 300, "LeNet-5");
}
#endif

TEST(CudaBackend, ThreadsShareOneModel) {
  REQUIRE_CUDA();
  const Net net = seed_mlp();
  std::mt19937 random(400);
  const auto weights = draw_weights(net, random);
  fdnn_model* cpu = create_model(net.spec(), FDNN_DEVICE_CPU, 64, 1);
  fdnn_model* gpu = create_model(net.spec(), FDNN_DEVICE_CUDA, 64, 1);
  ASSERT_TRUE(cpu && gpu);
  set_weights(cpu, net, weights);
  set_weights(gpu, net, weights);
  std::vector<float> input = normal(64 * 100, random, 0.0f, 1.0f);
  std::vector<float> expected(64 * 10, NAN);
  ASSERT_EQ(fdnn_model_run(cpu, 64, input.data(), input.size(), expected.data(), expected.size()),
            FDNN_STATUS_OK);
  std::vector<double> errors(4, INFINITY);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      double worst = 0;
      for (int i = 0; i < 50; ++i) {
        std::vector<float> got(expected.size(), NAN);
        if (fdnn_model_run(gpu, 64, input.data(), input.size(), got.data(), got.size()) !=
            FDNN_STATUS_OK) {
          worst = INFINITY;
          break;
        }
        worst = std::max(worst, relative_error(got, expected));
      }
      errors[t] = worst;
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (double error : errors) EXPECT_LE(error, kTolerance);
  // A context keeps the weights alive after its model is gone.
  fdnn_context* context = nullptr;
  ASSERT_EQ(fdnn_context_create(gpu, &context), FDNN_STATUS_OK);
  fdnn_model_destroy(gpu);
  std::vector<float> got(expected.size(), NAN);
  ASSERT_EQ(fdnn_context_run(context, 64, input.data(), input.size(), got.data(), got.size()),
            FDNN_STATUS_OK);
  EXPECT_LE(relative_error(got, expected), kTolerance);
  fdnn_context_destroy(context);
  fdnn_model_destroy(cpu);
}

TEST(CudaBackend, DeviceSelection) {
  REQUIRE_CUDA();
  int32_t gpus = 0;
  ASSERT_EQ(fdnn_cuda_device_count(&gpus), FDNN_STATUS_OK);
  const std::string spec = seed_mlp().spec();
  fdnn_model_options options;
  fdnn_model_options_init(&options, sizeof options);
  options.device = FDNN_DEVICE_CUDA;
  options.device_id = gpus;  // one past the last
  fdnn_model* model = nullptr;
  EXPECT_EQ(fdnn_model_create_from_spec(spec.data(), spec.size(), &options, &model),
            FDNN_STATUS_UNSUPPORTED);
  EXPECT_NE(std::string(fdnn_last_error_message()).find("device_id"), std::string::npos)
      << fdnn_last_error_message();
  EXPECT_EQ(model, nullptr);
  options.device = FDNN_DEVICE_AUTO;
  options.device_id = 0;
  ASSERT_EQ(fdnn_model_create_from_spec(spec.data(), spec.size(), &options, &model),
            FDNN_STATUS_OK);
  fdnn_device device = FDNN_DEVICE_CPU;
  ASSERT_EQ(fdnn_model_device(model, &device), FDNN_STATUS_OK);
  EXPECT_EQ(device, FDNN_DEVICE_CUDA);
  fdnn_model_destroy(model);
}

// Runs in every build: without a GPU, CUDA is refused with a message that says why.
TEST(CudaBackend, WithoutAGpuCudaIsUnsupported) {
  int32_t gpus = -1;
  ASSERT_EQ(fdnn_cuda_device_count(&gpus), FDNN_STATUS_OK);
  ASSERT_GE(gpus, 0);
  if (gpus > 0) GTEST_SKIP() << "a CUDA device is visible; the no-GPU behaviour is not testable";
  const std::string spec = seed_mlp().spec();
  fdnn_model_options options;
  fdnn_model_options_init(&options, sizeof options);
  options.device = FDNN_DEVICE_CUDA;
  fdnn_model* model = nullptr;
  EXPECT_EQ(fdnn_model_create_from_spec(spec.data(), spec.size(), &options, &model),
            FDNN_STATUS_UNSUPPORTED);
  const std::string message = fdnn_last_error_message();
  EXPECT_TRUE(message.find("without the CUDA backend") != std::string::npos ||
              message.find("no CUDA device") != std::string::npos)
      << message;
  options.device = FDNN_DEVICE_AUTO;
  ASSERT_EQ(fdnn_model_create_from_spec(spec.data(), spec.size(), &options, &model),
            FDNN_STATUS_OK);
  fdnn_device device = FDNN_DEVICE_CUDA;
  ASSERT_EQ(fdnn_model_device(model, &device), FDNN_STATUS_OK);
  EXPECT_EQ(device, FDNN_DEVICE_CPU);
  fdnn_model_destroy(model);
}

}  // namespace
