// SPDX-License-Identifier: Apache-2.0
// The C API contract: versions, statuses, lifecycle, queries, frozen weights, contexts, threads.
#include <atomic>
#include <cmath>
#include <cstddef>
#include <thread>

#include "api_test_support.hpp"

using namespace fusednn_test;

TEST(ApiContract, VersionMatchesHeader) {
  EXPECT_EQ(fdnn_version(), static_cast<uint32_t>(FDNN_VERSION_NUMBER));
  const std::string expected = std::to_string(FDNN_VERSION_MAJOR) + "." +
                               std::to_string(FDNN_VERSION_MINOR) + "." +
                               std::to_string(FDNN_VERSION_PATCH);
  EXPECT_EQ(std::string(fdnn_version_string()), expected);
}

TEST(ApiContract, StatusValuesArePinnedAndNamed) {
  EXPECT_EQ(FDNN_STATUS_OK, 0);
  EXPECT_EQ(FDNN_STATUS_INVALID_ARGUMENT, 1);
  EXPECT_EQ(FDNN_STATUS_INTERNAL_ERROR, 12);
  for (int value = 0; value <= 12; ++value) {
    const std::string name = fdnn_status_string(static_cast<fdnn_status>(value));
    EXPECT_EQ(name.rfind("FDNN_STATUS_", 0), 0u) << value;
    EXPECT_NE(name, "FDNN_STATUS_UNKNOWN") << value;
  }
  EXPECT_STREQ(fdnn_status_string(FDNN_STATUS_WEIGHT_MISMATCH), "FDNN_STATUS_WEIGHT_MISMATCH");
  const int32_t unknown = 999;
  fdnn_status unknown_status;
  std::memcpy(&unknown_status, &unknown, sizeof unknown_status);
  EXPECT_STREQ(fdnn_status_string(unknown_status), "FDNN_STATUS_UNKNOWN");
}

TEST(ApiContract, OptionsInitSetsSizeAndDefaults) {
  fdnn_model_options options;
  std::memset(&options, 0xab, sizeof options);
  fdnn_model_options_init(&options, sizeof options);
  EXPECT_EQ(options.struct_size, sizeof(fdnn_model_options));
  EXPECT_EQ(options.max_batch, 1024);
  EXPECT_EQ(options.device, FDNN_DEVICE_CPU);
  EXPECT_EQ(options.cpu_threads, 0);
  EXPECT_EQ(options.cuda_graphs, 1);
  EXPECT_EQ(options.precision, FDNN_PRECISION_FP32);
  EXPECT_EQ(fdnn_model_options_init(nullptr, sizeof options), FDNN_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(fdnn_last_error_message()).find("options is NULL"), std::string::npos);
}

TEST(ApiContract, OptionsInitWritesNoFurtherThanTheCallersStruct) {
  // A program built against an older header passes a shorter struct: bytes past it stay intact.
  const size_t older = offsetof(fdnn_model_options, cuda_graphs);
  fdnn_model_options options;
  std::memset(&options, 0xab, sizeof options);
  ASSERT_EQ(fdnn_model_options_init(&options, older), FDNN_STATUS_OK);
  EXPECT_EQ(options.struct_size, older);
  EXPECT_EQ(options.max_batch, 1024);
  int32_t untouched;
  std::memset(&untouched, 0xab, sizeof untouched);
  EXPECT_EQ(options.cuda_graphs, untouched);
  EXPECT_EQ(fdnn_model_options_init(&options, 4), FDNN_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(fdnn_last_error_message()).find("struct_size"), std::string::npos);

  // Such a shorter struct is accepted at create time, the missing fields taking defaults.
  ASSERT_EQ(fdnn_model_options_init(&options, older), FDNN_STATUS_OK);
  fdnn_model* model = nullptr;
  const std::string spec = tiny_linear_spec();
  ASSERT_EQ(fdnn_model_create_from_spec(spec.data(), spec.size(), &options, &model), FDNN_STATUS_OK)
      << fdnn_last_error_message();
  fdnn_model_destroy(model);
}

