// SPDX-License-Identifier: Apache-2.0
// Every way a spec can be wrong: the status, and that the message names the culprit (source,
// layer name, index and type, and the field).
#include <gtest/gtest.h>

#include <string>

#include "../small_stack.hpp"
#include "graph/spec_parser.hpp"
#include "graph_test_support.hpp"

namespace fusednn {
namespace {

using testing::expect_error;

std::string spec(const std::string& input_shape, const std::string& layers,
                 const std::string& extra = "") {
  return R"({"fusednn": 1, "input": {"shape": )" + input_shape + R"(}, "layers": [)" + layers +
         "]" + extra + "}";
}

void expect_invalid(const std::string& text, std::initializer_list<std::string> fragments) {
  expect_error([&] { parse_model_spec(text, "model.json"); }, FDNN_STATUS_INVALID_MODEL, fragments);
}

// One layer on the given input; the message must name it as layer #0 of `type`.
void expect_layer_invalid(const std::string& input_shape, const std::string& layer,
                          std::initializer_list<std::string> fragments) {
  expect_invalid(spec(input_shape, layer), fragments);
}

// ---- JSON syntax

TEST(GraphSpecErrors, SyntaxErrorGivesLineAndColumn) {
  // The missing comma: the parser stops at the end of the unexpected "layers" token, line 3,
  // column 10.
  const std::string text = "{\"fusednn\": 1,\n  \"input\": {\"shape\": [4]}\n  \"layers\": []}";
  expect_error(
      [&] { parse_model_spec(text, "broken.json"); }, FDNN_STATUS_PARSE_ERROR,
      {"broken.json: JSON syntax error at line 3, column 10", "syntax error while parsing object"});
}

TEST(GraphSpecErrors, SyntaxErrorInTheMiddleOfALine) {
  const std::string text = "{\n  \"fusednn\": tru\n}";  // 'tru' then a newline
  expect_error([&] { parse_model_spec(text, "<memory>"); }, FDNN_STATUS_PARSE_ERROR,
               {"<memory>", "line 2, column"});
}

TEST(GraphSpecErrors, EmptyAndTruncatedText) {
  expect_error([] { parse_model_spec("", "empty.json"); }, FDNN_STATUS_PARSE_ERROR,
               {"empty.json", "line 1, column 1"});
  expect_error([] { parse_model_spec("{\"fusednn\": 1,", "cut.json"); }, FDNN_STATUS_PARSE_ERROR,
               {"cut.json", "line 1, column 15"});
}

TEST(GraphSpecErrors, NumberTooLargeForADouble) {
  expect_error([] { parse_model_spec(R"({"fusednn": 1e400})", "big.json"); },
               FDNN_STATUS_PARSE_ERROR, {"big.json", "number overflow", "1e400"});
}

TEST(GraphSpecErrors, DeepNestingIsSummarizedNotDumped) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  expect_error([&] { parse_model_spec(deep, "deep.json"); }, FDNN_STATUS_INVALID_MODEL,
               {"deep.json: a model spec must be a JSON object, got array of 1 entry"});
}

// Nesting 20,000 deep inside every place a spec holds a value, parsed on a 256 KiB stack: the spec
// reader must neither copy nor describe a value by recursing through it.
TEST(GraphSpecErrors, DeepNestingAnywhereOnASmallStack) {
  const std::string deep = std::string(20000, '[') + std::string(20000, ']');
  const std::string deep_object = "{\"a\": " + deep + "}";
  const std::string texts[] = {
      spec("[4]", R"({"type": "Linear", "in_features": 4, "out_features": 2})",
           ", \"extra\": " + deep),
      spec(deep, R"({"type": "ReLU"})"),
      spec("[4]", R"({"type": "Linear", "in_features": )" + deep + R"(, "out_features": 2})"),
      spec("[4]", R"({"type": "Linear", "in_features": 4, "out_features": 2, "weights": )" +
                      deep_object + "}"),
      spec("[4]", R"({"type": "ReLU", "inputs": )" + deep + "}"),
      spec("[4]", R"({"type": )" + deep + "}"),
      spec("[4]", deep),
      R"({"fusednn": )" + deep + "}",
      R"({"fusednn": 1, "name": )" + deep + "}",
  };
  testing::run_on_small_stack([&] {
    for (const std::string& text : texts) {
      try {
        parse_model_spec(text, "deep.json");
        ADD_FAILURE() << "accepted a deeply nested spec";
      } catch (const StatusError& e) {
        EXPECT_TRUE(e.status() == FDNN_STATUS_INVALID_MODEL ||
                    e.status() == FDNN_STATUS_PARSE_ERROR)
            << e.what();
        EXPECT_NE(std::string(e.what()).find("deep.json"), std::string::npos) << e.what();
        EXPECT_LT(std::string(e.what()).size(), 2000u);
      }
    }
  });
}

TEST(GraphSpecErrors, DuplicateKeyIsRejected) {
  expect_invalid(spec("[4]", R"({"type": "Linear", "in_features": 4, "out_features": 2,
                                 "bias": false, "bias": true})"),
                 {"model.json", "'bias' appears twice"});
}

