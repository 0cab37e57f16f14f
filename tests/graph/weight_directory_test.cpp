// SPDX-License-Identifier: Apache-2.0

#include "graph/weight_directory.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <string>

#include "graph/spec_parser.hpp"
#include "graph/weight_store.hpp"
#include "graph_test_support.hpp"

namespace fusednn {
namespace {

using testing::expect_error;
using testing::float_bytes;
using testing::TempDir;

// The fixture model: Linear(4, 3) -> BatchNorm1d(3) -> ReLU -> Linear(3, 2, bias=False).
Graph tiny_mlp() {
  return parse_model_spec(R"({"fusednn": 1, "input": {"shape": [4]}, "layers": [
      {"type": "Linear", "name": "fc1", "in_features": 4, "out_features": 3},
      {"type": "BatchNorm1d", "name": "bn", "num_features": 3},
      {"type": "ReLU"},
      {"type": "Linear", "name": "fc2", "in_features": 3, "out_features": 2, "bias": false}]})",
                          "tiny_mlp.json");
}

// Every tiny_mlp tensor holds the values make_format_fixtures.py wrote.
void expect_tiny_mlp_values(const WeightStore& store) {
  const std::vector<std::string>& names = store.declared_names();
  ASSERT_EQ(names.size(), 7u);
  for (size_t t = 0; t < names.size(); ++t) {
    const std::vector<float>& values = store.values(names[t]);
    ASSERT_EQ(static_cast<int64_t>(values.size()), element_count(store.expected_shape(names[t])));
    for (size_t i = 0; i < values.size(); ++i) {
      EXPECT_EQ(values[i], testing::tiny_mlp_value(static_cast<int>(t), i))
          << names[t] << "[" << i << "]";
    }
  }
}

TEST(GraphWeightDirectory, ReadsNumpyToFileBinaries) {
  WeightStore store(tiny_mlp());
  std::vector<NamedTensor> tensors = read_weight_directory(testing::fixture("tiny_mlp_bin"), store);
  ASSERT_EQ(tensors.size(), 7u);
  for (const NamedTensor& tensor : tensors) {
    EXPECT_EQ(tensor.dtype, "F32");
    EXPECT_EQ(tensor.shape, store.expected_shape(tensor.name));
    EXPECT_NE(tensor.source.find(tensor.name + ".bin"), std::string::npos);
  }
  store.accept(std::move(tensors));
  store.require_complete();
  expect_tiny_mlp_values(store);
}

TEST(GraphWeightDirectory, ReadsNumpySavetxtText) {
  WeightStore store(tiny_mlp());
  store.accept(read_weight_directory(testing::fixture("tiny_mlp_txt"), store));
  store.require_complete();
  expect_tiny_mlp_values(store);
}

TEST(GraphWeightDirectory, TextFormsNumpyMayWrite) {
  WeightStore store(tiny_mlp());
  TempDir dir;
  // Comments, blank lines, CRLF, commas, a leading '+', inf and nan.
  dir.write("fc1.bias.txt", "# fc1.bias\n\n+1.5e+00\r\n-inf\n\n  nan  \n");
  dir.write("fc2.weight.txt", "1,2,3\n4 5\t6\n");
  const std::vector<NamedTensor> tensors = read_weight_directory(dir.path(), store);
  ASSERT_EQ(tensors.size(), 2u);
  const NamedTensor& bias = tensors[0];
  EXPECT_EQ(bias.name, "fc1.bias");
  EXPECT_EQ(bias.shape, Shape({3}));
  EXPECT_EQ(bias.values[0], 1.5f);
  EXPECT_TRUE(std::isinf(bias.values[1]) && bias.values[1] < 0);
  EXPECT_TRUE(std::isnan(bias.values[2]));
  EXPECT_EQ(tensors[1].shape, Shape({2, 3}));
  EXPECT_EQ(tensors[1].values, std::vector<float>({1, 2, 3, 4, 5, 6}));
}