TEST(ApiContract, PrecisionValuesArePinned) {
  EXPECT_EQ(FDNN_PRECISION_FP32, 0);
  EXPECT_EQ(FDNN_PRECISION_TF32, 1);
  EXPECT_EQ(FDNN_PRECISION_FP16, 2);
  EXPECT_EQ(FDNN_PRECISION_BF16, 3);
  // precision was appended: the struct of version 0.1 ends where it begins.
  EXPECT_EQ(offsetof(fdnn_model_options, precision),
            offsetof(fdnn_model_options, cuda_graphs) + sizeof(int32_t));
}

TEST(ApiContract, OptionsWithoutPrecisionRunInFp32) {
  // A program built against the header before precision existed: its struct ends at cuda_graphs,
  // and the bytes after it are not its own (here: garbage that must not be read).
  const size_t older = offsetof(fdnn_model_options, precision);
  fdnn_model_options options;
  std::memset(&options, 0xab, sizeof options);
  ASSERT_EQ(fdnn_model_options_init(&options, older), FDNN_STATUS_OK);
  EXPECT_EQ(options.struct_size, older);
  int32_t untouched;
  std::memset(&untouched, 0xab, sizeof untouched);
  int32_t precision_bytes;
  std::memcpy(&precision_bytes, &options.precision, sizeof precision_bytes);
  EXPECT_EQ(precision_bytes, untouched);

  const std::string spec = tiny_linear_spec();
  fdnn_model* model = nullptr;
  ASSERT_EQ(fdnn_model_create_from_spec(spec.data(), spec.size(), &options, &model), FDNN_STATUS_OK)
      << fdnn_last_error_message();
  fdnn_precision precision = FDNN_PRECISION_BF16;
  ASSERT_EQ(fdnn_model_precision(model, &precision), FDNN_STATUS_OK) << fdnn_last_error_message();
  EXPECT_EQ(precision, FDNN_PRECISION_FP32);
  set_tiny_weights(model);
  const float input[] = {1, 0, -1};
  float output[2] = {NAN, NAN};
  ASSERT_EQ(fdnn_model_run(model, 1, input, 3, output, 2), FDNN_STATUS_OK);
  EXPECT_FLOAT_EQ(output[0], -1.5f);
  fdnn_model_destroy(model);

  // A size that ends inside the field holds none of it.
  fdnn_model_options_init(&options, sizeof options);
  const int32_t unknown = 0x7f7f7f7f;
  std::memcpy(&options.precision, &unknown, sizeof options.precision);
  options.struct_size = older + 2;
  ASSERT_EQ(fdnn_model_create_from_spec(spec.data(), spec.size(), &options, &model), FDNN_STATUS_OK)
      << fdnn_last_error_message();
  fdnn_model_destroy(model);
}

TEST(ApiContract, HostIoValuesArePinnedAndAppended) {
  EXPECT_EQ(FDNN_HOST_IO_AUTO, 0);
  EXPECT_EQ(FDNN_HOST_IO_STAGED, 1);
  EXPECT_EQ(FDNN_HOST_IO_MAPPED, 2);
  EXPECT_EQ(offsetof(fdnn_model_options, host_io),
            offsetof(fdnn_model_options, max_weight_bytes) + sizeof(uint64_t));
  fdnn_model_options options;
  std::memset(&options, 0xab, sizeof options);
  fdnn_model_options_init(&options, sizeof options);
  EXPECT_EQ(options.host_io, FDNN_HOST_IO_AUTO);
}

