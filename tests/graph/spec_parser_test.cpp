// SPDX-License-Identifier: Apache-2.0
// Parsing and shape inference for every layer type. Expected shapes are worked out by hand with
// PyTorch's formulas (conv/pool: floor((H + 2p - d(k - 1) - 1) / s) + 1).
#include "graph/spec_parser.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "graph_test_support.hpp"

namespace fusednn {
namespace {

// A version-1 spec with the given per-sample input shape and layer list (JSON text).
std::string spec(const std::string& input_shape, const std::string& layers,
                 const std::string& extra = "") {
  return R"({"fusednn": 1, "input": {"shape": )" + input_shape + R"(}, "layers": [)" + layers +
         "]" + extra + "}";
}

Graph parse(const std::string& text) { return parse_model_spec(text, "test.json"); }

const Layer& layer_named(const Graph& graph, const std::string& name) {
  for (const Layer& layer : graph.layers) {
    if (layer.name == name) return layer;
  }
  throw std::runtime_error("no layer " + name);
}

TEST(GraphSpec, SeedMlpFromTheFormatDocument) {
  const Graph graph = parse(R"({ "fusednn": 1, "name": "seed_mlp",
    "input": {"shape": [100], "dtype": "float32"},
    "layers": [
      {"type": "Linear", "name": "fc1", "in_features": 100, "out_features": 128},
      {"type": "ReLU"},
      {"type": "Linear", "name": "fc2", "in_features": 128, "out_features": 64, "bias": true},
      {"type": "ReLU"},
      {"type": "Linear", "name": "fc3", "in_features": 64, "out_features": 10} ],
    "output": "fc3" })");
  EXPECT_EQ(graph.name, "seed_mlp");
  EXPECT_EQ(graph.input_shape, Shape({100}));
  ASSERT_EQ(graph.layers.size(), 5u);
  EXPECT_EQ(graph.output, 4);
  EXPECT_EQ(graph.output_shape(), Shape({10}));

  EXPECT_EQ(graph.layers[1].name, "relu_1");
  EXPECT_EQ(graph.layers[3].name, "relu_3");
  EXPECT_EQ(graph.layers[0].inputs, std::vector<int>({kGraphInput}));
  EXPECT_EQ(graph.layers[3].inputs, std::vector<int>({2}));
  EXPECT_EQ(graph.layers[1].output_shape, Shape({128}));
  EXPECT_EQ(graph.layers[2].output_shape, Shape({64}));

