// SPDX-License-Identifier: Apache-2.0
// The cuBLASLt Linear (lone Linear layers wider than the fused MLP's 256 columns, or with inputs
// too wide for its tiles) against the CPU backend through the public API: every epilogue cuBLASLt
// fuses (bias, bias + ReLU, bias + GELU(tanh), and their bias-free forms), the ones it cannot
// (GELU(erf), SiLU, Scale, ... as in-place passes), every batch size, graphs on and off, host
// and device paths, buffers that change between runs, several threads at once, and the
// workspace counted in the context's memory. That the cuBLASLt path is the one taken (and the
// fallback GEMM when cuBLASLt refuses) is checked with the library's internals in
// cublaslt_internal_test.cpp.
//
// Helpers and comparison rules: cuda_test_support.hpp (relative error <= 1e-5, fresh random data
// per check, outputs poisoned with NaN). Without a GPU every test skips.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cuda_test_support.hpp"
#include "fusednn/fusednn.h"

namespace {

using namespace fusednn_cuda_test;

// cuBLASLt is the default for fp32 models; pinned on here in case the default or the caller's
// FUSEDNN_CUDA_OVERRIDES (cublaslt=0) says otherwise.
class CublasLtLinear : public ::testing::Test {
 protected:
  ScopedOverride cublaslt_on_{"cublaslt", "1"};
};

struct Activation {
  const char* name;
  const char* layer;  // "" for none
};

// What cuBLASLt's epilogue fuses (GELU(tanh), ReLU), what runs as a pass (GELU(erf)), and none.
const Activation kActivations[] = {
    {"GELU(tanh)", R"({"type": "GELU", "approximate": "tanh"})"},
    {"GELU(erf)", R"({"type": "GELU", "approximate": "none"})"},
    {"ReLU", R"({"type": "ReLU"})"},
    {"no activation", ""},
};

constexpr const char* kScale = R"({"type": "Scale", "alpha": -0.75})";

Net lone_linear(int64_t in, int64_t out, const Activation& activation, bool bias, bool scale) {
  Net net({in});
  net.linear("fc", in, out, bias);
  if (*activation.layer != '\0') net.act(activation.layer);
  if (scale) net.act(kScale);
  return net;
}

std::string describe(int64_t in, int64_t out, const Activation& activation, bool bias, bool scale) {
  return std::to_string(in) + " -> " + std::to_string(out) + ", " + activation.name +
         (bias ? ", bias" : ", no bias") + (scale ? ", then Scale" : "");
}

std::vector<int64_t> seed_shape_batches() {
  if (quick()) return {1, 33};
  return {1, 32, 33};
}

// The seed's shape, 768 -> 3072, in every combination of activation, bias and a trailing Scale.
TEST_F(CublasLtLinear, EveryEpilogueAt768To3072) {
  REQUIRE_CUDA();
  uint32_t seed = 1000;
  for (const Activation& activation : kActivations) {
    for (const bool bias : {true, false}) {
      for (const bool scale : {false, true}) {
        expect_matches_cpu(lone_linear(768, 3072, activation, bias, scale), seed_shape_batches(),
                           seed++, describe(768, 3072, activation, bias, scale));
      }
    }
  }
}

// Every batch size on a smaller shape: each activation with and without bias, half of them with
// a trailing Scale.
TEST_F(CublasLtLinear, EveryEpilogueEveryBatchSize) {
  REQUIRE_CUDA();
  uint32_t seed = 1100;
  int index = 0;
  for (const Activation& activation : kActivations) {
    for (const bool bias : {true, false}) {
      const bool scale = (index++ + (bias ? 1 : 0)) % 2 == 1;
      expect_matches_cpu(lone_linear(300, 520, activation, bias, scale), all_batches(), seed++,
                         describe(300, 520, activation, bias, scale));
    }
  }
}

// Every activation first in the epilogue: ReLU and GELU(tanh) fused, the others (which cuBLASLt
// has no epilogue for) as a pass after a BIAS or DEFAULT epilogue.
TEST_F(CublasLtLinear, EveryActivationFirst) {
  REQUIRE_CUDA();
  uint32_t seed = 1200;
  bool bias = true;
  for (const auto& [name, layer] : activations()) {
    const Activation activation{name.c_str(), layer.c_str()};
    expect_matches_cpu(lone_linear(300, 520, activation, bias, false), few_batches(), seed++,
                       describe(300, 520, activation, bias, false));
    bias = !bias;
  }
}

// Epilogues longer than one pass holds (kMaxEpilogueOps), after a fused and an unfused first op.
TEST_F(CublasLtLinear, EpilogueLongerThanOnePassHolds) {
  REQUIRE_CUDA();
  for (const char* first : {R"({"type": "ReLU"})", R"({"type": "GELU"})"}) {
    Net net({300});
    net.linear("fc", 300, 520)
        .act(first)
        .act(R"({"type": "Scale", "alpha": 1.5})")
        .act(R"({"type": "Tanh"})")
        .act(R"({"type": "Scale", "alpha": 2.0})")
        .act(R"({"type": "SiLU"})")
        .act(R"({"type": "Scale", "alpha": 0.5})");
    expect_matches_cpu(net, few_batches(), 1300, std::string("six ops after ") + first);
  }
}

TEST_F(CublasLtLinear, RowsPerSampleAboveOne) {
  REQUIRE_CUDA();
  Net net({5, 300});
  net.linear("fc", 300, 520).act(R"({"type": "GELU", "approximate": "tanh"})");
  expect_matches_cpu(net, few_batches(), 1400, "Linear 300 -> 520 over [5, 300]");
}

// A narrow layer whose input no fused tile holds (6000 floats per row of activations).
TEST_F(CublasLtLinear, InputTooWideForAFusedTile) {
  REQUIRE_CUDA();
  Net net({6000});
  net.linear("fc", 6000, 64).act(R"({"type": "ReLU"})");
  expect_matches_cpu(net, few_batches(), 1500, "6000 -> 64 + ReLU");
}

// Fused chains before and after a cuBLASLt layer, which reads and writes the workspace.
TEST_F(CublasLtLinear, BetweenFusedChains) {
  REQUIRE_CUDA();
  Net net({64});
  net.linear("fc1", 64, 128).act(R"({"type": "ReLU"})");
  net.linear("fc2", 128, 96).act(R"({"type": "Tanh"})");
  net.linear("wide", 96, 520).act(R"({"type": "GELU", "approximate": "tanh"})");
  net.linear("fc3", 520, 64).act(R"({"type": "ReLU"})");
  net.linear("fc4", 64, 10);
  expect_matches_cpu(net, all_batches(), 1600, "64-128-96 | 520 on cuBLASLt | 64-10");
  // Two cuBLASLt layers side by side on the model input, summed, then a head (300 inputs:
  // cuBLASLt too).
  Net branches({48});
  branches.linear("a", 48, 300, true, R"(["input"])").act(R"({"type": "SiLU", "name": "a_act"})");
  branches.linear("b", 48, 300, false, R"(["input"])");
  branches.layer(R"({"type": "Add", "name": "sum", "inputs": ["a_act", "b"]})");
  branches.linear("head", 300, 10);
  expect_matches_cpu(branches, few_batches(), 1601, "(48 -> 300 + SiLU) + (48 -> 300), head");
}

// Up to 32 rows, fp32 models run these layers on the small-batch kernel (small_batch_linear.hpp)
// rather than cuBLASLt where it is faster: the seed's shape at every row count it takes (the
// second 16-row tile skipped up to 16 rows), few outputs over a long
// reduction (3072 -> 768, 6000 -> 64), column tiles with a ragged end (520, 1000, 257
// outputs), reductions shorter than one staged chunk (4, 64 and 100 inputs), an input width that
// is not a multiple of 4 (30: cuBLASLt at every size), and 33 rows (cuBLASLt again). Inputs of
// whole 128-float chunks (768, 256) take the cluster form; 256 -> 1000 has an odd number of
// column tiles, so one block of its last pair has no columns. cublaslt_internal_test.cpp checks
// which path each run took.
TEST_F(CublasLtLinear, SmallBatchLinearEveryShape) {
  REQUIRE_CUDA();
  const Activation& gelu = kActivations[0];
  const Activation& erf = kActivations[1];
  const Activation& relu = kActivations[2];
  const Activation& none = kActivations[3];
  const std::vector<int64_t> rows =
      quick() ? std::vector<int64_t>{1, 32} : std::vector<int64_t>{1, 2, 3, 8, 16, 17, 31, 32, 33};
  expect_matches_cpu(lone_linear(768, 3072, gelu, true, false), rows, 1900,
                     describe(768, 3072, gelu, true, false));
  const std::vector<int64_t> few =
      quick() ? std::vector<int64_t>{3} : std::vector<int64_t>{1, 5, 32};
  struct Shape {
    int64_t in, out;
    const Activation& activation;
    bool bias, scale;
  };
  const Shape shapes[] = {
      {3072, 768, relu, true, false},  {6000, 64, none, false, false}, {300, 520, erf, true, true},
      {100, 1000, gelu, false, false}, {64, 300, relu, true, false},   {4, 257, none, true, true},
      {30, 300, gelu, true, false},    {256, 1000, gelu, true, false},
  };
  uint32_t seed = 1901;
  for (const Shape& shape : shapes) {
    expect_matches_cpu(lone_linear(shape.in, shape.out, shape.activation, shape.bias, shape.scale),
                       few, seed++,
                       describe(shape.in, shape.out, shape.activation, shape.bias, shape.scale));
  }
  // The long reductions, which the default leaves to cuBLASLt, through the kernel too: its 3xTF32
  // products must hold the fp32 bound over 3072 and 6000 terms.
  ScopedOverride always("small_batch_linear", "1");
  expect_matches_cpu(lone_linear(3072, 768, relu, true, false), few, seed++,
                     "3072 -> 768 on the small-batch kernel");
  expect_matches_cpu(lone_linear(6000, 64, none, false, false), few, seed++,
                     "6000 -> 64 on the small-batch kernel");
}

#if FUSEDNN_TEST_WITH_CUDART
// The device path with changing buffers: where the cuBLASLt call reads the model input and
// writes the model output its graphs cannot be re-pointed and are kept per pair of buffers (and
// a misaligned pair gets an algorithm chosen for its alignment); where it only touches the
// workspace, graphs are re-pointed as usual.
TEST_F(CublasLtLinear, DevicePathRotatingBuffers) {
  REQUIRE_CUDA();
  Net edge({300});
  edge.linear("fc", 300, 520).act(R"({"type": "SiLU"})");  // cuBLASLt, then a pass
  expect_rotating_buffers_match(edge, 1700, "300 -> 520 + SiLU on the caller's buffers", true);
  Net inner({64});
  inner.linear("fc1", 64, 128).act(R"({"type": "ReLU"})");
  inner.linear("wide", 128, 520).act(R"({"type": "GELU", "approximate": "tanh"})");
  inner.linear("fc2", 520, 10);
  expect_rotating_buffers_match(inner, 1701, "cuBLASLt between fused layers");
}
#endif

// Threads running different batch sizes at once on one model: the first run of each batch size
// chooses cuBLASLt's algorithm while others run.
TEST_F(CublasLtLinear, ThreadsRunDifferentBatchSizesAtOnce) {
  REQUIRE_CUDA();
  Net net({300});
  net.linear("fc", 300, 520).act(R"({"type": "GELU", "approximate": "tanh"})").act(kScale);
  std::mt19937 random(1800);
  const auto weights = draw_weights(net, random);
  constexpr int kThreads = 4;
  const std::vector<int64_t> batches = {1, 3, 17, 64, 100, 129, 200, 256};
  fdnn_model* cpu = create_model(net.spec(), FDNN_DEVICE_CPU, 256, 1);
  fdnn_model* gpu = create_model(net.spec(), FDNN_DEVICE_CUDA, 256, 1);
  ASSERT_TRUE(cpu && gpu);
  set_weights(cpu, net, weights);
  set_weights(gpu, net, weights);
  std::vector<std::vector<float>> inputs, expected;
  for (int64_t batch : batches) {
    inputs.push_back(normal(static_cast<size_t>(batch * 300), random, 0.0f, 1.0f));
    expected.emplace_back(static_cast<size_t>(batch * 520), NAN);
    ASSERT_EQ(fdnn_model_run(cpu, batch, inputs.back().data(), inputs.back().size(),
                             expected.back().data(), expected.back().size()),
              FDNN_STATUS_OK);
  }
  std::vector<double> errors(kThreads, INFINITY);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      double worst = 0;
      for (int round = 0; round < 5; ++round) {
        for (size_t i = 0; i < batches.size(); ++i) {
          const size_t b = (i + static_cast<size_t>(t) * 3) % batches.size();  // each its order
          std::vector<float> got(expected[b].size(), NAN);
          if (fdnn_model_run(gpu, batches[b], inputs[b].data(), inputs[b].size(), got.data(),
                             got.size()) != FDNN_STATUS_OK) {
            errors[t] = INFINITY;
            return;
          }
          worst = std::max(worst, relative_error(got, expected[b]));
        }
      }
      errors[t] = worst;
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_LE(errors[t], kTolerance) << "thread " << t;
  fdnn_model_destroy(cpu);
  fdnn_model_destroy(gpu);
}

// A context's memory includes cuBLASLt's workspace (at least 4 MiB) exactly when a step uses it.
TEST_F(CublasLtLinear, ContextMemoryCountsTheWorkspace) {
  REQUIRE_CUDA();
  auto context_bytes = [](const Net& net) -> size_t {
    fdnn_model* model = create_model(net.spec(), FDNN_DEVICE_CUDA, 1, 1);
    if (model == nullptr) return 0;
    fdnn_memory_info info{};
    info.struct_size = sizeof info;
    EXPECT_EQ(fdnn_model_memory_info(model, &info), FDNN_STATUS_OK) << fdnn_last_error_message();
    fdnn_model_destroy(model);
    return info.context_bytes;
  };
  Net fused({8});
  fused.linear("fc", 8, 200);
  Net wide({8});
  wide.linear("fc", 8, 300);
  EXPECT_LT(context_bytes(fused), size_t{1} << 20) << "fused only: no cuBLASLt workspace";
  EXPECT_GE(context_bytes(wide), size_t{4} << 20) << "a cuBLASLt step: its workspace counts";
}

}  // namespace
