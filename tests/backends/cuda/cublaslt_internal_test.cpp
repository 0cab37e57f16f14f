// SPDX-License-Identifier: Apache-2.0
// The cuBLASLt Linear seen from inside the library (this executable links its objects, C API
// included, instead of libfusednn.so, which exports only fdnn_*): which op each Linear step
// became and with which cuBLASLt epilogue, that cuBLASLt's heuristic offers an algorithm for the
// seed's shapes, that runs really go through cublasLtMatmul, that the tiled GEMM fallback is
// right wherever cuBLASLt is refused, and how accurate cuBLASLt's GELU epilogue is.
//
// Helpers and comparison rules: cuda_test_support.hpp. Without a GPU every test skips.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backends/cuda/exec/cuda_executor.hpp"
#include "common/half_float.hpp"
#include "cuda_test_support.hpp"
#include "fusednn/fusednn.h"
#include "internal_test_support.hpp"

namespace {

using namespace fusednn_cuda_test;

// cuBLASLt is the default for fp32 models; pinned on here in case the default or the caller's
// FUSEDNN_CUDA_OVERRIDES (cublaslt=0) says otherwise.
// The small-batch kernel, which takes these layers' runs of up to 32 rows by default, is off
// except where a test turns it on, so that cuBLASLt and its fallback are checked at every size.
class CublasLtInternal : public ::testing::Test {
 protected:
  ScopedOverride cublaslt_on_{"cublaslt", "1"};
  ScopedOverride small_batch_off_{"small_batch_linear", "0"};
};
using fusednn::cuda::CublasLtLinear;
using fusednn::cuda::CudaBackend;
using fusednn::cuda::LinearOp;
using fusednn::cuda::Op;
using fusednn::cuda::OpKind;

std::vector<const CublasLtLinear*> cublaslt_ops(fdnn_model* model) {
  std::vector<const CublasLtLinear*> result;
  CudaBackend* backend = backend_of(model);
  if (backend == nullptr) return result;
  for (const Op& op : backend->ops()) {
    const LinearOp* linear = op.as<LinearOp>();
    if (linear != nullptr && linear->lt) result.push_back(linear->lt.get());
  }
  return result;
}

int64_t matmuls_queued(fdnn_model* model) {
  int64_t total = 0;
  for (const CublasLtLinear* lt : cublaslt_ops(model)) total += lt->matmuls_queued();
  return total;
}

// A CUDA model of `net` with random weights, prepared; destroy with fdnn_model_destroy.
fdnn_model* prepared_cuda_model(const Net& net, int64_t max_batch, uint32_t seed) {
  std::mt19937 random(seed);
  fdnn_model* model = create_model(net.spec(), FDNN_DEVICE_CUDA, max_batch, 1);
  if (model == nullptr) return nullptr;
  set_weights(model, net, draw_weights(net, random));
  return model;
}

const char* kind_name(OpKind kind) {
  switch (kind) {
    case OpKind::FusedMlp: return "FusedMlp";
    case OpKind::CublasLtLinear: return "CublasLtLinear";
    default: return "another op";
  }
}

Net lone(int64_t in, int64_t out, bool bias, std::vector<const char*> epilogue) {
  Net net({in});
  net.linear("fc", in, out, bias);
  for (const char* layer : epilogue) net.act(layer);
  return net;
}

constexpr const char* kGeluTanh = R"({"type": "GELU", "approximate": "tanh"})";
constexpr const char* kGeluErf = R"({"type": "GELU", "approximate": "none"})";
constexpr const char* kReLU = R"({"type": "ReLU"})";
constexpr const char* kScale = R"({"type": "Scale", "alpha": -0.75})";
constexpr const char* kSiLU = R"({"type": "SiLU"})";

// Which op each Linear step becomes, the cuBLASLt epilogue chosen, the passes after it.
TEST_F(CublasLtInternal, LoneWideLinearsRunOnCublasLt) {
  REQUIRE_CUDA();
  const bool fuses_gelu = fusednn::cuda::kCublasLtFusesGeluTanh;
  struct Case {
    std::string what;
    Net net;
    std::vector<OpKind> kinds;
    const char* epilogue;  // of the one cuBLASLt op, if any
    size_t pieces;         // op.epilogue.size() of the cuBLASLt op: 1 + the passes after it
    bool repointable;
  };
  Net mixed({64});
  mixed.linear("fc1", 64, 128).act(kReLU).linear("fc2", 128, 96).act(R"({"type": "Tanh"})");
  mixed.linear("wide", 96, 520).act(kGeluTanh);
  mixed.linear("fc3", 520, 64).act(kReLU).linear("fc4", 64, 10);
  const std::vector<Case> cases = {
      {"768 -> 3072 + bias + GELU(tanh)",
       lone(768, 3072, true, {kGeluTanh}),
       {OpKind::CublasLtLinear},
       fuses_gelu ? "GELU_BIAS" : "BIAS",
       fuses_gelu ? 1u : 2u,
       false},
      {"768 -> 3072 + bias + GELU(erf)",
       lone(768, 3072, true, {kGeluErf}),
       {OpKind::CublasLtLinear},
       "BIAS",
       2,
       false},
      // cuBLASLt's ReLU epilogues turn NaN into 0: ReLU runs after it, as the backend's own.
      {"768 -> 3072 + ReLU",
       lone(768, 3072, false, {kReLU}),
       {OpKind::CublasLtLinear},
       "DEFAULT",
       2,
       false},
      {"768 -> 3072 + bias + ReLU + Scale",
       lone(768, 3072, true, {kReLU, kScale}),
       {OpKind::CublasLtLinear},
       "BIAS",
       2,
       false},
      {"768 -> 3072", lone(768, 3072, false, {}), {OpKind::CublasLtLinear}, "DEFAULT", 1, false},
      {"768 -> 3072 + bias + Scale",
       lone(768, 3072, true, {kScale}),
       {OpKind::CublasLtLinear},
       "BIAS",
       2,
       false},
      {"300 -> 520 + GELU(tanh) + Scale",
       lone(300, 520, false, {kGeluTanh, kScale}),
       {OpKind::CublasLtLinear},
       fuses_gelu ? "GELU" : "DEFAULT",
       2,
       false},
      {"300 -> 520 + bias + SiLU",
       lone(300, 520, true, {kSiLU}),
       {OpKind::CublasLtLinear},
       "BIAS",
       2,
       false},
      {"6000 -> 64 + bias + ReLU (input too wide for a tile)",
       lone(6000, 64, true, {kReLU}),
       {OpKind::CublasLtLinear},
       "BIAS",
       2,
       false},
      // The selection table sends a lone layer with more than 128 inputs to cuBLASLt
      // (form_selection.hpp), where the fused kernel would hold it.
      {"4096 -> 64 + bias + ReLU (an input wider than a lone fused layer takes)",
       lone(4096, 64, true, {kReLU}),
       {OpKind::CublasLtLinear},
       "BIAS",
       2,
       false},
      {"100 -> 256 (a lone layer that fits: fused)",
       lone(100, 256, true, {kReLU}),
       {OpKind::FusedMlp},
       nullptr,
       0,
       true},
      {"64-128-96 | 520 | 64-10",
       mixed,
       {OpKind::FusedMlp, OpKind::CublasLtLinear, OpKind::FusedMlp},
       fuses_gelu ? "GELU_BIAS" : "BIAS",
       fuses_gelu ? 1u : 2u,
       true},
  };
  uint32_t seed = 2000;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    fdnn_model* model = prepared_cuda_model(c.net, 8, seed++);
    ASSERT_NE(model, nullptr);
    CudaBackend* backend = backend_of(model);
    ASSERT_NE(backend, nullptr);
    const std::vector<Op>& ops = backend->ops();
    ASSERT_EQ(ops.size(), c.kinds.size());
    for (size_t i = 0; i < ops.size(); ++i) {
      EXPECT_EQ(kind_name(ops[i].kind), std::string(kind_name(c.kinds[i]))) << "op " << i;
      const LinearOp* linear = ops[i].as<LinearOp>();
      EXPECT_EQ(linear != nullptr && linear->lt != nullptr, ops[i].kind == OpKind::CublasLtLinear)
          << "op " << i;
      if (linear != nullptr && linear->lt) {
        EXPECT_STREQ(linear->lt->epilogue_name(), c.epilogue);
        EXPECT_EQ(ops[i].epilogue.size(), c.pieces);
      }
    }
    EXPECT_EQ(backend->device_graphs_repointable(), c.repointable);
    EXPECT_EQ(backend->cublaslt_workspace_bytes() > 0, c.epilogue != nullptr);
    fdnn_model_destroy(model);
  }
}

