// SPDX-License-Identifier: Apache-2.0
// fdnn_model_explain on a CUDA model: for the seed MLP and LeNet-5, in every precision and at
// batches across the forms' thresholds, every step of the plan is covered once by a lowered step
// with a named kernel form and a reason, and the costs equal the CPU explanation's (the same
// plan). Skips without a GPU.
#include <nlohmann/json.hpp>

#include "cuda_test_support.hpp"

using namespace fusednn_cuda_test;
using nlohmann::json;

namespace {

json explain(const fdnn_model* model, int64_t batch) {
  size_t size = 0;
  EXPECT_EQ(fdnn_model_explain(model, batch, FDNN_EXPLAIN_FORMAT_JSON, nullptr, 0, &size),
            FDNN_STATUS_OK)
      << fdnn_last_error_message();
  std::string text(size, '\0');
  EXPECT_EQ(
      fdnn_model_explain(model, batch, FDNN_EXPLAIN_FORMAT_JSON, text.data(), text.size(), &size),
      FDNN_STATUS_OK)
      << fdnn_last_error_message();
  text.resize(size > 0 ? size - 1 : 0);
  return json::parse(text);
}

// Every lowered step names a form and a reason, and together they cover the plan's steps
// 0..n-1 in order, each once.
void expect_forms_cover_the_plan(const json& document, const std::string& what) {
  const json& steps = document["steps"];
  ASSERT_FALSE(steps.empty()) << what;
  int next = 0;
  for (const json& step : steps) {
    EXPECT_FALSE(step["form"].get<std::string>().empty()) << what << "\n" << step.dump(2);
    EXPECT_FALSE(step["reason"].get<std::string>().empty()) << what << "\n" << step.dump(2);
    EXPECT_EQ(step["plan_steps"][0].get<int>(), next) << what;
    EXPECT_GE(step["plan_steps"][1].get<int>(), step["plan_steps"][0].get<int>()) << what;
    next = step["plan_steps"][1].get<int>() + 1;
    EXPECT_GE(step["launches"].get<int>(), 1) << what;
  }
}

void check_network(const Net& net, const std::string& name, int64_t max_batch,
                   const std::vector<int64_t>& batches,
                   const std::function<void(const json&, fdnn_precision, int64_t)>& extra) {
  std::mt19937 random(7);
  for (fdnn_precision precision :
       {FDNN_PRECISION_FP32, FDNN_PRECISION_TF32, FDNN_PRECISION_FP16, FDNN_PRECISION_BF16}) {
    CpuAndGpu models = cpu_and_gpu_models(net, max_batch, random, precision);
    ASSERT_NE(models.cpu, nullptr);
    ASSERT_NE(models.gpu, nullptr);
    fdnn_shape input_shape{};
    ASSERT_EQ(fdnn_model_input_shape(models.gpu, &input_shape), FDNN_STATUS_OK);
    int64_t input_elements = 1;
    for (int32_t d = 0; d < input_shape.rank; ++d) input_elements *= input_shape.dims[d];
    for (int64_t batch : batches) {
      const std::string what =
          name + " precision " + std::to_string(precision) + " batch " + std::to_string(batch);
      const json gpu = explain(models.gpu, batch);
      EXPECT_EQ(gpu["device"], "cuda") << what;
      expect_forms_cover_the_plan(gpu, what);
      const json cpu = explain(models.cpu, batch);
      EXPECT_DOUBLE_EQ(gpu["totals"]["flops"].get<double>(), cpu["totals"]["flops"].get<double>())
          << what;
      extra(gpu, precision, batch);
      // A run at that batch, then the same explanation (the first run picks cuBLASLt's
      // algorithms as the explanation did).
      std::vector<float> input(static_cast<size_t>(batch * input_elements), 0.5f);
      std::vector<float> output(static_cast<size_t>(batch * 10), 0.0f);
      ASSERT_EQ(fdnn_model_run(models.gpu, batch, input.data(), input.size(), output.data(),
                               output.size()),
                FDNN_STATUS_OK)
          << fdnn_last_error_message() << " (" << what << ")";
      EXPECT_EQ(explain(models.gpu, batch), gpu) << what;
    }
    fdnn_model_destroy(models.cpu);
    fdnn_model_destroy(models.gpu);
  }
}

}  // namespace

TEST(CudaExplain, SeedMlpNamesAFusedFormAtEveryBatchAndPrecision) {
  REQUIRE_CUDA();
  ScopedOverride rule("small_batch_tensor_cores", "auto");  // the library's default
  check_network(seed_mlp(), "seed MLP", 8192, {1, 4, 16, 17, 128, 1024, 8192},
                [](const json& document, fdnn_precision precision, int64_t batch) {
                  // The three Linear layers run as one fused MLP.
                  ASSERT_EQ(document["steps"].size(), 1u) << document.dump(2);
                  const std::string form = document["steps"][0]["form"];
                  EXPECT_EQ(form.rfind("fused MLP", 0), 0u) << form;
                  // Reduced-precision chains run in fp32 on the FMA kernels below one 16-row
                  // tile per SM (at least 128 rows on any GPU with 9 SMs or more) and on tensor
                  // cores from there (at most 8192 rows on any GPU with 512 SMs or fewer).
                  if (precision != FDNN_PRECISION_FP32 && batch <= 128) {
                    EXPECT_NE(form.find("FMA"), std::string::npos)
                        << "batch " << batch << ": " << form;
                  }
                  if (precision != FDNN_PRECISION_FP32 && batch == 8192) {
                    EXPECT_NE(form.find("tensor cores"), std::string::npos)
                        << "batch " << batch << ": " << form;
                  }
                });
}

TEST(CudaExplain, LeNet5NamesAFormForEveryStep) {
  REQUIRE_CUDA();
  check_network(lenet5(), "LeNet-5", 1024, {1, 8, 13, 256, 1024},
                [](const json& document, fdnn_precision, int64_t batch) {
                  bool conv = false;
                  for (const json& step : document["steps"]) {
                    const std::string form = step["form"];
                    conv = conv || form.find("conv") != std::string::npos ||
                           form.find("whole network") != std::string::npos ||
                           form.find("implicit GEMM") != std::string::npos;
                  }
                  EXPECT_TRUE(conv) << "batch " << batch << ": " << document.dump(2);
                });
}