TEST(GraphWeightDirectory, UndeclaredFilesComeBackForTheStoreToReport) {
  WeightStore store(tiny_mlp());
  TempDir dir;
  dir.write("fc1.bias.bin", float_bytes({1, 2, 3}));
  dir.write("fc3.weight.bin", float_bytes({1, 2, 3, 4, 5}));
  dir.write("notes.md", "ignored");
  dir.write("fc2.weight.npy", "ignored too");
  std::filesystem::create_directory(dir.path("nested.bin"));  // not a file: ignored
  std::vector<NamedTensor> tensors = read_weight_directory(dir.path(), store);
  ASSERT_EQ(tensors.size(), 2u);
  EXPECT_EQ(tensors[1].name, "fc3.weight");
  EXPECT_EQ(tensors[1].shape, Shape({5}));
  expect_error([&] { store.accept(tensors); }, FDNN_STATUS_WEIGHT_MISMATCH,
               {"unexpected tensor 'fc3.weight' in ", "fc3.weight.bin", "fc1.weight, fc1.bias"});
}

TEST(GraphWeightDirectory, WrongValueCountNamesTheFileAndTheExpectedShape) {
  WeightStore store(tiny_mlp());
  TempDir dir;
  dir.write("fc1.weight.bin", float_bytes({1, 2, 3, 4, 5, 6}));
  expect_error([&] { read_weight_directory(dir.path(), store); }, FDNN_STATUS_WEIGHT_MISMATCH,
               {"fc1.weight.bin' holds 6 float32 values", "'fc1.weight' to be [3, 4] (12 values)"});
  TempDir text_dir;
  text_dir.write("bn.running_var.txt", "1\n2\n");
  expect_error([&] { read_weight_directory(text_dir.path(), store); }, FDNN_STATUS_WEIGHT_MISMATCH,
               {"bn.running_var.txt' holds 2 float32 values", "to be [3] (3 values)"});
}

TEST(GraphWeightDirectory, BinSizeNotAMultipleOfFour) {
  WeightStore store(tiny_mlp());
  TempDir dir;
  dir.write("fc1.bias.bin", std::string(10, '\0'));
  expect_error([&] { read_weight_directory(dir.path(), store); }, FDNN_STATUS_PARSE_ERROR,
               {"fc1.bias.bin' holds 10 bytes, not a whole number of float32 values"});
}

TEST(GraphWeightDirectory, UnreadableNumberNamesTheLine) {
  WeightStore store(tiny_mlp());
  TempDir dir;
  dir.write("fc1.bias.txt", "1.0\n2.0\nthree\n");
  expect_error([&] { read_weight_directory(dir.path(), store); }, FDNN_STATUS_PARSE_ERROR,
               {"fc1.bias.txt' line 3: cannot read 'three' as a number"});
  TempDir partial;
  partial.write("fc1.bias.txt", "1.0\n2.0x\n3\n");
  expect_error([&] { read_weight_directory(partial.path(), store); }, FDNN_STATUS_PARSE_ERROR,
               {"line 2: cannot read '2.0x'"});
  TempDir huge;
  huge.write("fc1.bias.txt", "1\n1e39\n3\n");
  expect_error([&] { read_weight_directory(huge.path(), store); }, FDNN_STATUS_PARSE_ERROR,
               {"line 2: '1e39' is outside the float32 range"});
}

TEST(GraphWeightDirectory, BothBinAndTxtForOneTensor) {
  WeightStore store(tiny_mlp());
  TempDir dir;
  dir.write("fc1.bias.bin", float_bytes({1, 2, 3}));
  dir.write("fc1.bias.txt", "1\n2\n3\n");
  expect_error([&] { read_weight_directory(dir.path(), store); }, FDNN_STATUS_WEIGHT_MISMATCH,
               {"fc1.bias.bin", "fc1.bias.txt", "for tensor 'fc1.bias'; keep one"});
}

