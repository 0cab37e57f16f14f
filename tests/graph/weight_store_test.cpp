// SPDX-License-Identifier: Apache-2.0

#include "graph/weight_store.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "graph/spec_parser.hpp"
#include "graph_test_support.hpp"

namespace fusednn {
namespace {

using testing::expect_error;

Graph mlp_graph() {
  return parse_model_spec(R"({"fusednn": 1, "input": {"shape": [100]}, "layers": [
      {"type": "Linear", "name": "fc1", "in_features": 100, "out_features": 128},
      {"type": "BatchNorm1d", "name": "bn", "num_features": 128},
      {"type": "Linear", "name": "fc2", "in_features": 128, "out_features": 4, "bias": false}]})",
                          "mlp.json");
}

NamedTensor tensor(const std::string& name, Shape shape, const std::string& dtype = "F32",
                   const std::string& source = "weights.safetensors") {
  NamedTensor t;
  t.name = name;
  t.dtype = dtype;
  t.values.assign(static_cast<size_t>(element_count(shape)), 0.5f);
  t.shape = std::move(shape);
  t.source = source;
  return t;
}

std::vector<NamedTensor> all_mlp_tensors() {
  std::vector<NamedTensor> tensors;
  tensors.push_back(tensor("fc1.weight", {128, 100}));
  tensors.push_back(tensor("fc1.bias", {128}, "F16"));
  for (const char* role : {"weight", "bias", "running_mean", "running_var"}) {
    tensors.push_back(tensor(std::string("bn.") + role, {128}, "BF16"));
  }
  tensors.push_back(tensor("fc2.weight", {4, 128}));
  return tensors;
}

TEST(GraphWeightStore, DeclaresEveryWeightInOrder) {
  const WeightStore store(mlp_graph());
  EXPECT_EQ(store.declared_names(),
            std::vector<std::string>({"fc1.weight", "fc1.bias", "bn.weight", "bn.bias",
                                      "bn.running_mean", "bn.running_var", "fc2.weight"}));
  EXPECT_EQ(store.expected_shape("fc1.weight"), Shape({128, 100}));
  EXPECT_EQ(store.missing(), store.declared_names());
  EXPECT_FALSE(store.has("fc1.weight"));
}

TEST(GraphWeightStore, AcceptsACompleteSetAndIgnoresNumBatchesTracked) {
  WeightStore store(mlp_graph());
  std::vector<NamedTensor> tensors = all_mlp_tensors();
  NamedTensor counter = tensor("bn.num_batches_tracked", {}, "I64");
  counter.values.clear();  // other dtypes carry no values
  tensors.push_back(counter);
  store.accept(tensors);
  EXPECT_TRUE(store.missing().empty());
  store.require_complete();
  store.require_finite();
  EXPECT_EQ(store.values("fc1.weight").size(), 12800u);
  EXPECT_FLOAT_EQ(store.values("bn.running_var")[127], 0.5f);
  EXPECT_FALSE(store.has("bn.num_batches_tracked"));
}

TEST(GraphWeightStore, LoadsInSeveralBatchesAndLaterOnesReplace) {
  WeightStore store(mlp_graph());
  store.accept({tensor("fc1.weight", {128, 100})});
  EXPECT_TRUE(store.has("fc1.weight"));
  EXPECT_EQ(store.missing().size(), 6u);
  NamedTensor replacement = tensor("fc1.weight", {128, 100});
  replacement.values[0] = 7.0f;
  store.accept({replacement});
  EXPECT_FLOAT_EQ(store.values("fc1.weight")[0], 7.0f);
}

TEST(GraphWeightStore, UnexpectedTensorListsTheDeclaredNames) {
  WeightStore store(mlp_graph());
  expect_error([&] { store.accept({tensor("fc9.weight", {4})}); }, FDNN_STATUS_WEIGHT_MISMATCH,
               {"unexpected tensor 'fc9.weight' in weights.safetensors; the spec declares: "
                "fc1.weight, fc1.bias, bn.weight, bn.bias, bn.running_mean, bn.running_var, "
                "fc2.weight"});
}

TEST(GraphWeightStore, LongDeclaredListsAreCut) {
  std::string layers;
  for (int i = 0; i < 20; ++i) {
    layers +=
        std::string(i ? "," : "") + R"({"type": "Linear", "in_features": 2, "out_features": 2})";
  }
  WeightStore store(parse_model_spec(
      R"({"fusednn": 1, "input": {"shape": [2]}, "layers": [)" + layers + "]}", "wide.json"));
  expect_error([&] { store.accept({tensor("extra", {1})}); }, FDNN_STATUS_WEIGHT_MISMATCH,
               {"unexpected tensor 'extra'", "linear_0.weight, linear_0.bias",
                "linear_5.bias, ... (28 more)"});
}