// cuBLASLt's heuristic offers an algorithm for the seed's shape at small and large batches with
// 256-byte-aligned buffers (as the host path's and the workspace's are). For buffers aligned to
// only 4 bytes it may have none; then the choice must say why (the fallback GEMM runs), and what
// it said is printed.
TEST_F(CublasLtInternal, HeuristicOffersAnAlgorithm) {
  REQUIRE_CUDA();
  fdnn_model* model = prepared_cuda_model(lone(768, 3072, true, {kGeluTanh}), 4097, 2100);
  ASSERT_NE(model, nullptr);
  const std::vector<const CublasLtLinear*> ops = cublaslt_ops(model);
  ASSERT_EQ(ops.size(), 1u);
  // Only the addresses' alignment matters to the choice; nothing is dereferenced.
  const auto* aligned = reinterpret_cast<const float*>(uintptr_t{1} << 20);
  const float* misaligned = aligned + 1;
  for (int64_t rows : {1, 2, 31, 32, 33, 4097}) {
    for (const float* pointer : {aligned, misaligned}) {
      const CublasLtLinear::Choice& choice = ops[0]->choose(rows, pointer, pointer);
      if (pointer == aligned) {
        EXPECT_TRUE(choice.usable) << rows << " rows: " << choice.reason;
      } else if (!choice.usable) {
        std::cout << "[ cuBLASLt ] 4-byte-aligned buffers, " << rows << " rows: " << choice.reason
                  << "\n";
        EXPECT_NE(choice.reason.find("cublasLtMatmulAlgoGetHeuristic"), std::string::npos)
            << choice.reason;
      }
      if (choice.usable) {
        EXPECT_LE(choice.algorithm_workspace_bytes, ops[0]->workspace_bytes());
      }
      // Cached: the same object answers again.
      EXPECT_EQ(&ops[0]->choose(rows, pointer, pointer), &choice);
    }
  }
  fdnn_model_destroy(model);
}

