// SPDX-License-Identifier: Apache-2.0
// fdnn_model_explain: the two-phase size query, bad arguments, and the CPU explanation of a small
// model checked against forms, fused activations, FLOPs and bytes worked out by hand below.
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "api_test_support.hpp"
#include "fusednn/fusednn.hpp"

using namespace fusednn_test;
using nlohmann::json;

namespace {

// fc1 Linear 3 -> 4 + ReLU, fc2 Linear 4 -> 2 without bias, then Softmax.
const char* kSmallSpec = R"({"fusednn": 1, "name": "small",
  "input": {"shape": [3], "dtype": "float32"},
  "layers": [
    {"type": "Linear", "name": "fc1", "in_features": 3, "out_features": 4},
    {"type": "ReLU", "name": "act"},
    {"type": "Linear", "name": "fc2", "in_features": 4, "out_features": 2, "bias": false},
    {"type": "Softmax", "name": "head"}]})";

fdnn_model* make_small_model(bool weights) {
  fdnn_model_options options;
  fdnn_model_options_init(&options, sizeof options);
  options.max_batch = 16;
  options.cpu_threads = 1;
  fdnn_model* model = nullptr;
  const std::string spec = kSmallSpec;
  EXPECT_EQ(fdnn_model_create_from_spec(spec.data(), spec.size(), &options, &model), FDNN_STATUS_OK)
      << fdnn_last_error_message();
  if (weights && model != nullptr) {
    const std::vector<float> w1(12, 0.25f), b1(4, 0.5f), w2(8, -0.125f);
    const int64_t w1_shape[] = {4, 3}, b1_shape[] = {4}, w2_shape[] = {2, 4};
    const auto f32 = FDNN_DTYPE_FLOAT32;
    EXPECT_EQ(fdnn_model_set_weight(model, "fc1.weight", f32, w1.data(), w1_shape, 2),
              FDNN_STATUS_OK);
    EXPECT_EQ(fdnn_model_set_weight(model, "fc1.bias", f32, b1.data(), b1_shape, 1),
              FDNN_STATUS_OK);
    EXPECT_EQ(fdnn_model_set_weight(model, "fc2.weight", f32, w2.data(), w2_shape, 2),
              FDNN_STATUS_OK);
  }
  return model;
}

std::string explain(const fdnn_model* model, int64_t batch, fdnn_explain_format format) {
  size_t size = 0;
  EXPECT_EQ(fdnn_model_explain(model, batch, format, nullptr, 0, &size), FDNN_STATUS_OK)
      << fdnn_last_error_message();
  std::vector<char> buffer(size, 'x');
  size_t written = 0;
  EXPECT_EQ(fdnn_model_explain(model, batch, format, buffer.data(), buffer.size(), &written),
            FDNN_STATUS_OK)
      << fdnn_last_error_message();
  EXPECT_EQ(written, size);
  EXPECT_EQ(buffer.back(), '\0');
  return std::string(buffer.data());
}

// A small model handle, destroyed at the end of the scope.
struct OwnedModel {
  fdnn_model* handle;
  explicit OwnedModel(bool weights = true) : handle(make_small_model(weights)) {}
  ~OwnedModel() { fdnn_model_destroy(handle); }
};

}  // namespace