// ---- Top level

TEST(GraphSpecErrors, TopLevelStructure) {
  expect_invalid("[1, 2]", {"model.json", "must be a JSON object"});
  expect_invalid(R"({"input": {"shape": [4]}, "layers": [{"type": "ReLU"}]})",
                 {"missing key 'fusednn'", "version 1"});
  expect_invalid(R"({"fusednn": 2, "input": {"shape": [4]}, "layers": [{"type": "ReLU"}]})",
                 {"'fusednn' is 2", "version 1"});
  expect_invalid(R"({"fusednn": "1", "input": {"shape": [4]}, "layers": [{"type": "ReLU"}]})",
                 {"'fusednn' is string \"1\""});
  expect_invalid(spec("[4]", R"({"type": "ReLU"})", R"(, "layer": [])"),
                 {"unknown top-level key 'layer'", "fusednn, name, input, layers, output"});
  expect_invalid(spec("[4]", R"({"type": "ReLU"})", R"(, "name": 7)"), {"'name' must be a string"});
}

TEST(GraphSpecErrors, InputShapeAndDtype) {
  expect_invalid(R"({"fusednn": 1, "layers": [{"type": "ReLU"}]})", {"missing key 'input'"});
  expect_invalid(R"({"fusednn": 1, "input": {}, "layers": [{"type": "ReLU"}]})",
                 {"missing key 'input.shape'"});
  expect_invalid(spec("[]", R"({"type": "ReLU"})"), {"'input.shape' must be a non-empty list"});
  expect_invalid(spec("[4, 0]", R"({"type": "ReLU"})"), {"'input.shape'", "got 0"});
  expect_invalid(spec("[-3]", R"({"type": "ReLU"})"), {"'input.shape'", "got -3"});
  expect_invalid(spec("[2.5]", R"({"type": "ReLU"})"), {"'input.shape'", "got 2.5"});
  expect_invalid(spec("[\"4\"]", R"({"type": "ReLU"})"), {"'input.shape'", "got string \"4\""});
  expect_invalid(spec("4", R"({"type": "ReLU"})"), {"'input.shape' must be a non-empty list"});
  expect_invalid(spec("[1, 1, 1, 1, 1, 1, 1, 1, 1]", R"({"type": "ReLU"})"),
                 {"has 9 dims; at most 8"});
  expect_invalid(spec("[3000000000]", R"({"type": "ReLU"})"), {"'input.shape'", "3000000000"});
  expect_invalid(R"({"fusednn": 1, "input": {"shape": [4], "dtype": "float16"},
                     "layers": [{"type": "ReLU"}]})",
                 {"'input.dtype' is string \"float16\"", "only \"float32\""});
  expect_invalid(R"({"fusednn": 1, "input": {"shape": [4], "dtyp": "float32"},
                     "layers": [{"type": "ReLU"}]})",
                 {"unknown key 'input.dtyp'"});
}