// The CPU backend reads the caller's buffers directly: every valid host_io gives the same exact
// results there, and a context has no host I/O path to report.
TEST(ApiContract, CpuModelsIgnoreHostIoAndReportNoPath) {
  const std::string spec = tiny_linear_spec();
  for (fdnn_host_io host_io : {FDNN_HOST_IO_AUTO, FDNN_HOST_IO_STAGED, FDNN_HOST_IO_MAPPED}) {
    SCOPED_TRACE(static_cast<int>(host_io));
    fdnn_model_options options;
    fdnn_model_options_init(&options, sizeof options);
    options.host_io = host_io;
    fdnn_model* model = nullptr;
    ASSERT_EQ(fdnn_model_create_from_spec(spec.data(), spec.size(), &options, &model),
              FDNN_STATUS_OK)
        << fdnn_last_error_message();
    set_tiny_weights(model);
    const float input[] = {2, 1, 0};
    float output[2] = {NAN, NAN};
    ASSERT_EQ(fdnn_model_run(model, 1, input, 3, output, 2), FDNN_STATUS_OK);
    EXPECT_EQ(output[0], 4.5f);
    EXPECT_EQ(output[1], 12.0f);
    fdnn_context* context = nullptr;
    ASSERT_EQ(fdnn_context_create(model, &context), FDNN_STATUS_OK) << fdnn_last_error_message();
    fdnn_host_io reported = FDNN_HOST_IO_MAPPED;
    EXPECT_EQ(fdnn_context_host_io(context, &reported), FDNN_STATUS_UNSUPPORTED);
    EXPECT_NE(std::string(fdnn_last_error_message()).find("CPU"), std::string::npos)
        << fdnn_last_error_message();
    EXPECT_EQ(reported, FDNN_HOST_IO_MAPPED);  // untouched on failure
    fdnn_context_destroy(context);
    fdnn_model_destroy(model);
  }
  // A struct that ends before host_io (version 0.4's first layout) gets AUTO: the garbage past
  // its end is not read.
  fdnn_model_options options;
  std::memset(&options, 0xab, sizeof options);
  ASSERT_EQ(fdnn_model_options_init(&options, offsetof(fdnn_model_options, host_io)),
            FDNN_STATUS_OK);
  fdnn_model* model = nullptr;
  ASSERT_EQ(fdnn_model_create_from_spec(spec.data(), spec.size(), &options, &model), FDNN_STATUS_OK)
      << fdnn_last_error_message();
  fdnn_model_destroy(model);
}

TEST(ApiContract, CpuModelsReportFp32WhateverPrecisionWasAsked) {
  // The CPU computes in fp32, which meets every precision's bound; the query says so.
  const fdnn_precision asked[] = {FDNN_PRECISION_FP32, FDNN_PRECISION_TF32, FDNN_PRECISION_FP16,
                                  FDNN_PRECISION_BF16};
  const std::string spec = tiny_linear_spec();
  for (fdnn_precision precision : asked) {
    SCOPED_TRACE(static_cast<int>(precision));
    fdnn_model_options options;
    fdnn_model_options_init(&options, sizeof options);
    options.precision = precision;
    fdnn_model* model = nullptr;
    ASSERT_EQ(fdnn_model_create_from_spec(spec.data(), spec.size(), &options, &model),
              FDNN_STATUS_OK)
        << fdnn_last_error_message();
    fdnn_precision actual = FDNN_PRECISION_BF16;
    ASSERT_EQ(fdnn_model_precision(model, &actual), FDNN_STATUS_OK) << fdnn_last_error_message();
    EXPECT_EQ(actual, FDNN_PRECISION_FP32);
    // The same after the first run froze the model.
    set_tiny_weights(model);
    const float input[] = {2, 1, 0};
    float output[2] = {NAN, NAN};
    ASSERT_EQ(fdnn_model_run(model, 1, input, 3, output, 2), FDNN_STATUS_OK);
    EXPECT_FLOAT_EQ(output[0], 4.5f);  // exact fp32
    EXPECT_FLOAT_EQ(output[1], 12.0f);
    actual = FDNN_PRECISION_BF16;
    ASSERT_EQ(fdnn_model_precision(model, &actual), FDNN_STATUS_OK);
    EXPECT_EQ(actual, FDNN_PRECISION_FP32);
    fdnn_model_destroy(model);
  }
}