// Runs of a cuBLASLt step really queue cublasLtMatmul (graphs on: once per captured batch size;
// off: once per run).
TEST_F(CublasLtInternal, RunsGoThroughCublasLt) {
  REQUIRE_CUDA();
  GpuHooks hooks;
  hooks.before_runs = [](fdnn_model* model) { EXPECT_EQ(matmuls_queued(model), 0); };
  hooks.after_runs = [](fdnn_model* model) {
    EXPECT_GT(matmuls_queued(model), 0) << "no run went through cublasLtMatmul";
  };
  expect_matches_cpu(lone(768, 3072, true, {kGeluTanh}), {1, 32, 33}, 2200,
                     "768 -> 3072 + GELU(tanh)", hooks);
  expect_matches_cpu(lone(300, 520, false, {kGeluErf, kScale}), all_batches(), 2201,
                     "300 -> 520 + GELU(erf) + Scale", hooks);
}

// The tiled GEMM where cuBLASLt is refused: the same epilogue (bias and the fused op applied by
// the GEMM, the rest as passes), every batch size, W in PyTorch's layout.
TEST_F(CublasLtInternal, FallbackGemmWhenCublasLtRefuses) {
  REQUIRE_CUDA();
  GpuHooks hooks;
  hooks.before_runs = [](fdnn_model* model) { backend_of(model)->refuse_cublaslt_for_testing(); };
  hooks.after_runs = [](fdnn_model* model) {
    EXPECT_EQ(matmuls_queued(model), 0);
    for (const CublasLtLinear* lt : cublaslt_ops(model)) {
      const auto* aligned = reinterpret_cast<const float*>(uintptr_t{1} << 20);
      const CublasLtLinear::Choice& choice = lt->choose(1, aligned, aligned);
      EXPECT_FALSE(choice.usable);
      EXPECT_NE(choice.reason.find("refused for testing"), std::string::npos) << choice.reason;
      EXPECT_NE(choice.reason.find("tiled GEMM"), std::string::npos) << choice.reason;
    }
  };
  uint32_t seed = 2300;
  for (const char* first : {kGeluTanh, kGeluErf, kReLU, kScale}) {
    for (const bool bias : {true, false}) {
      expect_matches_cpu(lone(300, 520, bias, {first, kScale}), all_batches(), seed++,
                         std::string("300 -> 520, ") + first + (bias ? ", bias" : ""), hooks);
    }
  }
  expect_matches_cpu(lone(768, 3072, true, {kGeluTanh}), {1, 32, 33}, seed++,
                     "768 -> 3072 + GELU(tanh)", hooks);
  expect_matches_cpu(lone(6000, 64, true, {kReLU}), few_batches(), seed++, "6000 -> 64 + ReLU",
                     hooks);
  Net rows({5, 300});
  rows.linear("fc", 300, 520).act(kSiLU);
  expect_matches_cpu(rows, few_batches(), seed++, "300 -> 520 over [5, 300]", hooks);
}

