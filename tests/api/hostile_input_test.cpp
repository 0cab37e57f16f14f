// SPDX-License-Identifier: Apache-2.0
// Input written to hurt: files nested to exhaust the stack, duplicate keys, FIFOs, sizes that
// overflow, caller shapes that do not match their buffers, and small files that ask for a lot of
// memory. Each returns its documented status with a message naming the culprit, never crashes,
// blocks or over-reads (this suite also runs under ASan/UBSan, preset "asan").
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <future>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "../small_stack.hpp"
#include "api_test_support.hpp"

using namespace fusednn_test;

namespace {

// The spec text as a JSON string's contents (the specs here hold no backslashes or newlines).
std::string json_string_contents(const std::string& text) {
  std::string escaped;
  for (char c : text) {
    if (c == '"') escaped += '\\';
    escaped += c;
  }
  return escaped;
}

// A bundle: the spec in the metadata, then `tensors_header` entries over `data`.
std::string bundle_bytes(const std::string& spec, const std::string& tensors_header,
                         const std::string& data) {
  const std::string header = R"({"__metadata__": {"fusednn.spec": ")" + json_string_contents(spec) +
                             "\"}" + (tensors_header.empty() ? "" : ", " + tensors_header) + "}";
  return safetensors_bytes(header, data);
}

void expect_message_has(const std::vector<std::string>& fragments) {
  const std::string message = fdnn_last_error_message();
  for (const std::string& fragment : fragments) {
    EXPECT_NE(message.find(fragment), std::string::npos)
        << "'" << fragment << "' not in: " << message;
  }
}

fdnn_model_options options_with(int64_t max_batch) {
  fdnn_model_options options;
  fdnn_model_options_init(&options, sizeof options);
  options.max_batch = max_batch;
  return options;
}

// Linear 4 -> 3: fc.weight is [3, 4], fc.bias [3].
const char* kLinear4To3 =
    R"({"fusednn": 1, "name": "l43", "input": {"shape": [4]}, "layers": [)"
    R"({"type": "Linear", "name": "fc", "in_features": 4, "out_features": 3}]})";

fdnn_model* create(const std::string& spec, const fdnn_model_options* options = nullptr) {
  fdnn_model* model = nullptr;
  EXPECT_EQ(fdnn_model_create_from_spec(spec.data(), spec.size(), options, &model), FDNN_STATUS_OK)
      << fdnn_last_error_message();
  return model;
}

// ---- 1. Nesting

// A tensor shape nested 70,000 deep (140 KB) in a bundle and in a weights file, each opened on a
// 256 KiB stack: any recursion over the nesting (a dump() in an error path) overflows it.
TEST(HostileInput, DeeplyNestedShapeOnASmallStack) {
  TempDir dir;
  const size_t depth = 70000;
  const std::string nested = std::string(depth, '[') + std::string(depth, ']');
  const std::string entry =
      R"("fc.weight": {"dtype": "F32", "data_offsets": [0, 48], "shape": )" + nested + "}";
  const std::string bundle =
      dir.write("deep_bundle.safetensors", bundle_bytes(kLinear4To3, entry, std::string(48, '\0')));
  const std::string weights = dir.write(
      "deep_weights.safetensors", safetensors_bytes("{" + entry + "}", std::string(48, '\0')));
  fdnn_model* spec_model = create(kLinear4To3);
  fusednn::testing::run_on_small_stack([&] {
    fdnn_model* model = nullptr;
    EXPECT_EQ(fdnn_model_create_from_file(bundle.c_str(), nullptr, &model),
              FDNN_STATUS_PARSE_ERROR);
    EXPECT_EQ(model, nullptr);
    expect_message_has({"deep_bundle.safetensors", "nested deeper", "fc.weight"});
    EXPECT_EQ(fdnn_model_load_weights(spec_model, weights.c_str()), FDNN_STATUS_PARSE_ERROR);
    expect_message_has({"deep_weights.safetensors", "nested deeper", "fc.weight"});
  });
  fdnn_model_destroy(spec_model);
}

// ---- 5. Duplicate keys: one file must not carry two specs or two values for one tensor.