TEST(ApiContract, InfoStructsAreWrittenNoFurtherThanTheCallersSize) {
  fdnn_model* model = make_tiny_model();
  struct {
    fdnn_layer_info info;
    unsigned char guard[16];
  } padded;
  std::memset(&padded, 0xcd, sizeof padded);
  padded.info.struct_size = offsetof(fdnn_layer_info, parameter_count) + sizeof(int64_t);
  ASSERT_EQ(fdnn_model_layer_info(model, 0, &padded.info), FDNN_STATUS_OK);
  for (unsigned char byte : padded.guard) EXPECT_EQ(byte, 0xcd);
  fdnn_memory_info memory;
  memory.struct_size = 8;
  EXPECT_EQ(fdnn_model_memory_info(model, &memory), FDNN_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(fdnn_last_error_message()).find("struct_size"), std::string::npos);
  fdnn_model_destroy(model);
}

TEST(ApiContract, TinyLinearRunsWithHandComputedResult) {
  fdnn_model* model = make_tiny_model();
  set_tiny_weights(model);
  // y0 = W x0 + b with x0 = [1, 0, -1]: [1 - 3 + 0.5, 4 - 6 - 1] = [-1.5, -3]
  // y1 with x1 = [2, 1, 0]: [2 + 2 + 0.5, 8 + 5 - 1] = [4.5, 12]
  const float input[] = {1, 0, -1, 2, 1, 0};
  float output[4] = {NAN, NAN, NAN, NAN};
  ASSERT_EQ(fdnn_model_run(model, 2, input, 6, output, 4), FDNN_STATUS_OK)
      << fdnn_last_error_message();
  EXPECT_FLOAT_EQ(output[0], -1.5f);
  EXPECT_FLOAT_EQ(output[1], -3.0f);
  EXPECT_FLOAT_EQ(output[2], 4.5f);
  EXPECT_FLOAT_EQ(output[3], 12.0f);
  fdnn_model_destroy(model);
}

TEST(ApiContract, QueriesDescribeTheModel) {
  fdnn_model* model = make_tiny_model(16);
  fdnn_shape shape;
  ASSERT_EQ(fdnn_model_input_shape(model, &shape), FDNN_STATUS_OK);
  ASSERT_EQ(shape.rank, 1);
  EXPECT_EQ(shape.dims[0], 3);
  ASSERT_EQ(fdnn_model_output_shape(model, &shape), FDNN_STATUS_OK);
  ASSERT_EQ(shape.rank, 1);
  EXPECT_EQ(shape.dims[0], 2);
  int64_t max_batch = 0;
  ASSERT_EQ(fdnn_model_max_batch(model, &max_batch), FDNN_STATUS_OK);
  EXPECT_EQ(max_batch, 16);
  fdnn_device device = FDNN_DEVICE_AUTO;
  ASSERT_EQ(fdnn_model_device(model, &device), FDNN_STATUS_OK);
  EXPECT_EQ(device, FDNN_DEVICE_CPU);

  // Memory is known before the weights are loaded and before any context exists.
  fdnn_memory_info memory{};
  memory.struct_size = sizeof memory;
  ASSERT_EQ(fdnn_model_memory_info(model, &memory), FDNN_STATUS_OK) << fdnn_last_error_message();
  EXPECT_EQ(memory.parameter_count, 8);
  EXPECT_EQ(memory.weight_bytes, 8 * sizeof(float));

  int32_t count = 0;
  ASSERT_EQ(fdnn_model_layer_count(model, &count), FDNN_STATUS_OK);
  ASSERT_EQ(count, 1);
  fdnn_layer_info layer{};
  layer.struct_size = sizeof layer;
  ASSERT_EQ(fdnn_model_layer_info(model, 0, &layer), FDNN_STATUS_OK);
  EXPECT_STREQ(layer.name, "fc");
  EXPECT_STREQ(layer.type, "Linear");
  EXPECT_EQ(layer.parameter_count, 8);
  EXPECT_EQ(layer.output_shape.rank, 1);
  EXPECT_EQ(layer.output_shape.dims[0], 2);
  fdnn_model_destroy(model);
}

