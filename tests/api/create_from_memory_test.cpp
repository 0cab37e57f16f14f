// SPDX-License-Identifier: Apache-2.0
// fdnn_model_create_from_memory: a bundle's bytes give the model its file gives, and bad bytes
// (empty, truncated, garbage, no spec, NULL) return the documented statuses with messages.
#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>

#include "api_test_support.hpp"

using namespace fusednn_test;

namespace {

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << path;
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

int64_t per_sample(fdnn_status (*query)(const fdnn_model*, fdnn_shape*), const fdnn_model* model) {
  fdnn_shape shape{};
  EXPECT_EQ(query(model, &shape), FDNN_STATUS_OK) << fdnn_last_error_message();
  int64_t count = 1;
  for (int32_t i = 0; i < shape.rank; ++i) count *= shape.dims[i];
  return count;
}

std::vector<float> run(fdnn_model* model, int64_t batch, const std::vector<float>& input) {
  const int64_t out_count = batch * per_sample(fdnn_model_output_shape, model);
  std::vector<float> output(static_cast<size_t>(out_count), -12345.0f);
  EXPECT_EQ(fdnn_model_run(model, batch, input.data(), input.size(), output.data(), output.size()),
            FDNN_STATUS_OK)
      << fdnn_last_error_message();
  return output;
}

class BundleFromMemory : public ::testing::TestWithParam<const char*> {};

TEST_P(BundleFromMemory, GivesTheSameOutputsAsTheFile) {
  const std::string path = std::string(FUSEDNN_TEST_FIXTURES_DIR) + "/" + GetParam();
  fdnn_model_options options;
  fdnn_model_options_init(&options, sizeof options);
  options.max_batch = 4;
  options.cpu_threads = 1;

  fdnn_model* from_file = nullptr;
  ASSERT_EQ(fdnn_model_create_from_file(path.c_str(), &options, &from_file), FDNN_STATUS_OK)
      << fdnn_last_error_message();

  // The caller's copy is overwritten and freed before the model runs: the library keeps its own.
  fdnn_model* from_memory = nullptr;
  {
    const std::string file_bytes = read_bytes(path);
    auto buffer = std::make_unique<unsigned char[]>(file_bytes.size());
    std::copy(file_bytes.begin(), file_bytes.end(), buffer.get());
    ASSERT_EQ(
        fdnn_model_create_from_memory(buffer.get(), file_bytes.size(), &options, &from_memory),
        FDNN_STATUS_OK)
        << fdnn_last_error_message();
    std::fill(buffer.get(), buffer.get() + file_bytes.size(), static_cast<unsigned char>(0xA5));
  }
  ASSERT_EQ(fdnn_model_validate(from_memory), FDNN_STATUS_OK) << fdnn_last_error_message();
  ASSERT_EQ(per_sample(fdnn_model_input_shape, from_memory),
            per_sample(fdnn_model_input_shape, from_file));

  std::mt19937 random(7);
  for (int64_t batch : {1, 4}) {
    const std::vector<float> input = random_floats(
        static_cast<size_t>(batch * per_sample(fdnn_model_input_shape, from_file)), random);
    const std::vector<float> expected = run(from_file, batch, input);
    const std::vector<float> actual = run(from_memory, batch, input);
    ASSERT_EQ(actual.size(), expected.size());
    // Bit for bit: the same computation, NaN included (tiny_mlp's BatchNorm has a negative
    // running variance, so some of its outputs are NaN).
    for (size_t i = 0; i < expected.size(); ++i) {
      ASSERT_EQ(std::memcmp(&actual[i], &expected[i], sizeof(float)), 0)
          << GetParam() << " batch " << batch << " element " << i << ": " << actual[i]
          << " against " << expected[i];
    }
  }
  fdnn_model_destroy(from_memory);
  fdnn_model_destroy(from_file);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, BundleFromMemory,
                         ::testing::Values("formats/tiny_mlp.safetensors",
                                           "golden/residual_block/model.safetensors",
                                           "golden/batchnorm_cnn/model.safetensors"));

// Expects status and a message holding every one of `contains`; the model pointer stays as it was.
void expect_refused(const void* data, size_t size, fdnn_status status,
                    const std::vector<std::string>& contains) {
  fdnn_model* const sentinel = reinterpret_cast<fdnn_model*>(0x1);
  fdnn_model* model = sentinel;
  ASSERT_EQ(fdnn_model_create_from_memory(data, size, nullptr, &model), status)
      << "size " << size << ": " << fdnn_last_error_message();
  EXPECT_EQ(model, sentinel);
  const std::string message = fdnn_last_error_message();
  for (const std::string& part : contains) {
    EXPECT_NE(message.find(part), std::string::npos) << "size " << size << ": " << message;
  }
}

TEST(CreateFromMemory, SpecBytesGiveAModelWithoutWeights) {
  const std::string spec = tiny_linear_spec();
  fdnn_model* model = nullptr;
  ASSERT_EQ(fdnn_model_create_from_memory(spec.data(), spec.size(), nullptr, &model),
            FDNN_STATUS_OK)
      << fdnn_last_error_message();
  EXPECT_EQ(fdnn_model_validate(model), FDNN_STATUS_WEIGHT_MISMATCH);
  set_tiny_weights(model);
  const float input[] = {1, 1, 1};
  float output[2] = {};
  ASSERT_EQ(fdnn_model_run(model, 1, input, 3, output, 2), FDNN_STATUS_OK);
  EXPECT_EQ(output[0], 6.5f);   // 1 + 2 + 3 + 0.5
  EXPECT_EQ(output[1], 14.0f);  // 4 + 5 + 6 - 1
  fdnn_model_destroy(model);
}

TEST(CreateFromMemory, EmptyIsAParseError) {
  const char byte = '{';
  expect_refused(&byte, 0, FDNN_STATUS_PARSE_ERROR, {"<memory>", "empty"});
}

TEST(CreateFromMemory, NullDataIsAnInvalidArgument) {
  expect_refused(nullptr, 0, FDNN_STATUS_INVALID_ARGUMENT, {"data is NULL"});
  expect_refused(nullptr, 100, FDNN_STATUS_INVALID_ARGUMENT, {"data is NULL"});
}

TEST(CreateFromMemory, EveryTruncationOfABundleIsAParseError) {
  const std::string bytes =
      read_bytes(std::string(FUSEDNN_TEST_FIXTURES_DIR) + "/formats/tiny_mlp.safetensors");
  ASSERT_GT(bytes.size(), 100u);
  for (size_t size = 1; size < bytes.size(); ++size) {
    expect_refused(bytes.data(), size, FDNN_STATUS_PARSE_ERROR, {"<memory>"});
    if (HasFatalFailure()) return;
  }
}

TEST(CreateFromMemory, GarbageIsAParseError) {
  std::mt19937 random(11);
  for (size_t size : {1, 7, 8, 9, 64, 4096}) {
    std::vector<unsigned char> bytes(size);
    for (auto& b : bytes) b = static_cast<unsigned char>(random());
    bytes[0] = 'x';  // neither '{' nor a plausible header length
    expect_refused(bytes.data(), bytes.size(), FDNN_STATUS_PARSE_ERROR, {"<memory>"});
  }
}

TEST(CreateFromMemory, SafetensorsWithoutASpecIsAnInvalidModel) {
  const std::string bytes =
      read_bytes(std::string(FUSEDNN_TEST_FIXTURES_DIR) + "/formats/dtypes.safetensors");
  expect_refused(bytes.data(), bytes.size(), FDNN_STATUS_INVALID_MODEL,
                 {"<memory>", "fusednn.spec"});
}

TEST(CreateFromMemory, BadOptionsAreRefused) {
  const std::string spec = tiny_linear_spec();
  fdnn_model_options options;
  fdnn_model_options_init(&options, sizeof options);
  options.max_batch = 0;
  fdnn_model* model = nullptr;
  EXPECT_EQ(fdnn_model_create_from_memory(spec.data(), spec.size(), &options, &model),
            FDNN_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(fdnn_last_error_message()).find("max_batch"), std::string::npos)
      << fdnn_last_error_message();
  EXPECT_EQ(model, nullptr);
}

}  // namespace