TEST(HostileInput, DuplicateKeysInASafetensorsHeader) {
  TempDir dir;
  const std::string twice_spec =
      R"({"__metadata__": {"fusednn.spec": "{}"}, "__metadata__": {"fusednn.spec": ")" +
      json_string_contents(kLinear4To3) + "\"}}";
  const std::string bundle = dir.write("two_specs.safetensors", safetensors_bytes(twice_spec, ""));
  fdnn_model* model = nullptr;
  EXPECT_EQ(fdnn_model_create_from_file(bundle.c_str(), nullptr, &model), FDNN_STATUS_PARSE_ERROR);
  expect_message_has({"two_specs.safetensors", "'__metadata__' appears twice"});

  const std::string bias = R"("fc.bias": {"dtype": "F32", "shape": [3], "data_offsets": [0, 12]})";
  const std::string weights =
      dir.write("two_biases.safetensors",
                safetensors_bytes("{" + bias + ", " + bias + "}", float_bytes({1, 2, 3})));
  fdnn_model* spec_model = create(kLinear4To3);
  EXPECT_EQ(fdnn_model_load_weights(spec_model, weights.c_str()), FDNN_STATUS_PARSE_ERROR);
  expect_message_has({"two_biases.safetensors", "'fc.bias' appears twice"});
  fdnn_model_destroy(spec_model);
}

// ---- 6. Files that are not regular files

TEST(HostileInput, FifoPathIsRefusedWithoutBlocking) {
  TempDir dir;
  const std::string fifo = dir.file("model.safetensors");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  fdnn_model* spec_model = create(kLinear4To3);
  auto done = std::async(std::launch::async, [&] {
    fdnn_model* model = nullptr;
    EXPECT_EQ(fdnn_model_create_from_file(fifo.c_str(), nullptr, &model), FDNN_STATUS_IO_ERROR);
    expect_message_has({fifo, "FIFO"});
    EXPECT_EQ(fdnn_model_load_weights(spec_model, fifo.c_str()), FDNN_STATUS_IO_ERROR);
    expect_message_has({fifo, "FIFO"});
  });
  // A blocked reader is released by opening the FIFO for writing; the test then fails.
  if (done.wait_for(std::chrono::seconds(20)) != std::future_status::ready) {
    ADD_FAILURE() << "a FIFO path blocked";
    std::ofstream unblock(fifo);
  }
  done.wait();
  fdnn_model_destroy(spec_model);
}

// ---- 2. max_batch and sizes that overflow

TEST(HostileInput, MaxBatchBeyondTheLimitIsAnInvalidArgument) {
  const std::string spec = kLinear4To3;
  for (const int64_t max_batch :
       {int64_t{1} << 59, std::numeric_limits<int64_t>::max(), int64_t{FDNN_MAX_BATCH_LIMIT} + 1}) {
    const fdnn_model_options options = options_with(max_batch);
    fdnn_model* model = nullptr;
    EXPECT_EQ(fdnn_model_create_from_spec(spec.data(), spec.size(), &options, &model),
              FDNN_STATUS_INVALID_ARGUMENT)
        << max_batch;
    EXPECT_EQ(model, nullptr);
    expect_message_has({"options.max_batch", std::to_string(max_batch), "FDNN_MAX_BATCH_LIMIT"});
  }
  // The limit itself is accepted (nothing is allocated until the model is prepared).
  const fdnn_model_options at_limit = options_with(FDNN_MAX_BATCH_LIMIT);
  fdnn_model* model = create(spec, &at_limit);
  int64_t max_batch = 0;
  ASSERT_EQ(fdnn_model_max_batch(model, &max_batch), FDNN_STATUS_OK);
  EXPECT_EQ(max_batch, FDNN_MAX_BATCH_LIMIT);
  fdnn_model_destroy(model);
}

// 2^40 floats per sample (the most a spec allows) times the largest max_batch overflows any
// size: with the workspace limit off, preparing the model is OUT_OF_MEMORY naming max_batch,
// not a wrapped size and a write through a short buffer.
TEST(HostileInput, WorkspaceSizeThatOverflowsIsOutOfMemory) {
  const std::string spec =
      R"({"fusednn": 1, "name": "huge", "input": {"shape": [1048576, 1048576]},)"
      R"( "layers": [{"type": "ReLU", "name": "r"}, {"type": "Tanh", "name": "t", "inputs": ["input"]},)"
      R"( {"type": "Add", "name": "sum", "inputs": ["r", "t"]}]})";
  fdnn_model_options options = options_with(FDNN_MAX_BATCH_LIMIT);
  options.max_workspace_bytes = 0;
  fdnn_model* model = create(spec, &options);
  fdnn_context* context = nullptr;
  EXPECT_EQ(fdnn_context_create(model, &context), FDNN_STATUS_OUT_OF_MEMORY);
  EXPECT_EQ(context, nullptr);
  expect_message_has({"options.max_batch", "overflows"});
  fdnn_memory_info info{};
  info.struct_size = sizeof info;
  EXPECT_EQ(fdnn_model_memory_info(model, &info), FDNN_STATUS_OUT_OF_MEMORY);
  expect_message_has({"options.max_batch", "overflows"});
  const float input[1] = {0};
  float output[1];
  EXPECT_EQ(fdnn_model_run(model, 1, input, 1, output, 1), FDNN_STATUS_OUT_OF_MEMORY);
  fdnn_model_destroy(model);
}