  const Layer& fc1 = graph.layers[0];
  EXPECT_EQ(fc1.kind, LayerKind::Linear);
  EXPECT_EQ(fc1.type_name, "Linear");
  EXPECT_EQ(fc1.attributes.in_features, 100);
  EXPECT_EQ(fc1.attributes.out_features, 128);
  EXPECT_TRUE(fc1.attributes.has_bias);
  ASSERT_EQ(fc1.weights.size(), 2u);
  EXPECT_EQ(fc1.weights[0].role, "weight");
  EXPECT_EQ(fc1.weights[0].tensor_name, "fc1.weight");
  EXPECT_EQ(fc1.weights[0].shape, Shape({128, 100}));
  EXPECT_EQ(fc1.weights[1].tensor_name, "fc1.bias");
  EXPECT_EQ(fc1.weights[1].shape, Shape({128}));
  EXPECT_TRUE(graph.layers[1].weights.empty());
  // 128*100 + 128 + 64*128 + 64 + 10*64 + 10
  EXPECT_EQ(graph.parameter_count(), 21834);
}

TEST(GraphSpec, DefaultsWhenOptionalKeysAreLeftOut) {
  // No "name", no "dtype", no "output": the output is the last layer.
  const Graph graph = parse(spec("[3]", R"({"type": "Linear", "in_features": 3, "out_features": 2},
                                          {"type": "Sigmoid"})"));
  EXPECT_EQ(graph.name, "");
  EXPECT_EQ(graph.layers[0].name, "linear_0");
  EXPECT_EQ(graph.layers[1].name, "sigmoid_1");
  EXPECT_EQ(graph.output, 1);
}

TEST(GraphSpec, OutputMayNameAnEarlierLayer) {
  const Graph graph =
      parse(spec("[3]", R"({"type": "Linear", "name": "a", "in_features": 3, "out_features": 2},
                                          {"type": "Tanh"})",
                 R"(, "output": "a")"));
  EXPECT_EQ(graph.output, 0);
  EXPECT_EQ(graph.output_shape(), Shape({2}));
}

TEST(GraphSpec, LinearActsOnTheLastDimAndHonoursBiasFalse) {
  const Graph graph = parse(
      spec("[5, 7]", R"({"type": "Linear", "in_features": 7, "out_features": 3, "bias": false})"));
  const Layer& linear = graph.layers[0];
  EXPECT_EQ(linear.output_shape, Shape({5, 3}));
  EXPECT_FALSE(linear.attributes.has_bias);
  ASSERT_EQ(linear.weights.size(), 1u);
  EXPECT_EQ(linear.weights[0].shape, Shape({3, 7}));
}

TEST(GraphSpec, Conv2dShapesStridesPaddingDilationGroups) {
  const Graph graph = parse(spec("[3, 32, 32]", R"(
    {"type": "Conv2d", "name": "c1", "in_channels": 3, "out_channels": 16, "kernel_size": 3,
     "padding": 1},
    {"type": "Conv2d", "name": "c2", "in_channels": 16, "out_channels": 32, "kernel_size": [5, 3],
     "stride": [2, 1], "padding": [0, 2], "dilation": [1, 2]},
    {"type": "Conv2d", "name": "c3", "in_channels": 32, "out_channels": 64, "kernel_size": 3,
     "groups": 4, "bias": false},
    {"type": "Conv2d", "name": "dw", "in_channels": 64, "out_channels": 64, "kernel_size": 3,
     "groups": 64, "stride": 2})"));
  const Layer& c1 = layer_named(graph, "c1");
  EXPECT_EQ(c1.kind, LayerKind::Conv2d);
  EXPECT_EQ(c1.output_shape, Shape({16, 32, 32}));  // (32 + 2 - 2 - 1) / 1 + 1 = 32
  EXPECT_EQ(c1.weights[0].shape, Shape({16, 3, 3, 3}));
  EXPECT_EQ(c1.weights[1].shape, Shape({16}));

  const Layer& c2 = layer_named(graph, "c2");
  // H: floor((32 + 0 - 1*4 - 1) / 2) + 1 = 14; W: floor((32 + 4 - 2*2 - 1) / 1) + 1 = 32
  EXPECT_EQ(c2.output_shape, Shape({32, 14, 32}));
  EXPECT_EQ(c2.weights[0].shape, Shape({32, 16, 5, 3}));
  EXPECT_EQ(c2.attributes.kernel_size, (std::array<int64_t, 2>{5, 3}));
  EXPECT_EQ(c2.attributes.stride, (std::array<int64_t, 2>{2, 1}));
  EXPECT_EQ(c2.attributes.padding, (std::array<int64_t, 2>{0, 2}));
  EXPECT_EQ(c2.attributes.dilation, (std::array<int64_t, 2>{1, 2}));

  const Layer& c3 = layer_named(graph, "c3");
  EXPECT_EQ(c3.output_shape, Shape({64, 12, 30}));
  EXPECT_EQ(c3.attributes.groups, 4);
  EXPECT_FALSE(c3.attributes.has_bias);
  ASSERT_EQ(c3.weights.size(), 1u);
  EXPECT_EQ(c3.weights[0].shape, Shape({64, 8, 3, 3}));

  const Layer& dw = layer_named(graph, "dw");
  // H: floor((12 - 2 - 1) / 2) + 1 = 5; W: floor((30 - 2 - 1) / 2) + 1 = 14
  EXPECT_EQ(dw.output_shape, Shape({64, 5, 14}));
  EXPECT_EQ(dw.weights[0].shape, Shape({64, 1, 3, 3}));
}

TEST(GraphSpec, Conv2dStringPadding) {
  const Graph graph = parse(spec("[3, 10, 12]", R"(
    {"type": "Conv2d", "name": "same", "in_channels": 3, "out_channels": 8, "kernel_size": 5,
     "padding": "same", "dilation": 2},
    {"type": "Conv2d", "name": "valid", "in_channels": 8, "out_channels": 4, "kernel_size": [3, 1],
     "padding": "valid"})"));
  const Layer& same = layer_named(graph, "same");
  EXPECT_EQ(same.attributes.padding, (std::array<int64_t, 2>{4, 4}));  // 2 * (5 - 1) / 2
  EXPECT_EQ(same.output_shape, Shape({8, 10, 12}));
  EXPECT_EQ(layer_named(graph, "valid").output_shape, Shape({4, 8, 12}));
}

TEST(GraphSpec, MaxPool2dStrideDefaultsToKernel) {
  const Graph graph = parse(spec("[16, 32, 32]", R"(
    {"type": "MaxPool2d", "name": "p1", "kernel_size": 2},
    {"type": "MaxPool2d", "name": "p2", "kernel_size": 3, "stride": null},
    {"type": "MaxPool2d", "name": "p3", "kernel_size": 3, "stride": 2, "padding": 1,
     "dilation": 1, "ceil_mode": false},
    {"type": "MaxPool2d", "name": "p4", "kernel_size": [3, 2], "stride": [1, 2]})"));
  const Layer& p1 = layer_named(graph, "p1");
  EXPECT_EQ(p1.kind, LayerKind::MaxPool2d);
  EXPECT_EQ(p1.attributes.stride, (std::array<int64_t, 2>{2, 2}));
  EXPECT_EQ(p1.output_shape, Shape({16, 16, 16}));
  // floor((16 - 2 - 1) / 3) + 1 = 5
  EXPECT_EQ(layer_named(graph, "p2").output_shape, Shape({16, 5, 5}));
  // floor((5 + 2 - 2 - 1) / 2) + 1 = 3
  EXPECT_EQ(layer_named(graph, "p3").output_shape, Shape({16, 3, 3}));
  // H: (3 - 2 - 1) / 1 + 1 = 1; W: (3 - 1 - 1) / 2 + 1 = 1
  EXPECT_EQ(layer_named(graph, "p4").output_shape, Shape({16, 1, 1}));
  EXPECT_TRUE(p1.weights.empty());
}

TEST(GraphSpec, AvgPool2dShapesAndCountIncludePad) {
  const Graph graph = parse(spec("[8, 7, 9]", R"(
    {"type": "AvgPool2d", "name": "a", "kernel_size": 3, "stride": 2, "padding": 1,
     "count_include_pad": false, "ceil_mode": false},
    {"type": "AvgPool2d", "name": "b", "kernel_size": 2})"));
  const Layer& a = layer_named(graph, "a");
  EXPECT_EQ(a.kind, LayerKind::AvgPool2d);
  // H: floor((7 + 2 - 2 - 1) / 2) + 1 = 4; W: floor((9 + 2 - 2 - 1) / 2) + 1 = 5
  EXPECT_EQ(a.output_shape, Shape({8, 4, 5}));
  EXPECT_FALSE(a.attributes.count_include_pad);
  const Layer& b = layer_named(graph, "b");
  EXPECT_TRUE(b.attributes.count_include_pad);
  EXPECT_EQ(b.output_shape, Shape({8, 2, 2}));
}

TEST(GraphSpec, FlattenWithPyTorchDims) {
  struct Case {
    std::string attributes;
    Shape expected;
  };
  const Case cases[] = {
      {"", {120}},  // start_dim 1, end_dim -1
      {R"(, "start_dim": 2)", {4, 30}},
      {R"(, "start_dim": 1, "end_dim": 2)", {20, 6}},
      {R"(, "start_dim": -2, "end_dim": -1)", {4, 30}},
      {R"(, "start_dim": 3, "end_dim": 3)", {4, 5, 6}},
      {R"(, "start_dim": 1, "end_dim": -2)", {20, 6}},
  };
  for (const Case& c : cases) {
    const Graph graph = parse(spec("[4, 5, 6]", R"({"type": "Flatten")" + c.attributes + "}"));
    EXPECT_EQ(graph.layers[0].kind, LayerKind::Flatten);
    EXPECT_EQ(graph.layers[0].output_shape, c.expected) << c.attributes;
  }
}

TEST(GraphSpec, PointwiseActivationsKeepTheShape) {
  const Graph graph = parse(spec("[3, 4]", R"(
    {"type": "ReLU"}, {"type": "LeakyReLU"},
    {"type": "LeakyReLU", "name": "leaky", "negative_slope": 0.2},
    {"type": "GELU"}, {"type": "GELU", "name": "gelu_tanh", "approximate": "tanh"},
    {"type": "GELU", "name": "gelu_none", "approximate": "none"},
    {"type": "SiLU"}, {"type": "Sigmoid"}, {"type": "Tanh"}, {"type": "Scale", "alpha": 0.5})"));
  const LayerKind kinds[] = {LayerKind::ReLU, LayerKind::LeakyReLU, LayerKind::LeakyReLU,
                             LayerKind::GELU, LayerKind::GELU,      LayerKind::GELU,
                             LayerKind::SiLU, LayerKind::Sigmoid,   LayerKind::Tanh,
                             LayerKind::Scale};
  ASSERT_EQ(graph.layers.size(), 10u);
  for (size_t i = 0; i < graph.layers.size(); ++i) {
    EXPECT_EQ(graph.layers[i].kind, kinds[i]) << i;
    EXPECT_EQ(graph.layers[i].output_shape, Shape({3, 4})) << i;
    EXPECT_TRUE(graph.layers[i].weights.empty()) << i;
  }
  EXPECT_FLOAT_EQ(graph.layers[1].attributes.negative_slope, 0.01f);
  EXPECT_FLOAT_EQ(layer_named(graph, "leaky").attributes.negative_slope, 0.2f);
  EXPECT_FALSE(graph.layers[3].attributes.gelu_tanh);
  EXPECT_TRUE(layer_named(graph, "gelu_tanh").attributes.gelu_tanh);
  EXPECT_FALSE(layer_named(graph, "gelu_none").attributes.gelu_tanh);
  EXPECT_FLOAT_EQ(graph.layers[9].attributes.alpha, 0.5f);
  EXPECT_EQ(graph.layers[9].name, "scale_9");
}

TEST(GraphSpec, LayerNormWeightsFollowAffineAndBias) {
  const Graph graph = parse(spec("[6, 10]", R"(
    {"type": "LayerNorm", "name": "last", "normalized_shape": 10},
    {"type": "LayerNorm", "name": "both", "normalized_shape": [6, 10], "eps": 1e-6},
    {"type": "LayerNorm", "name": "plain", "normalized_shape": [10], "elementwise_affine": false},
    {"type": "LayerNorm", "name": "no_bias", "normalized_shape": 10, "bias": false})"));
  const Layer& last = layer_named(graph, "last");
  EXPECT_EQ(last.kind, LayerKind::LayerNorm);
  EXPECT_EQ(last.output_shape, Shape({6, 10}));
  EXPECT_EQ(last.attributes.normalized_shape, Shape({10}));
  EXPECT_FLOAT_EQ(last.attributes.eps, 1e-5f);
  ASSERT_EQ(last.weights.size(), 2u);
  EXPECT_EQ(last.weights[0].tensor_name, "last.weight");
  EXPECT_EQ(last.weights[1].shape, Shape({10}));

  const Layer& both = layer_named(graph, "both");
  EXPECT_EQ(both.attributes.normalized_shape, Shape({6, 10}));
  EXPECT_FLOAT_EQ(both.attributes.eps, 1e-6f);
  EXPECT_EQ(both.weights[0].shape, Shape({6, 10}));

  const Layer& plain = layer_named(graph, "plain");
  EXPECT_FALSE(plain.attributes.elementwise_affine);
  EXPECT_FALSE(plain.attributes.has_bias);
  EXPECT_TRUE(plain.weights.empty());

  const Layer& no_bias = layer_named(graph, "no_bias");
  EXPECT_TRUE(no_bias.attributes.elementwise_affine);
  EXPECT_FALSE(no_bias.attributes.has_bias);
  ASSERT_EQ(no_bias.weights.size(), 1u);
  EXPECT_EQ(no_bias.weights[0].role, "weight");
}

TEST(GraphSpec, BatchNormOneAndTwoD) {
  const Graph graph = parse(spec("[6]", R"(
    {"type": "BatchNorm1d", "name": "bn_vec", "num_features": 6, "eps": 0.001, "momentum": 0.1,
     "affine": true, "track_running_stats": true},
    {"type": "BatchNorm1d", "name": "bn_plain", "num_features": 6, "affine": false,
     "momentum": null})"));
  const Layer& vec = layer_named(graph, "bn_vec");
  EXPECT_EQ(vec.kind, LayerKind::BatchNorm);
  EXPECT_EQ(vec.type_name, "BatchNorm1d");
  EXPECT_EQ(vec.attributes.num_features, 6);
  EXPECT_FLOAT_EQ(vec.attributes.eps, 0.001f);
  EXPECT_TRUE(vec.attributes.elementwise_affine);
  EXPECT_EQ(vec.output_shape, Shape({6}));
  ASSERT_EQ(vec.weights.size(), 4u);
  const char* roles[] = {"weight", "bias", "running_mean", "running_var"};
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(vec.weights[i].role, roles[i]);
    EXPECT_EQ(vec.weights[i].tensor_name, std::string("bn_vec.") + roles[i]);
    EXPECT_EQ(vec.weights[i].shape, Shape({6}));
  }
  const Layer& plain = layer_named(graph, "bn_plain");
  EXPECT_FALSE(plain.attributes.elementwise_affine);
  EXPECT_FALSE(plain.attributes.has_bias);
  ASSERT_EQ(plain.weights.size(), 2u);
  EXPECT_EQ(plain.weights[0].role, "running_mean");

  const Graph sequence = parse(spec("[6, 10]", R"({"type": "BatchNorm1d", "num_features": 6})"));
  EXPECT_EQ(sequence.layers[0].output_shape, Shape({6, 10}));
  EXPECT_EQ(sequence.layers[0].name, "batchnorm1d_0");

  const Graph image = parse(spec("[16, 8, 8]", R"({"type": "BatchNorm2d", "num_features": 16})"));
  EXPECT_EQ(image.layers[0].kind, LayerKind::BatchNorm);
  EXPECT_EQ(image.layers[0].type_name, "BatchNorm2d");
  EXPECT_EQ(image.layers[0].output_shape, Shape({16, 8, 8}));
  EXPECT_EQ(image.layers[0].weights[2].shape, Shape({16}));
}

TEST(GraphSpec, SoftmaxOverTheLastDim) {
  EXPECT_EQ(parse(spec("[10]", R"({"type": "Softmax"})")).layers[0].output_shape, Shape({10}));
  EXPECT_EQ(parse(spec("[10]", R"({"type": "Softmax", "dim": 1})")).layers[0].kind,
            LayerKind::Softmax);
  EXPECT_EQ(parse(spec("[3, 4]", R"({"type": "Softmax", "dim": 2})")).layers[0].output_shape,
            Shape({3, 4}));
  EXPECT_EQ(parse(spec("[3, 4]", R"({"type": "Softmax", "dim": -1})")).layers[0].output_shape,
            Shape({3, 4}));
}

TEST(GraphSpec, AddOfBranches) {
  const Graph graph = parse(spec("[8]", R"(
    {"type": "Linear", "name": "a", "in_features": 8, "out_features": 4},
    {"type": "Linear", "name": "b", "in_features": 8, "out_features": 4, "inputs": ["input"]},
    {"type": "Linear", "name": "c", "in_features": 8, "out_features": 4, "inputs": ["input"]},
    {"type": "Add", "name": "sum2", "inputs": ["a", "b"]},
    {"type": "Add", "name": "sum3", "inputs": ["a", "b", "c"]},
    {"type": "Add", "name": "double", "inputs": ["sum3", "sum3"]})"));
  EXPECT_EQ(layer_named(graph, "b").inputs, std::vector<int>({kGraphInput}));
  const Layer& sum2 = layer_named(graph, "sum2");
  EXPECT_EQ(sum2.kind, LayerKind::Add);
  EXPECT_EQ(sum2.inputs, std::vector<int>({0, 1}));
  EXPECT_EQ(sum2.output_shape, Shape({4}));
  EXPECT_EQ(layer_named(graph, "sum3").inputs, std::vector<int>({0, 1, 2}));
  EXPECT_EQ(layer_named(graph, "double").inputs, std::vector<int>({4, 4}));
}

TEST(GraphSpec, ConcatAlongChannelsAndNegativeDims) {
  const Graph graph = parse(spec("[3, 8, 8]", R"(
    {"type": "Conv2d", "name": "left", "in_channels": 3, "out_channels": 4, "kernel_size": 1},
    {"type": "Conv2d", "name": "right", "in_channels": 3, "out_channels": 6, "kernel_size": 1,
     "inputs": ["input"]},
    {"type": "Concat", "name": "cat", "inputs": ["left", "right", "input"]},
    {"type": "Concat", "name": "wide", "inputs": ["cat", "cat"], "dim": -1})"));
  const Layer& cat = layer_named(graph, "cat");
  EXPECT_EQ(cat.kind, LayerKind::Concat);
  EXPECT_EQ(cat.attributes.axis, 0);  // PyTorch dim 1
  EXPECT_EQ(cat.output_shape, Shape({13, 8, 8}));
  EXPECT_EQ(cat.inputs, std::vector<int>({0, 1, kGraphInput}));
  const Layer& wide = layer_named(graph, "wide");
  EXPECT_EQ(wide.attributes.axis, 2);
  EXPECT_EQ(wide.output_shape, Shape({13, 8, 16}));

  const Graph flat = parse(spec("[2, 3]", R"(
    {"type": "Linear", "name": "f", "in_features": 3, "out_features": 5},
    {"type": "Concat", "name": "cat", "inputs": ["input", "f"], "dim": 2})"));
  EXPECT_EQ(flat.layers[1].attributes.axis, 1);
  EXPECT_EQ(flat.layers[1].output_shape, Shape({2, 8}));
}

TEST(GraphSpec, SmallCnnChainsEveryShape) {
  const Graph graph = parse(spec("[1, 28, 28]", R"(
    {"type": "Conv2d", "name": "conv1", "in_channels": 1, "out_channels": 8, "kernel_size": 3,
     "padding": 1},
    {"type": "BatchNorm2d", "name": "bn1", "num_features": 8},
    {"type": "ReLU"},
    {"type": "MaxPool2d", "kernel_size": 2},
    {"type": "Conv2d", "name": "conv2", "in_channels": 8, "out_channels": 16, "kernel_size": 3},
    {"type": "AvgPool2d", "kernel_size": 2},
    {"type": "Flatten"},
    {"type": "Linear", "name": "fc", "in_features": 576, "out_features": 10},
    {"type": "Softmax", "dim": 1})"));
  const Shape expected[] = {{8, 28, 28}, {8, 28, 28}, {8, 28, 28}, {8, 14, 14}, {16, 12, 12},
                            {16, 6, 6},  {576},       {10},        {10}};
  ASSERT_EQ(graph.layers.size(), 9u);
  for (size_t i = 0; i < graph.layers.size(); ++i) {
    EXPECT_EQ(graph.layers[i].output_shape, expected[i]) << graph.layers[i].name;
  }
  // conv1 80 + bn1 32 + conv2 1168 + fc 5770
  EXPECT_EQ(graph.parameter_count(), 8 * 9 + 8 + 4 * 8 + 16 * 8 * 9 + 16 + 10 * 576 + 10);
}

TEST(GraphSpec, WeightsKeyRenamesTensors) {
  const Graph graph = parse(spec("[4]", R"(
    {"type": "Linear", "name": "head", "in_features": 4, "out_features": 2,
     "weights": {"weight": "classifier.0.weight", "bias": "classifier.0.bias"}},
    {"type": "Linear", "name": "features.3", "in_features": 2, "out_features": 2,
     "weights": {"bias": "b"}})"));
  EXPECT_EQ(graph.layers[0].weights[0].tensor_name, "classifier.0.weight");
  EXPECT_EQ(graph.layers[0].weights[1].tensor_name, "classifier.0.bias");
  EXPECT_EQ(graph.layers[1].weights[0].tensor_name, "features.3.weight");
  EXPECT_EQ(graph.layers[1].weights[1].tensor_name, "b");
}

TEST(GraphSpec, AcceptsAByteOrderMarkAndWhitespace) {
  const Graph graph = parse("\xEF\xBB\xBF\n  " + spec("[2]", R"({"type": "ReLU"})") + "\n\n");
  EXPECT_EQ(graph.output_shape(), Shape({2}));
}

// Every ```json block of docs/model-format.md is a valid spec, and the branches example has the
// shapes the document states.
TEST(GraphSpec, TheFormatDocumentsExamplesParse) {
  std::ifstream file(std::string(FUSEDNN_SOURCE_DIR) + "/docs/model-format.md");
  ASSERT_TRUE(file) << "docs/model-format.md not found";
  std::stringstream buffer;
  buffer << file.rdbuf();
  const std::string text = buffer.str();
  const std::string open = "```json\n";
  int examples = 0;
  size_t at = 0;
  while ((at = text.find(open, at)) != std::string::npos) {
    const size_t begin = at + open.size();
    const size_t end = text.find("```", begin);
    ASSERT_NE(end, std::string::npos);
    at = end + 3;
    const Graph graph = parse_model_spec(text.substr(begin, end - begin), "model-format.md");
    ++examples;
    if (graph.name == "branches") {
      EXPECT_EQ(layer_named(graph, "residual").output_shape, Shape({16, 8, 8}));
      EXPECT_EQ(layer_named(graph, "right").output_shape, Shape({8, 8, 8}));
      EXPECT_EQ(layer_named(graph, "joined").output_shape, Shape({16, 8, 8}));
      EXPECT_EQ(graph.layers[6].output_shape, Shape({16, 1, 1}));
      EXPECT_EQ(layer_named(graph, "flatten_7").output_shape, Shape({16}));
      EXPECT_EQ(graph.output_shape(), Shape({4}));
      EXPECT_EQ(layer_named(graph, "head").weights[0].tensor_name, "classifier.weight");
    }
  }
  EXPECT_EQ(examples, 2);
}

}  // namespace
}  // namespace fusednn