TEST(GraphWeightDirectory, MissingDirectoryOrAFile) {
  WeightStore store(tiny_mlp());
  TempDir dir;
  expect_error([&] { read_weight_directory(dir.path("absent"), store); }, FDNN_STATUS_IO_ERROR,
               {"weight directory '", "absent' does not exist"});
  const std::string file = dir.write("file.bin", float_bytes({1}));
  expect_error([&] { read_weight_directory(file, store); }, FDNN_STATUS_IO_ERROR,
               {"file.bin' is not a directory"});
}

// max_bytes bounds what a directory brings: a .bin file over what is left is refused by its size
// before it is read (a sparse file of 8 GiB: reading it would take 8 GiB), naming the file and
// the limit.
TEST(GraphWeightDirectory, WeightLimitRefusesALargeBinBeforeReadingIt) {
  WeightStore store(tiny_mlp());
  TempDir dir;
  const std::string path = dir.write("fc1.weight.bin", "");
  ASSERT_EQ(::truncate(path.c_str(), off_t{8} << 30), 0);
  expect_error([&] { read_weight_directory(dir.path(), store, 132, "the caller's limit"); },
               FDNN_STATUS_OUT_OF_MEMORY,
               {"fc1.weight.bin' holds 8589934592 bytes, more than 132",
                "of 132 for this directory: the caller's limit"});
}

// Every file fits alone, all of them together do not: the bytes already read count.
TEST(GraphWeightDirectory, WeightLimitCountsTheWholeDirectory) {
  WeightStore store(tiny_mlp());
  TempDir dir;
  dir.write("fc1.bias.bin", float_bytes({1, 2, 3}));                               // 12 bytes
  dir.write("fc1.weight.bin", float_bytes({1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}));  // 48 bytes
  dir.write("fc2.weight.bin", float_bytes({1, 2, 3, 4, 5, 6}));                    // 24 bytes
  // Name order: fc1.bias (12 left of 80 -> 68), fc1.weight (-> 20), fc2.weight: 24 > 20.
  expect_error([&] { read_weight_directory(dir.path(), store, 80, "limit"); },
               FDNN_STATUS_OUT_OF_MEMORY,
               {"fc2.weight.bin' holds 24 bytes, more than 20", "left of 80", ": limit"});
  // Exactly the limit is accepted, and so is no limit.
  EXPECT_EQ(read_weight_directory(dir.path(), store, 84, "limit").size(), 3u);
  EXPECT_EQ(read_weight_directory(dir.path(), store).size(), 3u);
  // With nothing left, a further non-empty file is refused by its size.
  dir.write("fc3.bin", float_bytes({1}));
  expect_error([&] { read_weight_directory(dir.path(), store, 84, "limit"); },
               FDNN_STATUS_OUT_OF_MEMORY, {"fc3.bin' holds 4 bytes, more than the 0 bytes"});
}

// A .txt file's text is read whole: text longer than the limit is refused before it is read;
// values past what is left are refused while parsing, naming the line.
TEST(GraphWeightDirectory, WeightLimitBoundsTextFiles) {
  WeightStore store(tiny_mlp());
  TempDir long_text;
  long_text.write("fc1.bias.txt", "1\n2\n" + std::string(200, ' ') + "3\n");
  expect_error([&] { read_weight_directory(long_text.path(), store, 100, "limit"); },
               FDNN_STATUS_OUT_OF_MEMORY,
               {"fc1.bias.txt' holds 206 bytes, more than 100",
                "the most bytes a weight file's text may take: limit"});
  TempDir many_values;
  many_values.write("fc1.bias.bin", float_bytes({1, 2, 3}));  // 12 bytes: 8 left of 20
  many_values.write("fc2.weight.txt", "1 2\n3 4\n5 6\n");
  expect_error([&] { read_weight_directory(many_values.path(), store, 20, "limit"); },
               FDNN_STATUS_OUT_OF_MEMORY,
               {"fc2.weight.txt' holds more than 2 float32 values (line 2)", "8 bytes of weights",
                "left of 20"});
  EXPECT_EQ(read_weight_directory(many_values.path(), store, 36, "limit").size(), 2u);
}

}  // namespace
}  // namespace fusednn