TEST(GraphWeightStore, ShapeMismatchNamesBothShapesAndTheLayer) {
  WeightStore store(mlp_graph());
  expect_error(
      [&] {
        store.accept({tensor("fc1.weight", {100, 128})});
      },
      FDNN_STATUS_WEIGHT_MISMATCH,
      {"tensor 'fc1.weight' in weights.safetensors has shape [100, 128] but layer 'fc1' "
       "(Linear) expects [128, 100]",
       "transposed"});
  expect_error([&] { store.accept({tensor("bn.running_mean", {64})}); },
               FDNN_STATUS_WEIGHT_MISMATCH,
               {"tensor 'bn.running_mean' in weights.safetensors has shape [64] but layer 'bn' "
                "(BatchNorm1d) expects [128]"});
}

TEST(GraphWeightStore, UnacceptedDtypeNamesItAndTheAcceptedOnes) {
  WeightStore store(mlp_graph());
  NamedTensor ints = tensor("fc1.bias", {128}, "I64");
  ints.values.clear();
  expect_error([&] { store.accept({ints}); }, FDNN_STATUS_WEIGHT_MISMATCH,
               {"tensor 'fc1.bias' in weights.safetensors has dtype I64", "F32, F16 or BF16"});
  NamedTensor doubles = tensor("fc1.bias", {128}, "F64");
  doubles.values.clear();
  expect_error([&] { store.accept({doubles}); }, FDNN_STATUS_WEIGHT_MISMATCH, {"dtype F64"});
}

TEST(GraphWeightStore, ABadBatchLoadsNothing) {
  WeightStore store(mlp_graph());
  std::vector<NamedTensor> tensors = all_mlp_tensors();
  tensors.push_back(tensor("fc2.weight_typo", {4, 128}));
  expect_error([&] { store.accept(tensors); }, FDNN_STATUS_WEIGHT_MISMATCH,
               {"unexpected tensor 'fc2.weight_typo'"});
  EXPECT_EQ(store.missing().size(), 7u);
}

TEST(GraphWeightStore, DuplicateInOneBatch) {
  WeightStore store(mlp_graph());
  expect_error(
      [&] {
        store.accept(
            {tensor("fc1.bias", {128}), tensor("fc1.bias", {128}, "F32", "a.safetensors")});
      },
      FDNN_STATUS_WEIGHT_MISMATCH, {"tensor 'fc1.bias' appears twice in a.safetensors"});
}

TEST(GraphWeightStore, ValueCountMustMatchTheShape) {
  WeightStore store(mlp_graph());
  NamedTensor short_tensor = tensor("fc1.bias", {128});
  short_tensor.values.resize(3);
  short_tensor.source = "";
  expect_error(
      [&] { store.accept({short_tensor}); }, FDNN_STATUS_WEIGHT_MISMATCH,
      {"tensor 'fc1.bias' in the tensors given holds 3 values, but its shape [128] needs 128"});
}

TEST(GraphWeightStore, RequireCompleteNamesEveryMissingTensor) {
  WeightStore store(mlp_graph());
  std::vector<NamedTensor> tensors = all_mlp_tensors();
  tensors.erase(tensors.begin() + 1);  // fc1.bias
  tensors.pop_back();                  // fc2.weight
  store.accept(tensors);
  EXPECT_EQ(store.missing(), std::vector<std::string>({"fc1.bias", "fc2.weight"}));
  expect_error([&] { store.require_complete(); }, FDNN_STATUS_WEIGHT_MISMATCH,
               {"2 of 7 weight tensors are missing", "'fc1.bias' [128] for layer 'fc1' (Linear)",
                "'fc2.weight' [4, 128] for layer 'fc2' (Linear)"});
}

TEST(GraphWeightStore, RequireFiniteNamesEachTensorAndItsFirstBadIndex) {
  WeightStore store(mlp_graph());
  std::vector<NamedTensor> tensors = all_mlp_tensors();
  tensors[0].values[3 * 100 + 17] = std::numeric_limits<float>::quiet_NaN();
  tensors[0].values[5 * 100] = std::numeric_limits<float>::infinity();
  tensors[6].values[130] = -std::numeric_limits<float>::infinity();
  store.accept(tensors);  // non-finite values load; validation reports them
  expect_error([&] { store.require_finite(); }, FDNN_STATUS_NON_FINITE_WEIGHT,
               {"'fc1.weight' has 2 non-finite values, the first (NaN) at index [3, 17]",
                "'fc2.weight' has 1 non-finite value, the first (-Inf) at index [1, 2]"});
}

TEST(GraphWeightStore, LookupsOfUnknownOrUnloadedNames) {
  WeightStore store(mlp_graph());
  expect_error([&] { store.values("fc1.weight"); }, FDNN_STATUS_INVALID_STATE,
               {"'fc1.weight' is not loaded"});
  expect_error([&] { store.values("nope"); }, FDNN_STATUS_INVALID_ARGUMENT, {"'nope'"});
  expect_error([&] { store.expected_shape("nope"); }, FDNN_STATUS_INVALID_ARGUMENT, {"'nope'"});
}

}  // namespace
}  // namespace fusednn