TEST(Explain, BadArgumentsNameTheCulpritAndWriteNothing) {
  OwnedModel model;
  char buffer[64] = "untouched";
  struct Case {
    const char* name;
    const fdnn_model* model;
    int64_t batch;
    int32_t format;
    char* buffer;
    size_t capacity;
    bool size;
    const char* culprit;
  } cases[] = {
      {"null model", nullptr, 1, FDNN_EXPLAIN_FORMAT_JSON, nullptr, 0, true, "model is NULL"},
      {"null size", model.handle, 1, FDNN_EXPLAIN_FORMAT_JSON, nullptr, 0, false, "size is NULL"},
      {"null buffer with a capacity", model.handle, 1, FDNN_EXPLAIN_FORMAT_JSON, nullptr, 8, true,
       "buffer is NULL"},
      {"batch 0", model.handle, 0, FDNN_EXPLAIN_FORMAT_JSON, buffer, sizeof buffer, true,
       "batch is 0"},
      {"batch over max_batch", model.handle, 17, FDNN_EXPLAIN_FORMAT_JSON, buffer, sizeof buffer,
       true, "batch is 17"},
      {"unknown format", model.handle, 1, 7, buffer, sizeof buffer, true,
       "format has unknown value 7"},
  };
  for (const Case& c : cases) {
    size_t size = 12345;
    fdnn_explain_format format;
    std::memcpy(&format, &c.format, sizeof format);
    EXPECT_EQ(fdnn_model_explain(c.model, c.batch, format, c.buffer, c.capacity,
                                 c.size ? &size : nullptr),
              FDNN_STATUS_INVALID_ARGUMENT)
        << c.name;
    const std::string message = fdnn_last_error_message();
    EXPECT_NE(message.find(c.culprit), std::string::npos) << c.name << ": " << message;
    EXPECT_NE(message.find("fdnn_model_explain"), std::string::npos) << message;
    EXPECT_EQ(size, 12345u) << c.name;
    EXPECT_STREQ(buffer, "untouched") << c.name;
  }
}

TEST(Explain, SmallBufferGetsTheNeededSizeAndStaysUntouched) {
  OwnedModel model;
  for (fdnn_explain_format format : {FDNN_EXPLAIN_FORMAT_JSON, FDNN_EXPLAIN_FORMAT_TEXT}) {
    size_t needed = 0;
    ASSERT_EQ(fdnn_model_explain(model.handle, 4, format, nullptr, 0, &needed), FDNN_STATUS_OK);
    ASSERT_GT(needed, 1u);
    std::vector<char> small(needed - 1, '#');
    size_t size = 0;
    EXPECT_EQ(fdnn_model_explain(model.handle, 4, format, small.data(), small.size(), &size),
              FDNN_STATUS_BUFFER_TOO_SMALL);
    EXPECT_EQ(size, needed);
    EXPECT_NE(std::string(fdnn_last_error_message()).find("buffer_capacity"), std::string::npos);
    for (char c : small) ASSERT_EQ(c, '#');
    EXPECT_EQ(explain(model.handle, 4, format).size() + 1, needed);
  }
}

TEST(Explain, CpuExplanationListsStepsFormsAndHandWorkedCosts) {
  OwnedModel model;
  const int64_t batch = 5;
  const json document = json::parse(explain(model.handle, batch, FDNN_EXPLAIN_FORMAT_JSON));
  EXPECT_EQ(document["model"], "small");
  EXPECT_EQ(document["device"], "cpu");
  EXPECT_EQ(document["precision"], "fp32");
  EXPECT_EQ(document["batch"], batch);
  EXPECT_EQ(document["max_batch"], 16);
  EXPECT_NE(document["backend"].get<std::string>().find("1 thread(s) of 1"), std::string::npos)
      << document["backend"];

  const json& steps = document["steps"];
  ASSERT_EQ(steps.size(), 3u) << document.dump(2);
  // fc1 with the ReLU fused into it; 5 rows on one thread take the packed GEMM (4 rows or more).
  EXPECT_EQ(steps[0]["kinds"], json::array({"Linear"}));
  EXPECT_EQ(steps[0]["layers"][0].get<std::string>().find("fc1"), 0u) << steps[0]["layers"];
  EXPECT_EQ(steps[0]["fused_activations"], json::array({"ReLU"}));
  EXPECT_EQ(steps[0]["form"].get<std::string>().rfind("packed GEMM", 0), 0u) << steps[0]["form"];
  EXPECT_NE(steps[0]["reason"].get<std::string>().find("5 rows"), std::string::npos);
  EXPECT_EQ(steps[1]["kinds"], json::array({"Linear"}));
  EXPECT_EQ(steps[1]["fused_activations"], json::array());
  EXPECT_EQ(steps[2]["kinds"], json::array({"Softmax"}));
  EXPECT_EQ(steps[2]["output"]["storage"], "output");
  EXPECT_EQ(steps[0]["output"]["storage"], "workspace");
  EXPECT_EQ(steps[0]["output"]["bytes_per_sample"], 4 * 4);

  // FLOPs per sample: fc1 2 x 3 x 4 + 4 (ReLU, one per output) = 28; fc2 2 x 4 x 2 = 16;
  // Softmax 4 per element x 2 = 8.
  EXPECT_DOUBLE_EQ(steps[0]["flops_per_sample"].get<double>(), 28.0);
  EXPECT_DOUBLE_EQ(steps[1]["flops_per_sample"].get<double>(), 16.0);
  EXPECT_DOUBLE_EQ(steps[2]["flops_per_sample"].get<double>(), 8.0);
  EXPECT_DOUBLE_EQ(steps[0]["flops"].get<double>(), 28.0 * batch);
  EXPECT_DOUBLE_EQ(document["totals"]["flops_per_sample"].get<double>(), 52.0);
  EXPECT_DOUBLE_EQ(document["totals"]["flops"].get<double>(), 52.0 * batch);
  // Bytes: fc1 reads 3 floats and writes 4 a sample, and reads W (12) and b (4) once a run.
  EXPECT_EQ(steps[0]["activation_bytes_per_sample"], (3 + 4) * 4);
  EXPECT_EQ(steps[0]["weight_bytes"], (12 + 4) * 4);
  EXPECT_EQ(steps[0]["bytes"], (3 + 4) * 4 * batch + (12 + 4) * 4);
  // fc2: 4 in, 2 out, W 8 floats and no bias.
  EXPECT_EQ(steps[1]["activation_bytes_per_sample"], (4 + 2) * 4);
  EXPECT_EQ(steps[1]["weight_bytes"], 8 * 4);
}