TEST(GraphSpecErrors, LayerListAndLayerObjects) {
  expect_invalid(R"({"fusednn": 1, "input": {"shape": [4]}})", {"missing key 'layers'"});
  expect_invalid(spec("[4]", ""), {"'layers' must be a non-empty list"});
  expect_invalid(spec("[4]", R"({"type": "ReLU"}, 5)"), {"layer #1 must be a JSON object"});
  expect_invalid(spec("[4]", R"({"name": "x"})"), {"layer 'x' (#0): missing required key 'type'"});
  expect_invalid(spec("[4]", R"({"type": "ReLU"}, {"type": 3})"),
                 {"layer #1: 'type' must be a string"});
  expect_invalid(spec("[4]", R"({"type": "ReLU", "name": ""})"),
                 {"layer #0: 'name' must be a non-empty string"});
}

TEST(GraphSpecErrors, UnknownTypeListsTheValidOnes) {
  expect_invalid(spec("[4]", R"({"type": "ReLU"}, {"type": "Conv3d", "name": "c"})"),
                 {"layer 'c' (#1): unknown type 'Conv3d'",
                  "Linear, Conv2d, MaxPool2d, AvgPool2d, Flatten, ReLU, LeakyReLU, GELU, SiLU, "
                  "Sigmoid, Tanh, Scale, LayerNorm, BatchNorm1d, BatchNorm2d, Softmax, Add, "
                  "Concat"});
  expect_invalid(spec("[4]", R"({"type": "relu"})"), {"unknown type 'relu'"});
}

TEST(GraphSpecErrors, UnknownKeyNamesTheKeyAndTheLayer) {
  expect_layer_invalid("[3, 8, 8]",
                       R"({"type": "Conv2d", "name": "c1", "in_channels": 3, "out_channels": 4,
                           "kernal_size": 3})",
                       {"model.json: layer 'c1' (Conv2d, #0): unknown key 'kernal_size'",
                        "Conv2d takes: in_channels, out_channels, kernel_size"});
  expect_layer_invalid(
      "[4]", R"({"type": "ReLU", "inplace": true})",
      {"layer 'relu_0' (ReLU, #0): unknown key 'inplace'", "ReLU takes no attributes"});
  expect_layer_invalid("[4]", R"({"type": "Linear", "in_features": 4, "out_features": 2,
                                  "input": ["input"]})",
                       {"unknown key 'input'", "every layer takes: type, name, inputs, weights"});
}

TEST(GraphSpecErrors, WrongJsonTypesForAttributes) {
  expect_layer_invalid(
      "[4]", R"({"type": "Linear", "name": "fc", "in_features": "4", "out_features": 2})",
      {"layer 'fc' (Linear, #0): 'in_features' must be an integer, got string \"4\""});
  expect_layer_invalid("[4]", R"({"type": "Linear", "in_features": 4.0, "out_features": 2})",
                       {"'in_features' must be an integer, got 4.0"});
  expect_layer_invalid("[4]",
                       R"({"type": "Linear", "in_features": 4, "out_features": 2, "bias": 1})",
                       {"'bias' must be true or false, got 1"});
  expect_layer_invalid(
      "[3, 8, 8]", R"({"type": "Conv2d", "in_channels": 3, "out_channels": 4, "kernel_size": [3]})",
      {"'kernel_size' must be an integer or a list [height, width]"});
  expect_layer_invalid("[3, 8, 8]",
                       R"({"type": "Conv2d", "in_channels": 3, "out_channels": 4, "kernel_size": 3,
                           "padding": "full"})",
                       {"'padding' must be an integer, [height, width], \"valid\" or \"same\""});
  expect_layer_invalid("[4]", R"({"type": "Scale", "alpha": "2"})",
                       {"'alpha' must be a number, got string \"2\""});
  expect_layer_invalid("[4]", R"({"type": "Scale", "alpha": 1e300})",
                       {"outside the float32 range"});
  expect_layer_invalid("[4]", R"({"type": "GELU", "approximate": true})",
                       {"'approximate' must be a string"});
  expect_layer_invalid("[4]", R"({"type": "Softmax", "dim": null})", {"'dim' must be an integer"});
  expect_layer_invalid("[6]", R"({"type": "BatchNorm1d", "num_features": 6, "momentum": "x"})",
                       {"'momentum' must be a number"});
  expect_layer_invalid("[6]", R"({"type": "LayerNorm", "normalized_shape": "6"})",
                       {"'normalized_shape' must be a positive integer or a non-empty list"});
}