TEST(ApiContract, ContextMemoryGrowsWithMaxBatch) {
  fdnn_model* small = make_seed_mlp(1, 4);
  fdnn_model* large = make_seed_mlp(1, 400);
  fdnn_memory_info a{}, b{};
  a.struct_size = b.struct_size = sizeof(fdnn_memory_info);
  ASSERT_EQ(fdnn_model_memory_info(small, &a), FDNN_STATUS_OK);
  ASSERT_EQ(fdnn_model_memory_info(large, &b), FDNN_STATUS_OK);
  // The seed MLP keeps at most 128 + 64 floats per sample of intermediates between its layers.
  EXPECT_GT(b.context_bytes, a.context_bytes);
  EXPECT_GE(b.context_bytes, 400u * 64 * sizeof(float));
  EXPECT_EQ(a.parameter_count, 100 * 128 + 128 + 128 * 64 + 64 + 64 * 10 + 10);
  fdnn_model_destroy(small);
  fdnn_model_destroy(large);
}

TEST(ApiContract, WeightsFreezeAtFirstRun) {
  fdnn_model* model = make_tiny_model();
  set_tiny_weights(model);
  const float input[] = {1, 2, 3};
  float output[2];
  ASSERT_EQ(fdnn_model_run(model, 1, input, 3, output, 2), FDNN_STATUS_OK);
  const float bias[] = {0, 0};
  const int64_t shape[] = {2};
  EXPECT_EQ(fdnn_model_set_weight(model, "fc.bias", FDNN_DTYPE_FLOAT32, bias, shape, 1),
            FDNN_STATUS_INVALID_STATE);
  EXPECT_NE(std::string(fdnn_last_error_message()).find("frozen"), std::string::npos);
  fdnn_model_destroy(model);
}

TEST(ApiContract, ContextOutlivesItsModel) {
  fdnn_model* model = make_tiny_model();
  set_tiny_weights(model);
  fdnn_context* context = nullptr;
  ASSERT_EQ(fdnn_context_create(model, &context), FDNN_STATUS_OK) << fdnn_last_error_message();
  fdnn_model_destroy(model);
  const float input[] = {1, 0, -1};
  float output[2];
  ASSERT_EQ(fdnn_context_run(context, 1, input, 3, output, 2), FDNN_STATUS_OK);
  EXPECT_FLOAT_EQ(output[0], -1.5f);
  EXPECT_FLOAT_EQ(output[1], -3.0f);
  fdnn_context_destroy(context);
}