// fp16 and bf16 models hand cuBLASLt W and x in that type: the op holds a 16-bit copy of W,
// every run goes through cublasLtMatmul on x narrowed first, and the results stay within the
// precision's bound (fusednn.h's accuracy contract) of the CPU's fp32 at every batch size. Below
// compute capability 8.0 the model runs in fp32 instead, which the contract allows too.
TEST_F(CublasLtInternal, HalfPrecisionsGiveCublasLtHalfOperands) {
  REQUIRE_CUDA();
  struct Case {
    fdnn_precision precision;
    cudaDataType_t operands;
    const char* name;
  };
  uint32_t seed = 2400;
  for (const Case& c : {Case{FDNN_PRECISION_FP16, CUDA_R_16F, "fp16"},
                        Case{FDNN_PRECISION_BF16, CUDA_R_16BF, "bf16"}}) {
    SCOPED_TRACE(c.name);
    GpuHooks hooks;
    hooks.before_runs = [&](fdnn_model* model) {
      CudaBackend* backend = backend_of(model);
      ASSERT_NE(backend, nullptr);
      const bool tensor_cores = backend->device_info().major >= 8;
      size_t checked = 0;
      for (const Op& op : backend->ops()) {
        if (op.kind != OpKind::CublasLtLinear) continue;
        const LinearOp* linear = op.as<LinearOp>();
        ASSERT_NE(linear, nullptr);
        ASSERT_TRUE(linear->lt);
        EXPECT_EQ(linear->half_weight != nullptr, tensor_cores);
        EXPECT_EQ(linear->lt->operands(), tensor_cores ? c.operands : CUDA_R_32F);
        ++checked;
      }
      EXPECT_GE(checked, 1u);
      EXPECT_EQ(matmuls_queued(model), 0);
    };
    hooks.after_runs = [](fdnn_model* model) {
      EXPECT_GT(matmuls_queued(model), 0) << "no run went through cublasLtMatmul";
    };
    expect_matches_cpu(lone(768, 3072, true, {kGeluTanh}), {1, 32, 33, 300}, seed++,
                       "768 -> 3072 + GELU(tanh)", hooks, c.precision, 1e-2);
    expect_matches_cpu(lone(300, 520, false, {kGeluErf, kScale}), all_batches(), seed++,
                       "300 -> 520 + GELU(erf) + Scale", hooks, c.precision, 1e-2);
    Net between({64});
    between.linear("fc1", 64, 96).act(kReLU).linear("wide", 96, 520).act(kSiLU);
    between.linear("fc2", 520, 10);
    expect_matches_cpu(between, few_batches(), seed++, "64-96 | 520 | 10", hooks, c.precision,
                       1e-2);
    // cuBLASLt first: with 16-bit operands it reads the narrowed copy, not the model input, so
    // graphs stay re-pointable and the host path may run on mapped pinned memory.
    GpuHooks leading_hooks = hooks;
    leading_hooks.before_runs = [&](fdnn_model* model) {
      hooks.before_runs(model);
      CudaBackend* backend = backend_of(model);
      ASSERT_NE(backend, nullptr);
      const bool tensor_cores = backend->device_info().major >= 8;
      EXPECT_EQ(backend->device_graphs_repointable(), tensor_cores);
      EXPECT_EQ(backend->host_mapped_io(), tensor_cores);
    };
    Net leading({300});
    leading.linear("wide", 300, 520).act(kReLU).linear("fc", 520, 10);
    expect_matches_cpu(leading, few_batches(), seed++, "300 -> 520 | 10", leading_hooks,
                       c.precision, 1e-2);
  }
}

// A cuBLASLt step with 16-bit operands that reads the model input narrows a float32 x into its
// staging first, a launch a run on a 16-bit input it reads itself does not make: the launch
// count (the context's graph gate) drops by one for each such step, and by none where cuBLASLt
// reads a value of the workspace. Below compute capability 8.0 there are no 16-bit operands.
TEST_F(CublasLtInternal, SixteenBitInputSparesTheNarrowingLaunch) {
  REQUIRE_CUDA();
  Net lone_wide = lone(300, 520, false, {kGeluErf, kScale});
  Net between({64});
  between.linear("fc1", 64, 96).act(kReLU).linear("wide", 96, 520).act(kSiLU);
  between.linear("fc2", 520, 10);
  Net leading({300});
  leading.linear("wide", 300, 520).act(kReLU).linear("fc", 520, 10);
  struct Case {
    const Net* net;
    const char* name;
    int spared;
  };
  uint32_t seed = 2600;
  for (const fdnn_precision precision : {FDNN_PRECISION_BF16, FDNN_PRECISION_FP16}) {
    for (const Case& c : {Case{&lone_wide, "300 -> 520", 1}, Case{&between, "64-96 | 520 | 10", 0},
                          Case{&leading, "300 -> 520 | 10", 1}}) {
      SCOPED_TRACE(std::string(c.name) + ", precision " + std::to_string(precision));
      std::mt19937 random(seed++);
      const std::unique_ptr<fdnn_model, void (*)(fdnn_model*)> model(
          create_model(c.net->spec(), FDNN_DEVICE_CUDA, 64, 1, precision), fdnn_model_destroy);
      ASSERT_NE(model, nullptr);
      set_weights(model.get(), *c.net, draw_weights(*c.net, random));
      CudaBackend* backend = backend_of(model.get());
      ASSERT_NE(backend, nullptr);
      const int spared = backend->device_info().major >= 8 ? c.spared : 0;
      for (const int64_t batch : {int64_t{1}, int64_t{33}, int64_t{64}}) {
        EXPECT_EQ(backend->launches_per_run(batch) - backend->launches_per_run(batch, true), spared)
            << "batch " << batch;
      }
      EXPECT_EQ(backend->cublaslt_reads_16_bit_input(), spared > 0);
    }
  }
}

