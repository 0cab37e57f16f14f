// SPDX-License-Identifier: Apache-2.0
// Golden tests: models built, exported and run by PyTorch (tests/fixtures/golden/
// make_golden_fixtures.py, torch on the CPU, float32) must give the same outputs through the
// public API, within 1e-5 of the output's largest magnitude, at batch 1, 3, 32 and 257.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "fusednn/fusednn.h"
#include "graph/safetensors_file.hpp"

namespace {

const std::string kGolden = std::string(FUSEDNN_TEST_FIXTURES_DIR) + "/golden/";
constexpr int64_t kBatches[] = {1, 3, 32, 257};
constexpr double kTolerance = 1e-5;

struct Reference {
  std::map<std::string, fusednn::NamedTensor> tensors;
  const fusednn::NamedTensor& at(const std::string& name) const { return tensors.at(name); }
};

Reference read_reference(const std::string& model) {
  Reference reference;
  for (auto& tensor : fusednn::read_safetensors(kGolden + model + "/io.safetensors").tensors) {
    reference.tensors[tensor.name] = tensor;
  }
  return reference;
}

// max |got - expected| / max |expected|: the error relative to the output's scale, so that
// outputs near zero (after ReLU, in Softmax tails) do not blow the measure up.
double relative_error(const std::vector<float>& got, const std::vector<float>& expected) {
  double worst = 0, scale = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    worst = std::max(worst, std::fabs(double(got[i]) - double(expected[i])));
    scale = std::max(scale, std::fabs(double(expected[i])));
  }
  return worst / std::max(scale, 1e-30);
}

void expect_matches_pytorch(fdnn_model* model, const std::string& name) {
  const Reference reference = read_reference(name);
  for (int64_t batch : kBatches) {
    const auto& input = reference.at("input_b" + std::to_string(batch)).values;
    const auto& expected = reference.at("output_b" + std::to_string(batch)).values;
    std::vector<float> output(expected.size(), NAN);  // poisoned: every element must be written
    ASSERT_EQ(
        fdnn_model_run(model, batch, input.data(), input.size(), output.data(), output.size()),
        FDNN_STATUS_OK)
        << name << " batch " << batch << ": " << fdnn_last_error_message();
    const double error = relative_error(output, expected);
    EXPECT_LE(error, kTolerance) << name << " batch " << batch;
    ::testing::Test::RecordProperty(name + "_b" + std::to_string(batch) + "_relative_error",
                                    std::to_string(error));
  }
}

fdnn_model* open_model(const std::string& path) {
  fdnn_model_options options;
  fdnn_model_options_init(&options, sizeof options);
  options.max_batch = 257;
  fdnn_model* model = nullptr;
  EXPECT_EQ(fdnn_model_create_from_file(path.c_str(), &options, &model), FDNN_STATUS_OK)
      << path << ": " << fdnn_last_error_message();
  return model;
}

class GoldenBundle : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenBundle, MatchesPyTorch) {
  fdnn_model* model = open_model(kGolden + GetParam() + "/model.safetensors");
  ASSERT_NE(model, nullptr);
  ASSERT_EQ(fdnn_model_validate(model), FDNN_STATUS_OK) << fdnn_last_error_message();
  expect_matches_pytorch(model, GetParam());
  fdnn_model_destroy(model);
}

INSTANTIATE_TEST_SUITE_P(Models, GoldenBundle,
                         ::testing::Values("seed_mlp", "lenet5", "linear_gelu",
                                           "mlp_layernorm_softmax", "residual_block",
                                           "batchnorm_cnn"));

// The seed MLP's spec with its weights from the other file formats PyTorch users write.
class GoldenWeightFormat : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenWeightFormat, SeedMlpMatchesPyTorch) {
  fdnn_model* model = open_model(kGolden + "seed_mlp/spec.json");
  ASSERT_NE(model, nullptr);
  ASSERT_EQ(fdnn_model_load_weights(model, (kGolden + "seed_mlp/" + GetParam()).c_str()),
            FDNN_STATUS_OK)
      << fdnn_last_error_message();
  expect_matches_pytorch(model, "seed_mlp");
  fdnn_model_destroy(model);
}

INSTANTIATE_TEST_SUITE_P(Formats, GoldenWeightFormat,
                         ::testing::Values("weights_bin", "weights_txt", "model.safetensors"));

}  // namespace