// ---- 3. set_weight checks the caller's name and shape before reading its buffer

TEST(HostileInput, SetWeightChecksTheShapeBeforeReading) {
  fdnn_model* model = create(kLinear4To3);
  // Exactly 12 floats on the heap: ASan reports any read past them.
  const std::unique_ptr<float[]> twelve(new float[12]());
  struct Case {
    const char* name;
    std::vector<int64_t> shape;
    std::vector<std::string> fragments;
  };
  const Case cases[] = {
      {"fc.weight", {4, 4}, {"'fc.weight'", "[4, 4]", "expects [3, 4]"}},
      {"fc.weight", {int64_t{1} << 24}, {"'fc.weight'", "[16777216]", "expects [3, 4]"}},
      {"fc.weight", {int64_t{1} << 38}, {"'fc.weight'", "[274877906944]", "expects [3, 4]"}},
      {"fc.weight",
       {int64_t{1} << 32, int64_t{1} << 32},
       {"'fc.weight'", "[4294967296, 4294967296]", "expects [3, 4]"}},
      {"fc.weight", {int64_t{1} << 62, int64_t{1} << 62, 4}, {"'fc.weight'", "expects [3, 4]"}},
      {"fc9.weight", {int64_t{1} << 38}, {"unexpected tensor 'fc9.weight'", "fc.weight"}},
      {"fc.weight", {4, 3}, {"'fc.weight'", "looks transposed"}},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(fdnn_model_set_weight(model, c.name, FDNN_DTYPE_FLOAT32, twelve.get(), c.shape.data(),
                                    static_cast<int32_t>(c.shape.size())),
              FDNN_STATUS_WEIGHT_MISMATCH)
        << c.name << " rank " << c.shape.size();
    expect_message_has(c.fragments);
    // The same for 16-bit data: 12 halves are 24 bytes.
    EXPECT_EQ(fdnn_model_set_weight(model, c.name, FDNN_DTYPE_FLOAT16, twelve.get(), c.shape.data(),
                                    static_cast<int32_t>(c.shape.size())),
              FDNN_STATUS_WEIGHT_MISMATCH);
  }
  // The right shape reads exactly the 12 floats.
  const int64_t right[] = {3, 4};
  EXPECT_EQ(fdnn_model_set_weight(model, "fc.weight", FDNN_DTYPE_FLOAT32, twelve.get(), right, 2),
            FDNN_STATUS_OK)
      << fdnn_last_error_message();
  fdnn_model_destroy(model);
}

// ---- 7. Limits a caller sets

// A few hundred bytes in the issue's form: a 1x1 convolution with padding 300 turns one value into
// 601 x 601 per sample, and the pooling after it keeps that in the scratch memory, so the default
// max_batch asks for about 1.5 GB.
const char* kPaddedConv =
    R"({"fusednn": 1, "name": "padded", "input": {"shape": [1, 1, 1]}, "layers": [)"
    R"({"type": "Conv2d", "name": "c", "in_channels": 1, "out_channels": 1, "kernel_size": 1,)"
    R"( "padding": 300}, {"type": "MaxPool2d", "name": "p", "kernel_size": 1}]})";

std::string padded_conv_bundle(const TempDir& dir) {
  const std::string tensors =
      R"("c.weight": {"dtype": "F32", "shape": [1, 1, 1, 1], "data_offsets": [0, 4]},)"
      R"( "c.bias": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]})";
  return dir.write("padded.safetensors", bundle_bytes(kPaddedConv, tensors, float_bytes({2, 1})));
}