TEST(ApiContract, FailedCallLeavesOutputUntouched) {
  fdnn_model* sentinel = reinterpret_cast<fdnn_model*>(0x1234);
  fdnn_model* model = sentinel;
  const std::string bad = "{ not json";
  EXPECT_EQ(fdnn_model_create_from_spec(bad.data(), bad.size(), nullptr, &model),
            FDNN_STATUS_PARSE_ERROR);
  EXPECT_EQ(model, sentinel);
  fdnn_model* tiny = make_tiny_model();
  fdnn_shape shape;
  shape.rank = 77;
  int32_t count = -5;
  EXPECT_EQ(fdnn_model_layer_info(tiny, 3, nullptr), FDNN_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(fdnn_model_layer_count(nullptr, &count), FDNN_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(count, -5);
  EXPECT_EQ(shape.rank, 77);
  fdnn_model_destroy(tiny);
}

TEST(ApiContract, OptionsAreChecked) {
  const std::string spec = tiny_linear_spec();
  fdnn_model* model = nullptr;
  fdnn_model_options options;

  fdnn_model_options_init(&options, sizeof options);
  options.max_batch = 0;
  EXPECT_EQ(fdnn_model_create_from_spec(spec.data(), spec.size(), &options, &model),
            FDNN_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(fdnn_last_error_message()).find("max_batch"), std::string::npos);

  fdnn_model_options_init(&options, sizeof options);
  options.struct_size = 0;
  EXPECT_EQ(fdnn_model_create_from_spec(spec.data(), spec.size(), &options, &model),
            FDNN_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(fdnn_last_error_message()).find("struct_size"), std::string::npos);

  fdnn_model_options_init(&options, sizeof options);
  options.cpu_threads = -1;
  EXPECT_EQ(fdnn_model_create_from_spec(spec.data(), spec.size(), &options, &model),
            FDNN_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(fdnn_last_error_message()).find("cpu_threads"), std::string::npos);

  fdnn_model_options_init(&options, sizeof options);
  const int32_t unknown_device = 42;  // what a C caller can pass
  std::memcpy(&options.device, &unknown_device, sizeof options.device);
  EXPECT_EQ(fdnn_model_create_from_spec(spec.data(), spec.size(), &options, &model),
            FDNN_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(fdnn_last_error_message()).find("device"), std::string::npos);
  EXPECT_EQ(model, nullptr);

  int32_t gpus = -1;
  ASSERT_EQ(fdnn_cuda_device_count(&gpus), FDNN_STATUS_OK);
  fdnn_model_options_init(&options, sizeof options);
  options.device = FDNN_DEVICE_AUTO;
  ASSERT_EQ(fdnn_model_create_from_spec(spec.data(), spec.size(), &options, &model),
            FDNN_STATUS_OK);
  fdnn_device device;
  ASSERT_EQ(fdnn_model_device(model, &device), FDNN_STATUS_OK);
  EXPECT_EQ(device, gpus > 0 ? FDNN_DEVICE_CUDA : FDNN_DEVICE_CPU);
  fdnn_model_destroy(model);
}

TEST(ApiContract, ErrorMessagesAreThreadLocal) {
  fdnn_model* model = nullptr;
  EXPECT_EQ(fdnn_model_create_from_file("/no/such/model.json", nullptr, &model),
            FDNN_STATUS_IO_ERROR);
  const std::string mine = fdnn_last_error_message();
  std::string theirs;
  std::thread other([&] {
    theirs = fdnn_last_error_message();  // this thread has had no failure
    fdnn_model_max_batch(nullptr, nullptr);
  });
  other.join();
  EXPECT_EQ(theirs, "");
  EXPECT_EQ(std::string(fdnn_last_error_message()), mine);
  EXPECT_NE(mine.find("/no/such/model.json"), std::string::npos);
}

// 8 threads x 1000 runs on one model through fdnn_model_run and through one context per thread:
// every result equals the single-thread result for the same input, bit for bit.
class ConcurrentRuns : public ::testing::TestWithParam<bool> {};

TEST_P(ConcurrentRuns, EveryResultEqualsTheSingleThreadResult) {
  const bool per_thread_context = GetParam();
  fdnn_model* model = make_seed_mlp(7, 16, 1);
  constexpr int kThreads = 8, kRuns = 1000, kInputs = 5;
  std::mt19937 random(11);
  std::vector<std::vector<float>> inputs, expected;
  std::vector<int64_t> batches;
  for (int i = 0; i < kInputs; ++i) {
    const int64_t batch = 1 + 3 * i;
    batches.push_back(batch);
    inputs.push_back(random_floats(static_cast<size_t>(batch * 100), random));
    expected.emplace_back(static_cast<size_t>(batch * 10));
    ASSERT_EQ(fdnn_model_run(model, batch, inputs[i].data(), inputs[i].size(), expected[i].data(),
                             expected[i].size()),
              FDNN_STATUS_OK)
        << fdnn_last_error_message();
  }
  std::atomic<int> mismatches{0}, failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      fdnn_context* context = nullptr;
      if (per_thread_context && fdnn_context_create(model, &context) != FDNN_STATUS_OK) {
        ++failures;
        return;
      }
      std::vector<float> output;
      for (int run = 0; run < kRuns; ++run) {
        const int i = (run + t) % kInputs;
        output.assign(expected[i].size(), NAN);
        const fdnn_status status =
            per_thread_context ? fdnn_context_run(context, batches[i], inputs[i].data(),
                                                  inputs[i].size(), output.data(), output.size())
                               : fdnn_model_run(model, batches[i], inputs[i].data(),
                                                inputs[i].size(), output.data(), output.size());
        if (status != FDNN_STATUS_OK) ++failures;
        if (std::memcmp(output.data(), expected[i].data(), output.size() * sizeof(float)) != 0) {
          ++mismatches;
        }
      }
      fdnn_context_destroy(context);
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(mismatches.load(), 0);
  fdnn_model_destroy(model);
}

INSTANTIATE_TEST_SUITE_P(PoolAndContexts, ConcurrentRuns, ::testing::Values(false, true),
                         [](const auto& info) {
                           return info.param ? "PerThreadContext" : "ModelPool";
                         });

TEST(ApiContract, CpuThreadsDoNotChangeResults) {
  // The same weights run with 1 and 4 threads per call: identical results for a large batch.
  fdnn_model* single = make_seed_mlp(3, 2048, 1);
  fdnn_model* multi = make_seed_mlp(3, 2048, 4);
  std::mt19937 random(5);
  for (int64_t batch : {1, 3, 257, 2048}) {
    const std::vector<float> input = random_floats(static_cast<size_t>(batch * 100), random);
    std::vector<float> a(static_cast<size_t>(batch * 10), NAN), b(a.size(), NAN);
    ASSERT_EQ(fdnn_model_run(single, batch, input.data(), input.size(), a.data(), a.size()),
              FDNN_STATUS_OK);
    ASSERT_EQ(fdnn_model_run(multi, batch, input.data(), input.size(), b.data(), b.size()),
              FDNN_STATUS_OK);
    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float))) << "batch " << batch;
  }
  fdnn_model_destroy(single);
  fdnn_model_destroy(multi);
}