TEST(GraphSpecErrors, RequiredAttributes) {
  expect_layer_invalid("[4]", R"({"type": "Linear", "in_features": 4})",
                       {"layer 'linear_0' (Linear, #0): missing required key 'out_features'"});
  expect_layer_invalid("[4]", R"({"type": "Scale"})", {"missing required key 'alpha'"});
  expect_layer_invalid("[3, 4, 4]", R"({"type": "MaxPool2d"})",
                       {"missing required key 'kernel_size'"});
  expect_layer_invalid("[4]", R"({"type": "LayerNorm"})",
                       {"missing required key 'normalized_shape'"});
  expect_layer_invalid("[4]", R"({"type": "BatchNorm1d"})",
                       {"missing required key 'num_features'"});
}

TEST(GraphSpecErrors, ZeroNegativeAndHugeSizes) {
  expect_layer_invalid("[4]", R"({"type": "Linear", "in_features": 4, "out_features": 0})",
                       {"'out_features' must be a positive integer, got 0"});
  expect_layer_invalid(
      "[3, 8, 8]", R"({"type": "Conv2d", "in_channels": -3, "out_channels": 4, "kernel_size": 3})",
      {"'in_channels' must be a positive integer, got -3"});
  expect_layer_invalid("[3, 8, 8]",
                       R"({"type": "Conv2d", "in_channels": 3, "out_channels": 4, "kernel_size": 3,
                           "stride": [1, 0]})",
                       {"'stride' must be a positive integer, got 0"});
  expect_layer_invalid("[3, 8, 8]",
                       R"({"type": "Conv2d", "in_channels": 3, "out_channels": 4, "kernel_size": 3,
                           "padding": -1})",
                       {"'padding' must be a non-negative integer, got -1"});
  expect_layer_invalid("[4]", R"({"type": "Linear", "in_features": 4, "out_features": 3000000000})",
                       {"'out_features' is 3000000000, more than 2147483647"});
  expect_layer_invalid("[4]", R"({"type": "Linear", "in_features": 4,
                                  "out_features": 18446744073709551615})",
                       {"'out_features' is too large"});
  // Each extent is allowed, but the weight is not: 2^31-1 x 2^31-1 elements.
  expect_invalid(spec("[2147483647]", R"({"type": "Linear", "in_features": 2147483647,
                                          "out_features": 2147483647})"),
                 {"weight 'weight'", "has more than"});
}

TEST(GraphSpecErrors, LinearInFeaturesMismatch) {
  expect_invalid(
      spec("[100]", R"(
      {"type": "Linear", "name": "fc1", "in_features": 100, "out_features": 64},
      {"type": "ReLU"},
      {"type": "Linear", "name": "fc2", "in_features": 100, "out_features": 10,
       "inputs": ["fc1"]})"),
      {"layer 'fc2' (Linear, #2): in_features is 100 but its input 'fc1' produces [64]"});
  expect_invalid(
      spec("[64]", R"({"type": "Linear", "name": "fc1", "in_features": 100, "out_features": 8})"),
      {"layer 'fc1' (Linear, #0): in_features is 100 but the model input is [64]"});
}