TEST(HostileInput, WorkspaceLimitRefusesASmallFileThatAsksForMuch) {
  TempDir dir;
  const std::string path = padded_conv_bundle(dir);
  const int64_t per_sample = 601 * 601;

  // Default limits: the model loads and reports its cost before anything runs.
  fdnn_model* model = nullptr;
  ASSERT_EQ(fdnn_model_create_from_file(path.c_str(), nullptr, &model), FDNN_STATUS_OK)
      << fdnn_last_error_message();
  fdnn_memory_info info{};
  info.struct_size = sizeof info;
  ASSERT_EQ(fdnn_model_memory_info(model, &info), FDNN_STATUS_OK) << fdnn_last_error_message();
  EXPECT_GE(info.context_bytes, static_cast<size_t>(per_sample) * 1024 * sizeof(float));
  // The convolution: one multiply-add per output element; the 1 x 1 pooling: 1 per element.
  EXPECT_EQ(info.flops_per_sample, 2.0 * per_sample + 1.0 * per_sample);
  // The convolution reads 1 float and writes the plane; the pooling reads and writes it.
  EXPECT_EQ(info.bytes_per_sample, 4.0 * (1 + per_sample) + 4.0 * (2 * per_sample));
  fdnn_model_destroy(model);

  // A limit of 64 MiB: refused when prepared, before the scratch is allocated, naming the option.
  fdnn_model_options options = options_with(1024);
  options.max_workspace_bytes = uint64_t{64} << 20;
  ASSERT_EQ(fdnn_model_create_from_file(path.c_str(), &options, &model), FDNN_STATUS_OK);
  fdnn_context* context = nullptr;
  EXPECT_EQ(fdnn_context_create(model, &context), FDNN_STATUS_OUT_OF_MEMORY);
  EXPECT_EQ(context, nullptr);
  expect_message_has({"options.max_workspace_bytes", "67108864", "options.max_batch = 1024"});
  const float input[1] = {1};
  std::vector<float> output(per_sample);
  EXPECT_EQ(fdnn_model_run(model, 1, input, 1, output.data(), output.size()),
            FDNN_STATUS_OUT_OF_MEMORY);
  expect_message_has({"options.max_workspace_bytes"});
  fdnn_model_destroy(model);

  // The same limit with max_batch 8 fits: the run gives 2 * 1 + 1 at the centre, the bias around.
  options.max_batch = 8;
  ASSERT_EQ(fdnn_model_create_from_file(path.c_str(), &options, &model), FDNN_STATUS_OK);
  ASSERT_EQ(fdnn_model_run(model, 1, input, 1, output.data(), output.size()), FDNN_STATUS_OK)
      << fdnn_last_error_message();
  EXPECT_EQ(output[300 * 601 + 300], 3.0f);
  EXPECT_EQ(output[0], 1.0f);
  fdnn_model_destroy(model);
}

TEST(HostileInput, WeightLimitRefusesBeforeReadingWeights) {
  // 1024 x 1024 + 1024 floats: about 4 MiB.
  const std::string spec =
      R"({"fusednn": 1, "name": "wide", "input": {"shape": [1024]}, "layers": [)"
      R"({"type": "Linear", "name": "fc", "in_features": 1024, "out_features": 1024}]})";
  fdnn_model_options options = options_with(1);
  options.max_weight_bytes = uint64_t{1} << 20;
  fdnn_model* model = nullptr;
  EXPECT_EQ(fdnn_model_create_from_spec(spec.data(), spec.size(), &options, &model),
            FDNN_STATUS_OUT_OF_MEMORY);
  EXPECT_EQ(model, nullptr);
  expect_message_has({"options.max_weight_bytes", "1049600 weights", "4198400 bytes", "1048576"});
  options.max_weight_bytes = uint64_t{8} << 20;
  model = create(spec, &options);
  fdnn_model_destroy(model);
}

// A weights file or bundle larger than max_weight_bytes and the 100 MiB a safetensors header
// may take is refused before it is read (a sparse file: nothing is written to disk).
TEST(HostileInput, WeightLimitRefusesAHugeFileBeforeReadingIt) {
  TempDir dir;
  const std::string path = dir.write("huge.safetensors", safetensors_bytes("{}", ""));
  const off_t size = (off_t{100} << 20) + 4096 + 1;
  ASSERT_EQ(::truncate(path.c_str(), size), 0);
  fdnn_model_options options = options_with(1);
  options.max_weight_bytes = 4096;
  fdnn_model* spec_model = create(kLinear4To3, &options);
  EXPECT_EQ(fdnn_model_load_weights(spec_model, path.c_str()), FDNN_STATUS_OUT_OF_MEMORY);
  expect_message_has(
      {"huge.safetensors", std::to_string(size) + " bytes", "options.max_weight_bytes (4096)"});
  fdnn_model_destroy(spec_model);
  fdnn_model* model = nullptr;
  EXPECT_EQ(fdnn_model_create_from_file(path.c_str(), &options, &model), FDNN_STATUS_OUT_OF_MEMORY);
  EXPECT_EQ(model, nullptr);
  expect_message_has({"huge.safetensors", "options.max_weight_bytes (4096)"});
  // One byte less is read (and then refused for what it holds: no spec in its metadata).
  ASSERT_EQ(::truncate(path.c_str(), size - 1), 0);
  EXPECT_EQ(fdnn_model_create_from_file(path.c_str(), &options, &model), FDNN_STATUS_INVALID_MODEL);
  expect_message_has({"huge.safetensors", "no model spec"});
}