TEST(ApiContract, LayerNormWithoutBias) {
  // LayerNorm(2, bias=False): x = [1, 3] has mean 2 and variance 1, so
  // y = [(1 - 2), (3 - 2)] / sqrt(1 + eps) * gamma with gamma = [2, 3].
  const std::string spec = R"({"fusednn": 1, "input": {"shape": [2]}, "layers": [
      {"type": "LayerNorm", "name": "ln", "normalized_shape": 2, "bias": false}]})";
  fdnn_model* model = nullptr;
  ASSERT_EQ(fdnn_model_create_from_spec(spec.data(), spec.size(), nullptr, &model), FDNN_STATUS_OK)
      << fdnn_last_error_message();
  const float gamma[] = {2, 3};
  const int64_t shape[] = {2};
  ASSERT_EQ(fdnn_model_set_weight(model, "ln.weight", FDNN_DTYPE_FLOAT32, gamma, shape, 1),
            FDNN_STATUS_OK)
      << fdnn_last_error_message();
  const float input[] = {1, 3};
  float output[2] = {NAN, NAN};
  ASSERT_EQ(fdnn_model_run(model, 1, input, 2, output, 2), FDNN_STATUS_OK)
      << fdnn_last_error_message();
  const float rstd = 1.0f / std::sqrt(1.0f + 1e-5f);
  EXPECT_NEAR(output[0], -2.0f * rstd, 1e-6f);
  EXPECT_NEAR(output[1], 3.0f * rstd, 1e-6f);
  fdnn_model_destroy(model);
}

TEST(ApiContract, MemoryInfoIsStableAcrossQueriesAndRuns) {
  fdnn_model* model = make_seed_mlp(2, 32);
  fdnn_memory_info before{}, again{}, after{};
  before.struct_size = again.struct_size = after.struct_size = sizeof(fdnn_memory_info);
  ASSERT_EQ(fdnn_model_memory_info(model, &before), FDNN_STATUS_OK);
  ASSERT_EQ(fdnn_model_memory_info(model, &again), FDNN_STATUS_OK);
  std::vector<float> input(100, 0.5f), output(10);
  ASSERT_EQ(fdnn_model_run(model, 1, input.data(), 100, output.data(), 10), FDNN_STATUS_OK);
  ASSERT_EQ(fdnn_model_memory_info(model, &after), FDNN_STATUS_OK);
  EXPECT_EQ(before.context_bytes, again.context_bytes);
  EXPECT_EQ(before.context_bytes, after.context_bytes);
  EXPECT_EQ(before.weight_bytes, after.weight_bytes);
  fdnn_model_destroy(model);
}