TEST(GraphSpecErrors, Conv2dChannelsGroupsAndRank) {
  expect_layer_invalid(
      "[3, 8, 8]",
      R"({"type": "Conv2d", "name": "c", "in_channels": 4, "out_channels": 4, "kernel_size": 3})",
      {"layer 'c' (Conv2d, #0): in_channels is 4 but the model input is [3, 8, 8]"});
  expect_layer_invalid(
      "[6, 8, 8]",
      R"({"type": "Conv2d", "in_channels": 6, "out_channels": 8, "kernel_size": 3, "groups": 4})",
      {"in_channels (6) is not divisible by groups (4)"});
  expect_layer_invalid(
      "[8, 8, 8]",
      R"({"type": "Conv2d", "in_channels": 8, "out_channels": 6, "kernel_size": 3, "groups": 4})",
      {"out_channels (6) is not divisible by groups (4)"});
  expect_layer_invalid(
      "[64]", R"({"type": "Conv2d", "in_channels": 1, "out_channels": 6, "kernel_size": 3})",
      {"Conv2d expects a per-sample [C, H, W] input, but the model input is [64]"});
  expect_layer_invalid("[3, 8, 8]",
                       R"({"type": "Conv2d", "in_channels": 3, "out_channels": 4, "kernel_size": 3,
                           "stride": 2, "padding": "same"})",
                       {"padding \"same\" needs stride 1"});
  expect_layer_invalid("[3, 8, 8]",
                       R"({"type": "Conv2d", "in_channels": 3, "out_channels": 4, "kernel_size": 4,
                           "padding": "same"})",
                       {"pads unevenly"});
}

TEST(GraphSpecErrors, OutputSizeNotPositive) {
  // floor((5 + 0 - 1*(7 - 1) - 1) / 1) + 1 = -1
  expect_layer_invalid(
      "[1, 5, 9]",
      R"({"type": "Conv2d", "name": "big", "in_channels": 1, "out_channels": 2, "kernel_size": 7})",
      {"layer 'big' (Conv2d, #0): output height would be -1", "window does not fit"});
  // Width: floor((4 + 0 - 2*(3 - 1) - 1) / 1) + 1 = 0
  expect_layer_invalid("[1, 9, 4]",
                       R"({"type": "Conv2d", "in_channels": 1, "out_channels": 2, "kernel_size": 3,
                           "dilation": 2})",
                       {"output width would be 0"});
  expect_layer_invalid("[1, 2, 2]", R"({"type": "MaxPool2d", "kernel_size": 3})",
                       {"(MaxPool2d, #0): output height would be 0"});
}

TEST(GraphSpecErrors, PoolingRestrictions) {
  expect_layer_invalid("[1, 8, 8]", R"({"type": "MaxPool2d", "kernel_size": 2, "dilation": 2})",
                       {"(MaxPool2d, #0): dilation [2, 2] is not supported"});
  expect_layer_invalid("[1, 8, 8]", R"({"type": "MaxPool2d", "kernel_size": 2, "ceil_mode": true})",
                       {"(MaxPool2d, #0): ceil_mode true is not supported"});
  expect_layer_invalid("[1, 8, 8]", R"({"type": "AvgPool2d", "kernel_size": 2, "ceil_mode": true})",
                       {"(AvgPool2d, #0): ceil_mode true is not supported"});
  expect_layer_invalid("[1, 8, 8]", R"({"type": "AvgPool2d", "kernel_size": 3, "padding": 2})",
                       {"padding 2 is more than half of kernel_size 3"});
  expect_layer_invalid("[1, 8, 8]", R"({"type": "AvgPool2d", "kernel_size": 2, "dilation": 1})",
                       {"unknown key 'dilation'"});
  expect_layer_invalid("[8, 8]", R"({"type": "MaxPool2d", "kernel_size": 2})",
                       {"MaxPool2d expects a per-sample [C, H, W] input"});
}

TEST(GraphSpecErrors, FlattenDims) {
  expect_layer_invalid("[4, 5]", R"({"type": "Flatten", "start_dim": 0})",
                       {"(Flatten, #0): 'start_dim' is 0, which is the batch dimension"});
  expect_layer_invalid("[4, 5]", R"({"type": "Flatten", "start_dim": -3})",
                       {"'start_dim' is -3, which is the batch dimension"});
  expect_layer_invalid("[4, 5]", R"({"type": "Flatten", "start_dim": 3})",
                       {"'start_dim' is 3, out of range [-3, 2]"});
  expect_layer_invalid("[4, 5]", R"({"type": "Flatten", "end_dim": -4})",
                       {"'end_dim' is -4, out of range"});
  expect_layer_invalid("[4, 5]", R"({"type": "Flatten", "start_dim": 2, "end_dim": 1})",
                       {"start_dim (2) comes after end_dim (1)"});
}