// A weight directory is bounded by max_weight_bytes as well: its .bin and .txt files are
// refused by their size before they are read (a sparse .bin file: nothing is written to disk),
// and an undeclared file counts as much as a declared one.
TEST(HostileInput, WeightLimitBoundsAWeightDirectory) {
  fdnn_model_options options = options_with(1);
  options.max_weight_bytes = 64;  // the spec's 15 floats take 60 bytes
  TempDir dir;
  const std::string huge = dir.write("fc.weight.bin", "");
  ASSERT_EQ(::truncate(huge.c_str(), off_t{8} << 30), 0);
  const std::string huge_directory = std::filesystem::path(huge).parent_path().string();
  fdnn_model* model = create(kLinear4To3, &options);
  EXPECT_EQ(fdnn_model_load_weights(model, huge_directory.c_str()), FDNN_STATUS_OUT_OF_MEMORY);
  expect_message_has(
      {"fc.weight.bin' holds 8589934592 bytes", "more than 64", "options.max_weight_bytes (64)"});
  fdnn_model_destroy(model);

  TempDir with_extra;
  with_extra.write("fc.weight.bin", float_bytes(std::vector<float>(12, 0.5f)));
  with_extra.write("fc.bias.txt", "1\n2\n3\n");
  const std::string notes = with_extra.write("notes.txt", "1 2 3\n");  // 12 bytes; 4 are left
  const std::string directory = std::filesystem::path(notes).parent_path().string();
  model = create(kLinear4To3, &options);
  EXPECT_EQ(fdnn_model_load_weights(model, directory.c_str()), FDNN_STATUS_OUT_OF_MEMORY);
  expect_message_has({"notes.txt' holds more than 1 float32 values", "options.max_weight_bytes"});
  fdnn_model_destroy(model);
  // Without the extra file the same directory loads and runs under the same limit.
  std::filesystem::remove(notes);
  model = create(kLinear4To3, &options);
  EXPECT_EQ(fdnn_model_load_weights(model, directory.c_str()), FDNN_STATUS_OK)
      << fdnn_last_error_message();
  const float input[4] = {1, 1, 1, 1};
  float output[3] = {0, 0, 0};
  ASSERT_EQ(fdnn_model_run(model, 1, input, 4, output, 3), FDNN_STATUS_OK)
      << fdnn_last_error_message();
  EXPECT_EQ(output[0], 3.0f);  // 4 x 0.5 + 1
  EXPECT_EQ(output[2], 5.0f);
  fdnn_model_destroy(model);
}

// A caller built before the limits existed passes a struct that ends at precision: the library
// applies the default limits, which a spec declaring 512 GiB of weights exceeds.
TEST(HostileInput, OlderOptionsStructGetsTheDefaultLimits) {
  const std::string spec =
      R"({"fusednn": 1, "name": "vast", "input": {"shape": [1048576]}, "layers": [)"
      R"({"type": "Linear", "name": "fc", "in_features": 1048576, "out_features": 131072,)"
      R"( "bias": false}]})";
  const size_t older = offsetof(fdnn_model_options, max_workspace_bytes);
  fdnn_model_options options;
  std::memset(&options, 0xab, sizeof options);
  ASSERT_EQ(fdnn_model_options_init(&options, older), FDNN_STATUS_OK);
  uint64_t untouched;
  std::memset(&untouched, 0xab, sizeof untouched);
  EXPECT_EQ(options.max_workspace_bytes, untouched);
  EXPECT_EQ(options.max_weight_bytes, untouched);
  fdnn_model* model = nullptr;
  EXPECT_EQ(fdnn_model_create_from_spec(spec.data(), spec.size(), &options, &model),
            FDNN_STATUS_OUT_OF_MEMORY);
  expect_message_has({"options.max_weight_bytes", std::to_string(FDNN_DEFAULT_MAX_WEIGHT_BYTES)});
  // The current struct with the limit off creates it (the weights are read only when loaded).
  fdnn_model_options_init(&options, sizeof options);
  EXPECT_EQ(options.max_workspace_bytes, FDNN_DEFAULT_MAX_WORKSPACE_BYTES);
  EXPECT_EQ(options.max_weight_bytes, FDNN_DEFAULT_MAX_WEIGHT_BYTES);
  options.max_weight_bytes = 0;
  model = create(spec, &options);
  fdnn_model_destroy(model);
}

}  // namespace