// Where cuBLASLt writes a 16-bit model output itself: a cuBLASLt step with 16-bit operands that
// writes the model output with no pass in place after it (so not after ReLU, which runs as the
// backend's NaN-keeping pass, nor GELU(erf)), for an output of the operands' type on 256 bytes.
// The other 16-bit type, an output off 256 bytes, and every output of the other models are
// narrowed from float32 after. Such runs' graphs cannot be re-pointed. (A model whose output a
// tensor-core MLP writes is typed_io_test's.) Below compute capability
// 8.0 there are no 16-bit operands and nothing is written in 16 bits.
TEST_F(CublasLtInternal, SixteenBitOutputIsCublasLtsD) {
  REQUIRE_CUDA();
  using fusednn::cuda::ElementType;
  Net chain({64});
  chain.linear("fc1", 64, 128).act(kReLU).linear("fc2", 128, 96).act(kReLU);
  chain.linear("wide", 96, 3072).act(kGeluTanh);
  struct Case {
    Net net;
    const char* name;
    bool writes;
  };
  const Case cases[] = {
      {lone(768, 3072, true, {kGeluTanh}), "768 -> 3072 + bias + GELU(tanh)",
       fusednn::cuda::kCublasLtFusesGeluTanh},
      {lone(1024, 1024, true, {}), "1024 -> 1024 + bias", true},
      {lone(300, 520, false, {}), "300 -> 520", true},
      {lone(768, 3072, true, {kGeluErf}), "768 -> 3072 + GELU(erf)", false},
      {lone(1000, 1003, true, {kReLU}), "1000 -> 1003 + ReLU", false},
      {chain, "64-128-96 | 3072 + GELU(tanh)", fusednn::cuda::kCublasLtFusesGeluTanh},
  };
  const auto* aligned = reinterpret_cast<const void*>(uintptr_t{1} << 20);
  const auto* off_256 = reinterpret_cast<const void*>((uintptr_t{1} << 20) + 16);
  uint32_t seed = 2700;
  for (const fdnn_precision precision : {FDNN_PRECISION_BF16, FDNN_PRECISION_FP16}) {
    const ElementType own =
        precision == FDNN_PRECISION_BF16 ? ElementType::Bfloat16 : ElementType::Float16;
    const ElementType other =
        precision == FDNN_PRECISION_BF16 ? ElementType::Float16 : ElementType::Bfloat16;
    const std::string own_name = precision == FDNN_PRECISION_BF16 ? "bfloat16" : "float16";
    for (const Case& c : cases) {
      SCOPED_TRACE(std::string(c.name) + ", " + own_name);
      std::mt19937 random(seed++);
      const std::unique_ptr<fdnn_model, void (*)(fdnn_model*)> model(
          create_model(c.net.spec(), FDNN_DEVICE_CUDA, 4097, 1, precision), fdnn_model_destroy);
      ASSERT_NE(model, nullptr) << fdnn_last_error_message();
      set_weights(model.get(), c.net, draw_weights(c.net, random));
      CudaBackend* backend = backend_of(model.get());
      ASSERT_NE(backend, nullptr);
      const bool writes = c.writes && backend->device_info().major >= 8;
      EXPECT_EQ(backend->cublaslt_writes_16_bit_output(), writes);
      if (writes) {
        EXPECT_FALSE(backend->device_graphs_repointable());
      }
      const Op& last = backend->ops().back();
      const LinearOp* last_linear = last.as<LinearOp>();
      ASSERT_NE(last_linear, nullptr);
      EXPECT_EQ(last_linear->writes_16_bit_output, writes);
      for (const int64_t batch : {int64_t{1}, int64_t{2}, int64_t{33}, int64_t{4097}}) {
        SCOPED_TRACE("batch " + std::to_string(batch));
        const bool own_written = backend->writes_16_bit_output(batch, own, aligned);
        if (writes && !own_written) {
          const int64_t rows = batch * backend->plan().steps[last.first_step].rows_per_sample;
          const cudaDataType_t type = own == ElementType::Bfloat16 ? CUDA_R_16BF : CUDA_R_16F;
          ADD_FAILURE() << "cuBLASLt does not write the " << own_name << " output: "
                        << last_linear->lt->choose(rows, aligned, aligned, type).reason;
        }
        EXPECT_FALSE(!writes && own_written);
        EXPECT_FALSE(backend->writes_16_bit_output(batch, other, aligned));
        EXPECT_FALSE(backend->writes_16_bit_output(batch, own, off_256));
        EXPECT_FALSE(backend->writes_16_bit_output(batch, ElementType::Float32, aligned));
        size_t size = 0;
        ASSERT_EQ(
            fdnn_model_explain(model.get(), batch, FDNN_EXPLAIN_FORMAT_TEXT, nullptr, 0, &size),
            FDNN_STATUS_OK);
        std::string text(size, '\0');
        ASSERT_EQ(fdnn_model_explain(model.get(), batch, FDNN_EXPLAIN_FORMAT_TEXT, text.data(),
                                     text.size(), &size),
                  FDNN_STATUS_OK);
        EXPECT_EQ(text.find("cuBLASLt writes a " + own_name +
                            " model output on 256 bytes itself") != std::string::npos,
                  writes)
            << text;
        EXPECT_EQ(text.find("writes a " + own_name + " model output itself") != std::string::npos,
                  writes)
            << text;
      }
    }
  }
}