TEST(GraphSpecErrors, ActivationAttributes) {
  expect_layer_invalid("[4]", R"({"type": "GELU", "approximate": "fast"})",
                       {"(GELU, #0): 'approximate' must be \"none\" or \"tanh\", got \"fast\""});
}

TEST(GraphSpecErrors, NormalizationLayers) {
  expect_layer_invalid(
      "[6, 10]", R"({"type": "LayerNorm", "name": "ln", "normalized_shape": [6]})",
      {"layer 'ln' (LayerNorm, #0): normalized_shape [6] is not the trailing dims", "[6, 10]"});
  expect_layer_invalid("[10]", R"({"type": "LayerNorm", "normalized_shape": [2, 10]})",
                       {"normalized_shape [2, 10] is not the trailing dims"});
  expect_layer_invalid("[10]", R"({"type": "LayerNorm", "normalized_shape": 10, "eps": -1})",
                       {"'eps' must not be negative"});
  expect_layer_invalid(
      "[8, 4, 4]", R"({"type": "BatchNorm2d", "name": "bn", "num_features": 16})",
      {"layer 'bn' (BatchNorm2d, #0): num_features is 16 but the model input is [8, 4, 4]"});
  expect_layer_invalid("[8]", R"({"type": "BatchNorm2d", "num_features": 8})",
                       {"BatchNorm2d expects a per-sample [C, H, W] input"});
  expect_layer_invalid("[8, 4, 4]", R"({"type": "BatchNorm1d", "num_features": 8})",
                       {"BatchNorm1d expects a per-sample [C] or [C, L] input"});
  expect_layer_invalid(
      "[8]", R"({"type": "BatchNorm1d", "num_features": 8, "track_running_stats": false})",
      {"track_running_stats false is not supported"});
}

TEST(GraphSpecErrors, SoftmaxOnlyOverTheLastDim) {
  expect_layer_invalid("[3, 4]", R"({"type": "Softmax", "dim": 1})",
                       {"(Softmax, #0): Softmax over dim 1 is not supported", "-1, or 2"});
  expect_layer_invalid("[10]", R"({"type": "Softmax", "dim": 0})", {"Softmax over dim 0"});
}

TEST(GraphSpecErrors, AddAndConcatShapes) {
  expect_invalid(spec("[8]", R"(
      {"type": "Linear", "name": "a", "in_features": 8, "out_features": 4},
      {"type": "Linear", "name": "b", "in_features": 8, "out_features": 5, "inputs": ["input"]},
      {"type": "Add", "name": "sum", "inputs": ["a", "b"]})"),
                 {"layer 'sum' (Add, #2): input 'b' produces [5] but input 'a' produces [4]",
                  "no broadcasting"});
  expect_invalid(spec("[8]", R"({"type": "Add", "name": "sum"})"),
                 {"layer 'sum' (Add, #0): Add needs 2 or more inputs, got 1"});
  expect_invalid(
      spec("[3, 4]", R"(
      {"type": "Linear", "name": "a", "in_features": 4, "out_features": 5},
      {"type": "Concat", "name": "cat", "inputs": ["input", "a"]})"),
      {"layer 'cat' (Concat, #1): input 'a' produces [3, 5] but the model input produces [3, 4]",
       "along dim 1"});
  expect_invalid(spec("[3, 4]", R"({"type": "Concat", "inputs": ["input", "input"], "dim": 0})"),
                 {"(Concat, #0): 'dim' is 0, which is the batch dimension"});
  expect_invalid(spec("[3, 4]", R"({"type": "Concat", "inputs": ["input", "input"], "dim": 3})"),
                 {"'dim' is 3, out of range [-3, 2]"});
  expect_invalid(spec("[3, 4]", R"(
      {"type": "Flatten", "name": "flat"},
      {"type": "Concat", "inputs": ["input", "flat"]})"),
                 {"input 'flat' produces [12] but the model input produces [3, 4]"});
}