TEST(Explain, FewRowsTakeDotProducts) {
  OwnedModel model;
  const json document = json::parse(explain(model.handle, 2, FDNN_EXPLAIN_FORMAT_JSON));
  const std::string form = document["steps"][0]["form"];
  EXPECT_EQ(form.rfind("dot products", 0), 0u) << form;
  EXPECT_NE(document["steps"][0]["reason"].get<std::string>().find("fewer than 4"),
            std::string::npos);
}

TEST(Explain, WorksBeforeWeightsAndAfterTheFirstRunAlike) {
  OwnedModel without_weights(false);
  const std::string before_weights = explain(without_weights.handle, 8, FDNN_EXPLAIN_FORMAT_JSON);
  // The query froze nothing: weights are still accepted.
  const std::vector<float> b1(4, 0.0f);
  const int64_t b1_shape[] = {4};
  EXPECT_EQ(fdnn_model_set_weight(without_weights.handle, "fc1.bias", FDNN_DTYPE_FLOAT32, b1.data(),
                                  b1_shape, 1),
            FDNN_STATUS_OK)
      << fdnn_last_error_message();

  OwnedModel model;
  const std::string before_run = explain(model.handle, 8, FDNN_EXPLAIN_FORMAT_JSON);
  std::vector<float> input(8 * 3, 1.0f), output(8 * 2, 0.0f);
  ASSERT_EQ(
      fdnn_model_run(model.handle, 8, input.data(), input.size(), output.data(), output.size()),
      FDNN_STATUS_OK)
      << fdnn_last_error_message();
  const std::string after_run = explain(model.handle, 8, FDNN_EXPLAIN_FORMAT_JSON);
  EXPECT_EQ(before_run, after_run);
  EXPECT_EQ(before_weights, before_run);
}

TEST(Explain, TextTableNamesFormsReasonsAndFusedActivations) {
  OwnedModel model;
  const std::string text = explain(model.handle, 5, FDNN_EXPLAIN_FORMAT_TEXT);
  for (const char* expected : {"model small", "batch 5", "packed GEMM", "fused: ReLU",
                               "why: ", "Softmax", "52 FLOP/sample"}) {
    EXPECT_NE(text.find(expected), std::string::npos) << expected << "\n" << text;
  }
}

TEST(Explain, CppWrapperReturnsTheSameDocument) {
  OwnedModel model;
  fusednn::Model wrapper = fusednn::Model::from_spec(kSmallSpec, [] {
    fusednn::ModelOptions options;
    options.max_batch(16).cpu_threads(1);
    return options;
  }());
  EXPECT_EQ(wrapper.explain(3), explain(model.handle, 3, FDNN_EXPLAIN_FORMAT_JSON));
  EXPECT_THROW(wrapper.explain(0), fusednn::Error);
}