// cuBLASLt's D in 16 bits against its D in fp32 narrowed on the host to nearest even, same
// operands (16-bit W and x, fp32 bias, and its 16-bit copy for where cuBLASLt takes no fp32 bias
// with a 16-bit D: the figures printed say which it took), same epilogues, for row counts that
// may get different kernels. Where the heuristic gives both D types the same algorithm and the
// fp32 bias, the sums are the same and the bits must agree exactly (the epilogue adds the fp32
// bias and applies the activation in fp32, then rounds once);
// where it gives them different algorithms, their fp32 summation orders differ, the figures are
// printed, and the 16-bit D must stay within the fp16/bf16 contract (1e-2 relative) of the fp32
// one. A 16-bit D of the other 16-bit type, or from fp32 operands, is refused with its reason.
TEST_F(CublasLtInternal, SixteenBitDMatchesTheFloat32DNarrowed) {
  REQUIRE_CUDA();
  using fusednn::cuda::CublasLtActivation;
  using fusednn::cuda::CublasLtHandle;
  using fusednn::cuda::DeviceArray;
  int major = 0;
  CUDA_OK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0));
  if (major < 8) GTEST_SKIP() << "16-bit cuBLASLt operands need compute capability 8.0";
  constexpr int64_t kMaxRows = 4097;
  // odd: rows of y on 2 bytes only, where a 16-bit D may have no algorithm (the backend then
  // narrows after); the figures are printed either way.
  struct Shape {
    int32_t in, out;
    CublasLtActivation activation;
    bool bias;
    bool odd;
    const char* name;
  };
  const Shape shapes[] = {
      {768, 3072, CublasLtActivation::GeluTanh, true, false, "768 -> 3072 GELU_BIAS"},
      {1024, 1024, CublasLtActivation::None, true, false, "1024 -> 1024 BIAS"},
      {1000, 1003, CublasLtActivation::None, true, true, "1000 -> 1003 BIAS"},
      {300, 520, CublasLtActivation::None, false, false, "300 -> 520 DEFAULT"}};
  CublasLtHandle handle;
  DeviceArray<unsigned char> workspace(size_t{32} << 20);
  std::mt19937 random(2800);
  for (const cudaDataType_t type : {CUDA_R_16BF, CUDA_R_16F}) {
    const bool bf16 = type == CUDA_R_16BF;
    auto narrow = [&](float v) {
      return bf16 ? fusednn::float_to_bfloat16(v) : fusednn::float_to_half(v);
    };
    auto widen = [&](uint16_t v) {
      return bf16 ? fusednn::bfloat16_to_float(v) : fusednn::half_to_float(v);
    };
    for (const Shape& shape : shapes) {
      SCOPED_TRACE(std::string(shape.name) + (bf16 ? ", bf16" : ", fp16"));
      const std::vector<float> weight =
          normal(size_t(shape.in) * shape.out, random, 0.0f, 1.0f / std::sqrt(float(shape.in)));
      const std::vector<float> bias = normal(size_t(shape.out), random, 0.0f, 0.1f);
      const std::vector<float> input = normal(size_t(shape.in) * kMaxRows, random, 0.0f, 1.0f);
      std::vector<uint16_t> weight16(weight.size()), input16(input.size()), bias16(bias.size());
      for (size_t i = 0; i < weight.size(); ++i) weight16[i] = narrow(weight[i]);
      for (size_t i = 0; i < input.size(); ++i) input16[i] = narrow(input[i]);
      for (size_t i = 0; i < bias.size(); ++i) bias16[i] = narrow(bias[i]);
      DeviceArray<uint16_t> device_weight(weight16.size()), x(input16.size());
      DeviceArray<uint16_t> device_bias16(bias16.size());
      DeviceArray<uint16_t> y16(size_t(shape.out) * kMaxRows);
      DeviceArray<float> device_bias(bias.size()), y32(size_t(shape.out) * kMaxRows);
      CUDA_OK(cudaMemcpy(device_weight.data(), weight16.data(), device_weight.bytes(),
                         cudaMemcpyHostToDevice));
      CUDA_OK(cudaMemcpy(x.data(), input16.data(), x.bytes(), cudaMemcpyHostToDevice));
      CUDA_OK(
          cudaMemcpy(device_bias.data(), bias.data(), device_bias.bytes(), cudaMemcpyHostToDevice));
      CUDA_OK(cudaMemcpy(device_bias16.data(), bias16.data(), device_bias16.bytes(),
                         cudaMemcpyHostToDevice));
      const CublasLtLinear linear(handle.get(), shape.in, shape.out, shape.activation,
                                  device_weight.data(), shape.bias ? device_bias.data() : nullptr,
                                  workspace.bytes(), CUBLAS_COMPUTE_32F, type,
                                  shape.bias ? device_bias16.data() : nullptr);
      const cudaDataType_t other = bf16 ? CUDA_R_16F : CUDA_R_16BF;
      const CublasLtLinear::Choice& refused = linear.choose(1, x.data(), y16.data(), other);
      EXPECT_FALSE(refused.usable);
      EXPECT_NE(refused.reason.find("not the operands'"), std::string::npos) << refused.reason;
      EXPECT_NE(refused.reason.find("narrowing it after"), std::string::npos) << refused.reason;
      for (const int64_t rows : {int64_t{1}, int64_t{2}, int64_t{33}, kMaxRows}) {
        SCOPED_TRACE(std::to_string(rows) + " rows");
        const CublasLtLinear::Choice& wide = linear.choose(rows, x.data(), y32.data());
        const CublasLtLinear::Choice& half = linear.choose(rows, x.data(), y16.data(), type);
        ASSERT_TRUE(wide.usable) << wide.reason;
        if (shape.odd && !half.usable) {
          std::cout << "[ cuBLASLt ] " << half.reason << "\n";
          continue;
        }
        ASSERT_TRUE(half.usable) << half.reason;
        EXPECT_EQ(half.output, type);
        const size_t count = size_t(rows) * shape.out;
        CUDA_OK(cudaMemset(y32.data(), 0xFF, count * sizeof(float)));
        CUDA_OK(cudaMemset(y16.data(), 0xFF, count * sizeof(uint16_t)));
        linear.run(wide, x.data(), y32.data(), workspace.data(), nullptr);
        linear.run(half, x.data(), y16.data(), workspace.data(), nullptr);
        CUDA_OK(cudaDeviceSynchronize());
        std::vector<float> wide_out(count), half_widened(count), narrowed(count);
        std::vector<uint16_t> half_out(count);
        CUDA_OK(
            cudaMemcpy(wide_out.data(), y32.data(), count * sizeof(float), cudaMemcpyDeviceToHost));
        CUDA_OK(cudaMemcpy(half_out.data(), y16.data(), count * sizeof(uint16_t),
                           cudaMemcpyDeviceToHost));
        size_t equal = 0;
        for (size_t i = 0; i < count; ++i) {
          equal += half_out[i] == narrow(wide_out[i]) ? 1 : 0;
          half_widened[i] = widen(half_out[i]);
          narrowed[i] = widen(narrow(wide_out[i]));
        }
        const bool same_algorithm = std::memcmp(&wide.algo, &half.algo, sizeof wide.algo) == 0;
        const double error = relative_error(half_widened, wide_out);
        std::cout << "[ cuBLASLt ] " << shape.name << (bf16 ? " bf16, " : " fp16, ") << rows
                  << " rows: " << equal << " of " << count
                  << " 16-bit D elements equal the fp32 D narrowed ("
                  << (same_algorithm ? "the same algorithm" : "different algorithms")
                  << (half.bias_16_bit ? ", the bias rounded to 16 bits" : "")
                  << "); relative error against the fp32 D " << error << "\n";
        if (same_algorithm && !half.bias_16_bit) {
          EXPECT_EQ(equal, count);
        }
        EXPECT_LE(error, 1e-2);
        EXPECT_LE(relative_error(narrowed, wide_out), 1e-2);  // the rounding alone
      }
    }
  }
  // fp32 operands: no 16-bit D.
  DeviceArray<float> weight(size_t{64} * 300), x(size_t{300} * 4);
  DeviceArray<uint16_t> y(size_t{64} * 4);
  const CublasLtLinear plain(handle.get(), 300, 64, CublasLtActivation::None, weight.data(),
                             nullptr, workspace.bytes());
  const CublasLtLinear::Choice& refused = plain.choose(4, x.data(), y.data(), CUDA_R_16BF);
  EXPECT_FALSE(refused.usable);
  EXPECT_NE(refused.reason.find("is not the operands'"), std::string::npos) << refused.reason;
}

