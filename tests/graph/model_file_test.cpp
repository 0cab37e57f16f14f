// SPDX-License-Identifier: Apache-2.0

#include "graph/model_file.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <future>
#include <nlohmann/json.hpp>
#include <string>

#include "graph/safetensors_file.hpp"

#include "graph_test_support.hpp"

namespace fusednn {
namespace {

using testing::expect_error;
using testing::float_bytes;
using testing::safetensors_bytes;
using testing::TempDir;

// A bundle holding the given spec text and no tensors.
std::string bundle_bytes(const std::string& spec_text) {
  nlohmann::json header;
  header["__metadata__"][kBundleSpecKey] = spec_text;
  return safetensors_bytes(header.dump(), "");
}

TEST(GraphModelFile, OpensAJsonSpec) {
  const ModelFile model = open_model_file(testing::fixture("tiny_mlp.json"));
  EXPECT_FALSE(model.bundled_weights.has_value());
  EXPECT_EQ(model.graph.name, "tiny_mlp");
  EXPECT_EQ(model.graph.input_shape, Shape({4}));
  ASSERT_EQ(model.graph.layers.size(), 4u);
  EXPECT_EQ(model.graph.output_shape(), Shape({2}));
  EXPECT_EQ(model.graph.layers[2].name, "relu_2");
}

TEST(GraphModelFile, OpensABundleWithItsWeights) {
  const ModelFile model = open_model_file(testing::fixture("tiny_mlp.safetensors"));
  EXPECT_EQ(model.graph.name, "tiny_mlp");
  EXPECT_EQ(model.graph.output_shape(), Shape({2}));
  ASSERT_TRUE(model.bundled_weights.has_value());
  EXPECT_EQ(model.bundled_weights->size(), 8u);  // 7 weights and bn.num_batches_tracked

  WeightStore store(model.graph);
  store.accept(*model.bundled_weights);
  store.require_complete();
  const std::vector<float>& fc2 = store.values("fc2.weight");  // tensor number 6
  ASSERT_EQ(fc2.size(), 6u);
  for (size_t i = 0; i < fc2.size(); ++i) EXPECT_EQ(fc2[i], testing::tiny_mlp_value(6, i));
}

TEST(GraphModelFile, SafetensorsWithoutASpecSaysHowToMakeABundle) {
  expect_error([] { open_model_file(testing::fixture("dtypes.safetensors")); },
               FDNN_STATUS_INVALID_MODEL,
               {"dtypes.safetensors' is a safetensors file with no model spec",
                "no \"fusednn.spec\" key", "metadata={\"fusednn.spec\""});
}

TEST(GraphModelFile, BundleWithABadSpecNamesTheMetadataKey) {
  TempDir dir;
  const std::string path = dir.write(
      "bad_bundle.safetensors",
      bundle_bytes(R"({"fusednn": 1, "input": {"shape": [4]}, "layers": [{"type": "Dense"}]})"));
  expect_error([&] { open_model_file(path); }, FDNN_STATUS_INVALID_MODEL,
               {"bad_bundle.safetensors (metadata \"fusednn.spec\")", "unknown type 'Dense'"});
  const std::string syntax = dir.write("syntax_bundle.safetensors", bundle_bytes("{\n  oops"));
  expect_error([&] { open_model_file(syntax); }, FDNN_STATUS_PARSE_ERROR,
               {"syntax_bundle.safetensors (metadata \"fusednn.spec\")", "line 2, column 3"});
}

TEST(GraphModelFile, JsonSyntaxErrorNamesThePath) {
  TempDir dir;
  const std::string path = dir.write("model.json", "  \n{\"fusednn\": 1,, }");
  expect_error([&] { open_model_file(path); }, FDNN_STATUS_PARSE_ERROR,
               {"model.json: JSON syntax error at line 2, column 15"});
}

TEST(GraphModelFile, EmptyGarbageTruncatedAndMissingFiles) {
  TempDir dir;
  const std::string empty = dir.write("empty.json", "");
  expect_error([&] { open_model_file(empty); }, FDNN_STATUS_PARSE_ERROR, {"empty.json' is empty"});
  const std::string text = dir.write("notes.txt", "hello, this is not a model");
  expect_error(
      [&] { open_model_file(text); }, FDNN_STATUS_PARSE_ERROR,
      {"notes.txt' is neither a JSON model spec", "nor a safetensors bundle", "runs past the end"});
  const std::string whole = safetensors_bytes(
      R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", float_bytes({1, 2}));
  const std::string cut = dir.write("cut.safetensors", whole.substr(0, 20));
  expect_error([&] { open_model_file(cut); }, FDNN_STATUS_PARSE_ERROR,
               {"cut.safetensors", "header length", "runs past the end"});
  expect_error([&] { open_model_file(dir.path("absent.json")); }, FDNN_STATUS_IO_ERROR,
               {"absent.json"});
  expect_error([&] { open_model_file(dir.path()); }, FDNN_STATUS_IO_ERROR, {"is a directory"});
}

// A FIFO at the path: opening it for reading would block until a writer comes, and reading it
// until the writer leaves. Every reader returns IO_ERROR naming the path at once. If a reader
// blocks after all, the test opens the FIFO for writing and closes it, which ends the block, and
// fails.
TEST(GraphModelFile, FifoIsRefusedWithoutBlocking) {
  TempDir dir;
  const std::string fifo = dir.path("model.json");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::function<void()> readers[] = {
      [&] { open_model_file(fifo); },
      [&] { read_safetensors(fifo); },
  };
  for (const auto& reader : readers) {
    auto done = std::async(std::launch::async, [&] {
      expect_error(reader, FDNN_STATUS_IO_ERROR, {fifo, "is a FIFO", "not a regular file"});
    });
    if (done.wait_for(std::chrono::seconds(20)) != std::future_status::ready) {
      ADD_FAILURE() << "reading a FIFO blocked";
      const int writer = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
      if (writer >= 0) ::close(writer);
    }
    done.wait();
  }
}

}  // namespace
}  // namespace fusednn