TEST(GraphSpecErrors, InputsMustNameEarlierLayers) {
  expect_invalid(spec("[4]", R"({"type": "ReLU", "name": "r", "inputs": ["nope"]})"),
                 {"layer 'r' (ReLU, #0): unknown input 'nope'"});
  expect_invalid(
      spec("[4]", R"(
      {"type": "ReLU", "name": "r", "inputs": ["t"]},
      {"type": "Tanh", "name": "t"})"),
      {"layer 'r' (ReLU, #0): input 't' is layer #1, which comes later", "topological order"});
  expect_invalid(spec("[4]", R"({"type": "ReLU", "name": "r", "inputs": ["r"]})"),
                 {"input 'r' is the layer itself"});
  expect_invalid(spec("[4]", R"({"type": "ReLU", "inputs": "input"})"),
                 {"'inputs' must be a non-empty list of layer names"});
  expect_invalid(spec("[4]", R"({"type": "ReLU", "inputs": []})"),
                 {"'inputs' must be a non-empty list"});
  expect_invalid(spec("[4]", R"({"type": "ReLU", "inputs": [0]})"),
                 {"'inputs' must hold layer names (strings), got 0"});
  expect_invalid(spec("[4]", R"({"type": "ReLU", "name": "r", "inputs": ["input", "input"]})"),
                 {"layer 'r' (ReLU, #0): ReLU takes exactly 1 input, got 2"});
}

TEST(GraphSpecErrors, LayerNamesAreUnique) {
  expect_invalid(spec("[4]", R"(
      {"type": "ReLU", "name": "act"},
      {"type": "Tanh", "name": "act"})"),
                 {"layer 'act' (Tanh, #1): the name 'act' is already used by layer #0 (ReLU)"});
  expect_invalid(
      spec("[4]", R"(
      {"type": "ReLU", "name": "relu_1"},
      {"type": "ReLU"})"),
      {"layer 'relu_1' (ReLU, #1): the name 'relu_1' is already used by layer #0", "default name"});
  expect_invalid(spec("[4]", R"({"type": "ReLU", "name": "input"})"),
                 {"the name 'input' is reserved for the model input"});
}

TEST(GraphSpecErrors, WeightNameOverrides) {
  expect_invalid(
      spec("[4]", R"({"type": "Linear", "name": "fc", "in_features": 4, "out_features": 2,
                                 "weights": {"wieght": "w"}})"),
      {"layer 'fc' (Linear, #0): 'weights' names 'wieght'", "weight, bias"});
  expect_invalid(spec("[4]", R"({"type": "Linear", "in_features": 4, "out_features": 2,
                                 "bias": false, "weights": {"bias": "b"}})"),
                 {"'weights' names 'bias', but this layer's weights are: weight"});
  expect_invalid(spec("[4]", R"({"type": "ReLU", "weights": {"weight": "w"}})"),
                 {"this layer has no weights"});
  expect_invalid(spec("[4]", R"({"type": "Linear", "in_features": 4, "out_features": 2,
                                 "weights": {"weight": 3}})"),
                 {"'weights.weight' must be a non-empty tensor name, got 3"});
  expect_invalid(spec("[4]", R"({"type": "Linear", "in_features": 4, "out_features": 2,
                                 "weights": ["w"]})"),
                 {"'weights' must be an object"});
  expect_invalid(spec("[4]", R"(
      {"type": "Linear", "name": "a", "in_features": 4, "out_features": 4},
      {"type": "Linear", "name": "b", "in_features": 4, "out_features": 4,
       "weights": {"weight": "a.weight"}})"),
                 {"layer 'b' (Linear, #1): tensor name 'a.weight' (its weight) is already used by "
                  "layer 'a' weight"});
}

TEST(GraphSpecErrors, OutputMustNameALayer) {
  expect_invalid(spec("[4]", R"({"type": "ReLU"})", R"(, "output": "fc9")"),
                 {"'output' names 'fc9', but no layer has that name"});
  expect_invalid(spec("[4]", R"({"type": "ReLU"})", R"(, "output": "input")"),
                 {"'output' names 'input'"});
  expect_invalid(spec("[4]", R"({"type": "ReLU"})", R"(, "output": 0)"),
                 {"'output' must be a layer name"});
}

}  // namespace
}  // namespace fusednn