// Which runs the small-batch kernel takes: 1 to 32 rows of a planned shape (sm_90+, input
// width a multiple of 4, not so large that cuBLASLt is faster unless the knob says "1"), none
// with the knob off, and never 33 rows; where it takes every run,
// no cublasLtMatmul is queued. The results are checked against the CPU as everywhere.
TEST_F(CublasLtInternal, SmallBatchKernelTakesUpTo32Rows) {
  REQUIRE_CUDA();
  struct Case {
    Net net;
    const char* knob;
    std::vector<int64_t> batches;
    bool planned_on_hopper;
    bool all_small;
  };
  const Case cases[] = {
      {lone(768, 3072, true, {kGeluTanh}), "1", {1, 32}, true, true},
      {lone(300, 520, false, {kReLU, kScale}), "1", {7}, true, true},
      {lone(3072, 768, false, {kReLU}), "auto", {7}, false, false},  // cuBLASLt is faster
      {lone(3072, 768, false, {kReLU}), "1", {7}, true, true},       // "1": wherever it can
      {lone(768, 3072, true, {kGeluTanh}), "1", {33}, true, false},
      {lone(768, 3072, true, {kGeluTanh}), "0", {1, 32}, false, false},
      {lone(30, 300, true, {kSiLU}), "1", {1, 32}, false, false},
  };
  uint32_t seed = 2400;
  for (const Case& c : cases) {
    ScopedOverride knob("small_batch_linear", c.knob);
    GpuHooks hooks;
    bool planned = false;
    hooks.before_runs = [&](fdnn_model* model) {
      CudaBackend* backend = backend_of(model);
      ASSERT_NE(backend, nullptr);
      ASSERT_EQ(backend->ops().size(), 1u);
      const LinearOp* linear = backend->ops()[0].as<LinearOp>();
      ASSERT_NE(linear, nullptr);
      planned = linear->small_batch.planned();
      EXPECT_EQ(planned, c.planned_on_hopper && backend->device_info().major >= 9);
      // The cluster form takes inputs of whole 128-float chunks that fit the stages at once.
      const int64_t in = backend->plan().steps[0].in_features;
      EXPECT_EQ(linear->small_batch.cluster, planned && in % 128 == 0 && in <= 768);
    };
    hooks.after_runs = [&](fdnn_model* model) {
      if (planned && c.all_small) {
        EXPECT_EQ(matmuls_queued(model), 0) << "a run of up to 32 rows went to cuBLASLt";
      } else {
        EXPECT_GT(matmuls_queued(model), 0) << "no run went through cublasLtMatmul";
      }
    };
    expect_matches_cpu(c.net, c.batches, seed++, std::string("knob ") + c.knob, hooks);
  }
}

