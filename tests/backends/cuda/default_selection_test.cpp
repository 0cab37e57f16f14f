// SPDX-License-Identifier: Apache-2.0
// The library's default selection for tf32/fp16/bf16 chains, which the other CUDA tests override
// (cuda_test_support.hpp, kTensorCoresAtSmallBatches): below one 16-row warp tile per SM the chain
// runs in fp32 on the FMA kernels, from there on tensor cores; both within the precision's bound
// of the CPU backend at the batches on either side of the boundary. Without a GPU every test
// skips with a message.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "cuda_test_support.hpp"

namespace {

using namespace fusednn_cuda_test;

// The SM count the explanation's first line names ("..., 132 SMs)"), 0 when it names none.
int64_t sm_count(const std::string& explanation) {
  const size_t end = explanation.find(" SMs)");
  if (end == std::string::npos) return 0;
  size_t begin = end;
  while (begin > 0 && explanation[begin - 1] >= '0' && explanation[begin - 1] <= '9') --begin;
  return begin == end ? 0 : std::atoll(explanation.substr(begin, end - begin).c_str());
}

// Chains of the shapes the sweep found slow on tensor cores at small batches: odd widths, a
// narrow first layer, a Softmax after the chain.
std::vector<std::pair<std::string, Net>> chains() {
  std::vector<std::pair<std::string, Net>> nets;
  nets.emplace_back("seed MLP", seed_mlp());
  Net odd({31});
  odd.linear("a", 31, 97).act(R"({"type": "SiLU"})");
  odd.linear("b", 97, 97).act(R"({"type": "GELU", "approximate": "tanh"})").linear("c", 97, 13);
  nets.emplace_back("31-97-97-13", odd);
  Net softmax({8});
  softmax.linear("a", 8, 16).act(R"({"type": "SiLU"})").linear("b", 16, 100);
  softmax.act(R"({"type": "ReLU"})").linear("c", 100, 40);
  softmax.layer(R"({"type": "Softmax", "dim": -1})");
  nets.emplace_back("8-16-100-40 + Softmax", softmax);
  return nets;
}

TEST(CudaDefaultSelection, ReducedChainsRunInFp32BelowOneTilePerSmAndOnTensorCoresFromIt) {
  REQUIRE_CUDA();
  ScopedOverride rule("small_batch_tensor_cores", "auto");
  uint32_t seed = 8100;
  for (const PrecisionBound& c : precision_bounds(false)) {
    for (const auto& [name, net] : chains()) {
      SCOPED_TRACE(name + ", " + c.name);
      // The boundary comes from the device: the first explanation names its SM count.
      fdnn_model* probe = create_model(net.spec(), FDNN_DEVICE_CUDA, 1, 1, c.precision);
      ASSERT_NE(probe, nullptr);
      const int64_t tile_rows = 16 * sm_count(explain_text(probe, 1));
      fdnn_model_destroy(probe);
      ASSERT_GT(tile_rows, 0);

      fdnn_model* model = create_model(net.spec(), FDNN_DEVICE_CUDA, tile_rows + 1, 1, c.precision);
      ASSERT_NE(model, nullptr);
      for (const int64_t batch : {int64_t{1}, int64_t{129}, tile_rows - 1}) {
        const std::string explanation = explain_text(model, batch);
        EXPECT_TRUE(contains(explanation, "fused MLP (fp32 FMA)")) << batch << ":\n" << explanation;
        EXPECT_FALSE(contains(explanation, "on tensor cores,")) << batch << ":\n" << explanation;
        EXPECT_TRUE(
            contains(explanation, "below the tensor-core form's " + std::to_string(tile_rows)))
            << batch << ":\n"
            << explanation;
      }
      for (const int64_t batch : {tile_rows, tile_rows + 1}) {
        const std::string explanation = explain_text(model, batch);
        EXPECT_TRUE(contains(explanation, "fused MLP on tensor cores,")) << batch << ":\n"
                                                                         << explanation;
        EXPECT_TRUE(contains(explanation, "one 16-row tile per SM")) << explanation;
      }
      // A model whose batches cannot reach the boundary plans no tensor-core form at all, and
      // runs in fp32.
      fdnn_model* small = create_model(net.spec(), FDNN_DEVICE_CUDA, tile_rows - 1, 1, c.precision);
      ASSERT_NE(small, nullptr);
      fdnn_precision ran = c.precision;
      ASSERT_EQ(fdnn_model_precision(small, &ran), FDNN_STATUS_OK) << fdnn_last_error_message();
      EXPECT_EQ(ran, FDNN_PRECISION_FP32);
      EXPECT_TRUE(contains(explain_text(small, 1), "FMA kernels in fp32"))
          << explain_text(small, 1);
      fdnn_model_destroy(small);
      fdnn_model_destroy(model);

      const std::vector<int64_t> batches =
          quick()
              ? std::vector<int64_t>{1, 33, tile_rows}
              : std::vector<int64_t>{1, 2, 31, 33, 129, tile_rows - 1, tile_rows, tile_rows + 1};
      // A Softmax squeezes the outputs into [0, 1], which keeps the rounding error of the
      // logits near the largest output: twice the bound, as docs/precision.md's "Saturating
      // outputs" says for such heads.
      const bool squeezed = contains(name, "Softmax");
      expect_matches_cpu(net, batches, seed++, name + ", " + c.name, {}, c.precision,
                         squeezed ? 2 * c.bound : c.bound);
    }
  }
}

}  // namespace