// cuBLASLt's GELU epilogue against the formula, whatever kCublasLtFusesGeluTanh says: the
// GELU_BIAS output of the seed's shape against GELU(tanh) computed in double from the BIAS output
// of the same weights and inputs (so the GEMM's own rounding cancels, up to the two algorithms'
// summation orders), for row counts that may get different kernels. With the constant true the
// error must be within the tests' 1e-5 (else set it to false: GELU(tanh) then runs as a pass);
// with it false the figure printed says whether it could be true.
TEST_F(CublasLtInternal, GeluEpilogueMatchesTheFormula) {
  REQUIRE_CUDA();
  using fusednn::cuda::CublasLtActivation;
  using fusednn::cuda::CublasLtHandle;
  using fusednn::cuda::DeviceArray;
  constexpr int32_t kIn = 768;
  constexpr int32_t kOut = 3072;
  constexpr int64_t kMaxRows = 1000;
  std::mt19937 random(2400);
  const std::vector<float> weight = normal(size_t{kIn} * kOut, random, 0.0f, 0.036f);
  const std::vector<float> bias = normal(kOut, random, 0.0f, 0.1f);
  const std::vector<float> input = normal(size_t{kIn} * kMaxRows, random, 0.0f, 1.0f);
  DeviceArray<float> device_weight(weight.size()), device_bias(bias.size());
  DeviceArray<float> x(input.size()), y_gelu(size_t{kOut} * kMaxRows);
  DeviceArray<float> y_plain(size_t{kOut} * kMaxRows);
  DeviceArray<unsigned char> workspace(size_t{32} << 20);
  CUDA_OK(cudaMemcpy(device_weight.data(), weight.data(), weight.size() * sizeof(float),
                     cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(device_bias.data(), bias.data(), bias.size() * sizeof(float),
                     cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(x.data(), input.data(), input.size() * sizeof(float), cudaMemcpyHostToDevice));
  CublasLtHandle handle;
  const CublasLtLinear gelu(handle.get(), kIn, kOut, CublasLtActivation::GeluTanh,
                            device_weight.data(), device_bias.data(), workspace.bytes());
  const CublasLtLinear plain(handle.get(), kIn, kOut, CublasLtActivation::None,
                             device_weight.data(), device_bias.data(), workspace.bytes());
  EXPECT_STREQ(gelu.epilogue_name(), "GELU_BIAS");
  EXPECT_STREQ(plain.epilogue_name(), "BIAS");
  for (int64_t rows : {int64_t{1}, int64_t{32}, kMaxRows}) {
    SCOPED_TRACE(std::to_string(rows) + " rows");
    const CublasLtLinear::Choice& gelu_choice = gelu.choose(rows, x.data(), y_gelu.data());
    const CublasLtLinear::Choice& plain_choice = plain.choose(rows, x.data(), y_plain.data());
    ASSERT_TRUE(gelu_choice.usable) << gelu_choice.reason;
    ASSERT_TRUE(plain_choice.usable) << plain_choice.reason;
    const size_t count = static_cast<size_t>(rows) * kOut;
    const std::vector<float> poison(count, NAN);
    CUDA_OK(
        cudaMemcpy(y_gelu.data(), poison.data(), count * sizeof(float), cudaMemcpyHostToDevice));
    CUDA_OK(
        cudaMemcpy(y_plain.data(), poison.data(), count * sizeof(float), cudaMemcpyHostToDevice));
    gelu.run(gelu_choice, x.data(), y_gelu.data(), workspace.data(), nullptr);
    plain.run(plain_choice, x.data(), y_plain.data(), workspace.data(), nullptr);
    CUDA_OK(cudaDeviceSynchronize());
    std::vector<float> got(count), pre(count), formula(count);
    CUDA_OK(cudaMemcpy(got.data(), y_gelu.data(), count * sizeof(float), cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(pre.data(), y_plain.data(), count * sizeof(float), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < count; ++i) {
      const double v = pre[i];
      formula[i] = static_cast<float>(
          0.5 * v * (1.0 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v))));
    }
    const double error = relative_error(got, formula);
    std::cout << "[ cuBLASLt ] 768 -> 3072, " << rows
              << " rows: GELU_BIAS against GELU(tanh) of the BIAS output: " << error
              << (error <= kTolerance ? " (within" : " (beyond") << " the tests' " << kTolerance
              << ")\n";
    if (fusednn::cuda::kCublasLtFusesGeluTanh) {
      EXPECT_LE(error, kTolerance) << "cuBLASLt's GELU epilogue is not GELU(tanh) to 1e-5: set "
                                      "kCublasLtFusesGeluTanh to false (linear_cublaslt.hpp)";
    }
  }
}

}  // namespace
