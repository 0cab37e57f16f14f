// SPDX-License-Identifier: Apache-2.0
// The fused MLP's plan seen from inside the library (linked like cublaslt_internal_test.cpp):
// which weight layout the fp32 chains on tensor cores get, and which small-batch form a chain
// takes. Whether the results are right is cuda_backend_test.cpp's to check, for every form.
//
// Without a GPU, or below the compute capability a form needs, its test skips.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "backends/cuda/exec/cuda_executor.hpp"
#include "backends/cuda/mlp/fused_mlp_warpgroup.hpp"
#include "common/half_float.hpp"
#include "cuda_test_support.hpp"
#include "fusednn/fusednn.h"
#include "internal_test_support.hpp"

namespace {

using namespace fusednn_cuda_test;
using fusednn::cuda::CudaBackend;
using fusednn::cuda::FusedMlpLayerDesc;
using fusednn::cuda::FusedMlpPlan;
using fusednn::cuda::MlpChainOp;
using fusednn::cuda::MlpRoute;
using fusednn::cuda::Op;
using fusednn::cuda::RowTailKind;
using fusednn::cuda::TensorCoreForm;
using fusednn::cuda::TensorCoreMath;
using fusednn::cuda::TensorCoreMlpPlan;
using fusednn::cuda::WarpgroupMlpLayer;
using fusednn::cuda::WarpgroupMlpPlan;

// The tensor-core plan of the model's one fused chain, or null when there is none (a CPU model,
// no chain, or a chain with no tensor-core form on this device).
const TensorCoreMlpPlan* chain_plan(fdnn_model* model) {
  const CudaBackend* backend = backend_of(model);
  if (backend == nullptr) return nullptr;
  for (const Op& op : backend->ops()) {
    const MlpChainOp* chain = op.as<MlpChainOp>();
    if (chain != nullptr && chain->tensor_core.tile_rows > 0) return &chain->tensor_core;
  }
  return nullptr;
}

// The backend's fused chain (the last where there are several), or null when it has none.
const MlpChainOp* fused_chain(const CudaBackend& backend) {
  const MlpChainOp* chain = nullptr;
  for (const Op& op : backend.ops()) {
    if (const MlpChainOp* candidate = op.as<MlpChainOp>()) chain = candidate;
  }
  return chain;
}

// The fused chain's plan, or null when the model has none.
const FusedMlpPlan* fused_plan(fdnn_model* model) {
  const CudaBackend* backend = backend_of(model);
  const MlpChainOp* chain = backend != nullptr ? fused_chain(*backend) : nullptr;
  return chain != nullptr ? &chain->mlp : nullptr;
}

// A chain of `widths` (in, hidden..., out) with fresh normal weights and biases; the layer at
// `no_bias` (if any) has none. Host memory, as the image builders take it.
struct RandomChain {
  std::vector<FusedMlpLayerDesc> layers;
  std::vector<std::vector<float>> weights, biases;
  std::vector<const float*> weight_pointers, bias_pointers;
};

RandomChain random_chain(const std::vector<int>& widths, std::mt19937& random, int no_bias = -1) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const size_t count = widths.size() - 1;
  RandomChain chain;
  chain.layers.resize(count);
  chain.weights.resize(count);
  chain.biases.resize(count);
  for (size_t l = 0; l < count; ++l) {
    chain.layers[l].in = widths[l];
    chain.layers[l].out = widths[l + 1];
    chain.layers[l].padded_out = (widths[l + 1] + 3) / 4 * 4;
    chain.weights[l].resize(static_cast<size_t>(widths[l]) * widths[l + 1]);
    for (float& v : chain.weights[l]) v = normal(random);
    if (static_cast<int>(l) != no_bias) {
      chain.biases[l].resize(static_cast<size_t>(widths[l + 1]));
      for (float& v : chain.biases[l]) v = normal(random);
    }
  }
  for (size_t l = 0; l < count; ++l) {  // after every resize: the pointers stay valid
    chain.weight_pointers.push_back(chain.weights[l].data());
    chain.bias_pointers.push_back(chain.biases[l].empty() ? nullptr : chain.biases[l].data());
  }
  return chain;
}

// The cluster form's image, as fused_mlp.hpp describes it, built here independently: block r of
// 4 owns output groups [G r / 4, G (r + 1) / 4) of a layer with G groups of 4 outputs; its run
// holds, layer after layer, those rows of W (in floats each, padded to a multiple of 4 with
// zeros; rows past out all zero), then their biases (zero past out or without a bias). Host code
// only: it runs without a GPU too.
TEST(FusedMlpInternal, ClusterImageGivesEachBlockItsRowsAndBiases) {
  const int blocks = fusednn::cuda::kFusedMlpClusterBlocks;
  const std::vector<std::vector<int>> chains = {{5, 3, 7}, {37, 200, 13, 10}, {100, 128, 64, 10}};
  std::mt19937 random(10);
  for (const std::vector<int>& widths : chains) {
    const size_t count = widths.size() - 1;
    const RandomChain chain = random_chain(widths, random, 1);  // the second layer has no bias
    const auto& weights = chain.weights;
    const auto& biases = chain.biases;
    std::vector<float> expected;
    for (int rank = 0; rank < blocks; ++rank) {
      for (size_t l = 0; l < count; ++l) {
        const int in = widths[l], out = widths[l + 1];
        const int in4 = (in + 3) / 4 * 4, groups = (out + 3) / 4;
        const int first = 4 * (groups * rank / blocks), end = 4 * (groups * (rank + 1) / blocks);
        for (int o = first; o < end; ++o) {
          for (int k = 0; k < in4; ++k) {
            expected.push_back(o < out && k < in ? weights[l][static_cast<size_t>(o) * in + k]
                                                 : 0.0f);
          }
        }
        for (int o = first; o < end; ++o) {
          expected.push_back(o < out && l != 1 ? biases[l][static_cast<size_t>(o)] : 0.0f);
        }
      }
    }
    const std::vector<float> image = fusednn::cuda::build_fused_mlp_cluster_image(
        chain.layers, chain.weight_pointers, chain.bias_pointers);
    EXPECT_EQ(image, expected) << "chain of " << count << " layers from " << widths[0];
  }
}

// On compute capability 9.0 and newer, small batches of a chain whose layers are at most 256
// wide run on the cluster form (fused_mlp_cluster.cu), with its image uploaded; the knob
// override small_batch_mlp=block gives the single-block form (and its image) instead.
TEST(FusedMlpInternal, SmallBatchesTakeTheClusterFormOnHopper) {
  REQUIRE_CUDA();
  int major = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0), cudaSuccess);
  if (major < 9) GTEST_SKIP() << "compute capability " << major << ": no thread-block clusters";
  const Net seed = seed_mlp();
  // LeNet-5's head: 236 KB of weights, more than one block holds.
  const Net head = lenet5_head(R"({"type": "ReLU"})");
  for (const char* knob : {"", "block"}) {
    ScopedOverride form("small_batch_mlp", knob);
    for (const Net* net : {&seed, &head}) {
      std::mt19937 random(8);
      const std::unique_ptr<fdnn_model, void (*)(fdnn_model*)> model(
          create_model(net->spec(), FDNN_DEVICE_CUDA, 16, 1), fdnn_model_destroy);
      ASSERT_NE(model, nullptr);
      set_weights(model.get(), *net, draw_weights(*net, random));
      const FusedMlpPlan* plan = fused_plan(model.get());
      ASSERT_NE(plan, nullptr) << net->spec();
      const bool cluster = std::string(knob).empty();
      EXPECT_EQ(plan->cluster_shared_bytes > 0, cluster) << knob << " " << net->spec();
      EXPECT_EQ(plan->block_shared_bytes > 0, !cluster && net == &seed) << knob;
      EXPECT_EQ(plan->cluster_image != nullptr, cluster) << knob;
      EXPECT_EQ(plan->block_image != nullptr, !cluster && net == &seed) << knob;
    }
  }
}

// A plan of one fused chain reads and writes only the caller's buffers and the weights, so its
// device-path runs are not ordered against the context's other runs and record no event; a
// plan with an intermediate in the workspace, or a cuBLASLt layer, touches the context's memory.
// A context destroyed after such a run, its model and the run's stream gone before it, frees the
// weights only once the run is done (the backend waits for the device), and the results are
// whole.
TEST(FusedMlpInternal, RunsOfOneFusedChainShareNothingWithTheContext) {
  REQUIRE_CUDA();
  const Net seed = seed_mlp();
  Net wide({768});  // cuBLASLt with its workspace
  wide.linear("fc", 768, 3072).act(R"({"type": "GELU", "approximate": "tanh"})");
  Net two({100});  // a Softmax after the chain reads the chain's output from the workspace
  two.linear("fc1", 100, 64).act(R"({"type": "ReLU"})").linear("fc2", 64, 10);
  two.layer(R"({"type": "Softmax", "dim": -1})");
  std::mt19937 random(9);
  for (const auto& [net, touches] :
       {std::pair<const Net*, bool>{&seed, false}, {&wide, true}, {&two, true}}) {
    fdnn_model* model = create_model(net->spec(), FDNN_DEVICE_CUDA, 8, 1);
    ASSERT_NE(model, nullptr) << net->spec();
    set_weights(model, *net, draw_weights(*net, random));
    const CudaBackend* backend = backend_of(model);
    ASSERT_NE(backend, nullptr);
    EXPECT_EQ(backend->runs_touch_context_memory(8), touches) << net->spec();
    fdnn_model_destroy(model);
  }

  const CpuAndGpu models = cpu_and_gpu_models(seed, 8, random);
  fdnn_model* const cpu = models.cpu;
  fdnn_model* const gpu = models.gpu;
  ASSERT_TRUE(cpu && gpu);
  const std::vector<float> input = normal(8 * 100, random, 0.0f, 1.0f);
  std::vector<float> expected(8 * 10, NAN), got(8 * 10, NAN);
  ASSERT_EQ(fdnn_model_run(cpu, 8, input.data(), input.size(), expected.data(), expected.size()),
            FDNN_STATUS_OK);
  fdnn_context* context = nullptr;
  ASSERT_EQ(fdnn_context_create(gpu, &context), FDNN_STATUS_OK);
  float* device_in = nullptr;
  float* device_out = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&device_in), input.size() * sizeof(float)),
            cudaSuccess);
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&device_out), got.size() * sizeof(float)),
            cudaSuccess);
  ASSERT_NO_FATAL_FAILURE(upload(device_in, input.data(), input.size() * sizeof(float)));
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  for (int64_t batch = 1; batch <= 8; ++batch) {
    ASSERT_EQ(fdnn_context_run_device(context, batch, device_in, batch * 100, device_out,
                                      got.size(), stream),
              FDNN_STATUS_OK)
        << fdnn_last_error_message();
  }
  ASSERT_EQ(cudaStreamDestroy(stream), cudaSuccess);
  fdnn_model_destroy(gpu);
  fdnn_context_destroy(context);  // holds the last reference to the weights
  ASSERT_EQ(cudaMemcpy(got.data(), device_out, got.size() * sizeof(float), cudaMemcpyDeviceToHost),
            cudaSuccess);
  EXPECT_LE(relative_error(got, expected), kTolerance);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  cudaFree(device_in);
  cudaFree(device_out);
  fdnn_model_destroy(cpu);
}

// An fp32 chain forced onto tensor cores (3xTF32) takes its weights split into tf32 parts at
// load where the doubled shared-memory image keeps as many blocks per SM resident, and whole
// where it would not.
TEST(FusedMlpInternal, Fp32ChainsSplitTheirWeightsWhereTheyFit) {
  REQUIRE_CUDA();
  int major = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0), cudaSuccess);
  if (major < 8) GTEST_SKIP() << "compute capability " << major << ": no tf32 tensor cores";
  ScopedOverride force("fp32_tensor_cores", "1");
  const Net seed = seed_mlp();  // 208 KB split: one 8-warp block per SM either way
  Net wide({32});               // 64-wide: 98 KB whole (two blocks per SM), 164 KB split (one)
  wide.linear("l0", 32, 64).act(R"({"type": "ReLU"})");
  for (const char* name : {"l1", "l2", "l3"}) wide.linear(name, 64, 64).act(R"({"type": "ReLU"})");
  wide.linear("l4", 64, 16);

  for (const auto& [net, split] : {std::pair<const Net&, bool>{seed, true}, {wide, false}}) {
    std::mt19937 random(7);
    const std::unique_ptr<fdnn_model, void (*)(fdnn_model*)> model(
        create_model(net.spec(), FDNN_DEVICE_CUDA, 4096, 1), fdnn_model_destroy);
    ASSERT_NE(model, nullptr);
    set_weights(model.get(), net, draw_weights(net, random));
    const TensorCoreMlpPlan* plan = chain_plan(model.get());
    ASSERT_NE(plan, nullptr) << net.spec();
    EXPECT_EQ(plan->form, TensorCoreForm::WarpRegisters);
    EXPECT_EQ(plan->math, TensorCoreMath::Tf32x3);
    EXPECT_EQ(plan->split_weights, split) << net.spec();
  }
}

// The Warpgroup form's image read the way its wgmma descriptors address it (B's element (k, n)
// of k-step s at weight_offset + 256 s + (n / 8) * k_steps * 256 + (k / 8) * 128 + (n % 8) * 16 +
// (k % 8) * 2) and multiplied with A fragments built the way the kernel builds them (the first
// layer's thread t holds 4 consecutive columns of its rows as k 2t, 2t + 1, 2t + 8, 2t + 9, from
// 16 s + 4 t in quads or 32 (s / 2) + 8 t + 4 (s % 2) interleaved, the steps from input_steps on
// zeros; later layers hold C tiles 2s and 2s + 1) gives each layer's product with its weights
// narrowed to 16 bits, and the bias sits where the kernel reads it. Host code only.
TEST(FusedMlpInternal, WarpgroupImageHoldsEachLayerAsItsDescriptorsReadIt) {
  // Interleaved (an odd count of 4-column groups): 100, 12, 44; quads: 32, 64.
  const std::vector<std::vector<int>> chains = {
      {100, 128, 64, 10}, {32, 64, 64, 16}, {12, 40, 24, 3}, {44, 128, 5}, {64, 100, 7}};
  std::mt19937 random(12);
  std::normal_distribution<float> normal_value(0.0f, 1.0f);
  for (const std::vector<int>& widths : chains) {
    for (TensorCoreMath math : {TensorCoreMath::Fp16, TensorCoreMath::Bf16}) {
      const size_t count = widths.size() - 1;
      const RandomChain chain = random_chain(widths, random);
      const auto& weights = chain.weights;
      const auto& biases = chain.biases;
      WarpgroupMlpPlan plan;
      ASSERT_TRUE(fusednn::cuda::lay_out_warpgroup_mlp(chain.layers, math, {}, 3, 2, &plan));
      const std::vector<uint32_t> image = fusednn::cuda::build_warpgroup_mlp_image(
          plan, chain.weight_pointers, chain.bias_pointers);
      ASSERT_EQ(image.size() * 4, plan.image_bytes);
      auto value_at = [&](uint32_t byte) {
        uint16_t bits;
        std::memcpy(&bits, reinterpret_cast<const char*>(image.data()) + byte, sizeof bits);
        return math == TensorCoreMath::Fp16 ? fusednn::half_to_float(bits)
                                            : fusednn::bfloat16_to_float(bits);
      };
      auto narrowed = [&](float v) {
        return math == TensorCoreMath::Fp16
                   ? fusednn::half_to_float(fusednn::float_to_half(v))
                   : fusednn::bfloat16_to_float(fusednn::float_to_bfloat16(v));
      };
      for (size_t l = 0; l < count; ++l) {
        const WarpgroupMlpLayer& layer = plan.layers[l];
        SCOPED_TRACE("layer " + std::to_string(l) + " of " + std::to_string(widths[0]));
        EXPECT_GE(layer.n, layer.out);
        EXPECT_EQ(layer.k_steps * 16, plan.width_class);
        std::vector<float> x(static_cast<size_t>(layer.in));
        for (float& v : x) v = normal_value(random);
        // A's value at k-step s, position kk (0..15), as the kernel's fragments hold it.
        auto operand = [&](int s, int kk) -> float {
          const int t = (kk % 8) / 2;
          const int first =
              plan.interleaved_columns ? 32 * (s / 2) + 8 * t + 4 * (s % 2) : 16 * s + 4 * t;
          const int column = l > 0 ? 16 * s + kk : first + 2 * (kk / 8) + kk % 2;
          if (l == 0 && s >= plan.input_steps) return 0.0f;
          return column < layer.in ? x[column] : 0.0f;
        };
        const uint32_t n_stride = static_cast<uint32_t>(layer.k_steps) * 256u;
        for (int n = 0; n < layer.n; ++n) {
          double product = 0.0, expected = 0.0;
          for (int s = 0; s < layer.k_steps; ++s) {
            for (int kk = 0; kk < 16; ++kk) {
              const uint32_t byte = layer.weight_offset + 256u * s + (n / 8) * n_stride +
                                    (kk / 8) * 128u + (n % 8) * 16u + (kk % 8) * 2u;
              product += double(operand(s, kk)) * value_at(byte);
            }
          }
          for (int k = 0; k < layer.in && n < layer.out; ++k) {
            expected += double(x[k]) * narrowed(weights[l][size_t(n) * layer.in + k]);
          }
          EXPECT_NEAR(product, expected, 1e-9 * (1.0 + std::fabs(expected))) << "column " << n;
          float bias;
          std::memcpy(&bias,
                      reinterpret_cast<const char*>(image.data()) + layer.bias_offset + 4 * n,
                      sizeof bias);
          EXPECT_EQ(bias, n < layer.out ? biases[l][n] : 0.0f) << "column " << n;
        }
      }
      // The input buffers (a tile's rows as they lie in memory) after the image, then the
      // mbarriers.
      EXPECT_EQ(plan.stage_bytes, 64u * widths[0] * 4u);
      EXPECT_EQ(plan.stage_offset, plan.image_bytes);
      EXPECT_EQ(plan.barrier_offset, plan.stage_offset + 6 * plan.stage_bytes);
      EXPECT_EQ(plan.shared_bytes,
                plan.barrier_offset + size_t(plan.warpgroups) * size_t(plan.stages) * 8);
    }
  }
  // What the form does not take: inputs that are not whole 16-byte rows, widths over 128, tf32.
  std::vector<FusedMlpLayerDesc> odd(1), wide(1);
  odd[0].in = 10, odd[0].out = 8;
  wide[0].in = 16, wide[0].out = 129;
  WarpgroupMlpPlan plan;
  EXPECT_FALSE(fusednn::cuda::lay_out_warpgroup_mlp(odd, TensorCoreMath::Bf16, {}, 3, 2, &plan));
  EXPECT_FALSE(fusednn::cuda::lay_out_warpgroup_mlp(wide, TensorCoreMath::Bf16, {}, 3, 2, &plan));
  wide[0].out = 8;
  EXPECT_FALSE(fusednn::cuda::lay_out_warpgroup_mlp(wide, TensorCoreMath::Tf32, {}, 3, 2, &plan));
}

// The first layer's k order the plan picks is the one whose 16-byte shared loads meet fewer bank
// conflicts at the input's row stride: a quarter warp (rows g, g + 1; t = 0..3) reads 4 words a
// lane, and a bank's words per load is the conflict degree. Host code only.
TEST(FusedMlpInternal, WarpgroupFirstLayerOrderHasTheFewerBankConflicts) {
  auto degree = [](int stride, bool interleaved) {
    int worst = 1;
    for (int step = 0; step < 2; ++step) {
      int words_in_bank[32] = {};
      for (int g = 0; g < 2; ++g) {
        for (int t = 0; t < 4; ++t) {
          const int first = interleaved ? 8 * t + 4 * step : 16 * step + 4 * t;
          for (int w = 0; w < 4; ++w) ++words_in_bank[(g * stride + first + w) % 32];
        }
      }
      for (int count : words_in_bank) worst = std::max(worst, count);
    }
    return worst;
  };
  for (int width = 4; width <= 128; width += 4) {
    std::vector<FusedMlpLayerDesc> layers(1);
    layers[0].in = width, layers[0].out = 16;
    WarpgroupMlpPlan plan;
    ASSERT_TRUE(
        fusednn::cuda::lay_out_warpgroup_mlp(layers, TensorCoreMath::Bf16, {}, 3, 2, &plan));
    const int chosen = degree(width, plan.interleaved_columns);
    EXPECT_LE(chosen, degree(width, !plan.interleaved_columns)) << "width " << width;
    if (width == 100) {
      EXPECT_EQ(chosen, 1);  // the seed MLP's input
    }
  }
}

// The uniform kernels (hidden layers without a switch on N or a test of the activation) take a
// chain only where every layer before the last is of N 64 with ReLU alone, at width 64, without a
// folded row op. Host code only.
TEST(FusedMlpInternal, WarpgroupUniformHiddenLayersOnlyWhereEveryHiddenLayerIsFullWidthReLU) {
  std::mt19937 random(31);
  struct Case {
    std::vector<int> widths;
    int32_t hidden_op;  // DeviceOp of every layer but the last; -1: none
    RowTailKind tail;
    bool uniform;
  };
  const std::vector<Case> cases = {
      {{32, 64, 64, 64, 64, 16}, fusednn::cuda::kOpReLU, RowTailKind::None, true},
      {{8, 40, 50, 3}, fusednn::cuda::kOpReLU, RowTailKind::None, true},  // N 64 from 33 up
      {{4, 64, 64, 64, 64, 64, 64, 64, 16}, fusednn::cuda::kOpReLU, RowTailKind::None, true},
      {{32, 64, 32, 64, 16}, fusednn::cuda::kOpReLU, RowTailKind::None, false},  // N 32 hidden
      {{32, 64, 64, 16}, fusednn::cuda::kOpGeluTanh, RowTailKind::None, false},
      {{32, 64, 64, 16}, -1, RowTailKind::None, false},
      {{32, 64, 64, 16}, fusednn::cuda::kOpReLU, RowTailKind::Softmax, false},
      {{100, 128, 64, 10}, fusednn::cuda::kOpReLU, RowTailKind::None, false},  // width 128
      {{32, 16}, fusednn::cuda::kOpReLU, RowTailKind::None, false},            // no hidden layer
  };
  for (const Case& c : cases) {
    RandomChain chain = random_chain(c.widths, random);
    for (size_t l = 0; l + 1 < chain.layers.size(); ++l) {
      chain.layers[l].epilogue.count = c.hidden_op >= 0 ? 1 : 0;
      chain.layers[l].epilogue.kind[0] = c.hidden_op >= 0 ? c.hidden_op : 0;
    }
    fusednn::cuda::TensorCoreRowTail tail;
    tail.kind = c.tail;
    WarpgroupMlpPlan plan;
    ASSERT_TRUE(fusednn::cuda::lay_out_warpgroup_mlp(chain.layers, TensorCoreMath::Fp16, tail, 3, 2,
                                                     &plan));
    EXPECT_EQ(plan.uniform_hidden, c.uniform)
        << c.widths.size() - 1 << " layers from " << c.widths[0] << ", op " << c.hidden_op;
  }
}

// On compute capability 9.0 the fp16 and bf16 chains that fit get the Warpgroup form beside
// WarpRegisters (from kWarpgroupMinRows rows), a folded Softmax included; tf32 chains and
// override wgmma=0 do not.
TEST(FusedMlpInternal, HalfChainsGetTheWarpgroupFormOnComputeCapability90) {
  REQUIRE_CUDA();
  int major = 0, minor = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0), cudaSuccess);
  if (major != 9 || minor != 0) {
    GTEST_SKIP() << "compute capability " << major << "." << minor << ": no sm_90a kernels";
  }
  const Net seed = seed_mlp();
  Net softmax = seed;
  softmax.layer(R"({"type": "Softmax", "dim": -1})");
  struct Case {
    const Net* net;
    fdnn_precision precision;
    const char* knob;
    bool warpgroup;
  };
  for (const Case& c :
       {Case{&seed, FDNN_PRECISION_BF16, "", true}, Case{&seed, FDNN_PRECISION_FP16, "", true},
        Case{&seed, FDNN_PRECISION_BF16, "0", false}, Case{&seed, FDNN_PRECISION_TF32, "", false},
        Case{&softmax, FDNN_PRECISION_BF16, "", true}}) {
    SCOPED_TRACE(std::string(c.knob) + " precision " + std::to_string(c.precision));
    ScopedOverride knob("wgmma", c.knob);
    std::mt19937 random(13);
    const std::unique_ptr<fdnn_model, void (*)(fdnn_model*)> model(
        create_model(c.net->spec(), FDNN_DEVICE_CUDA, 100000, 1, c.precision), fdnn_model_destroy);
    ASSERT_NE(model, nullptr);
    set_weights(model.get(), *c.net, draw_weights(*c.net, random));
    const TensorCoreMlpPlan* plan = chain_plan(model.get());
    ASSERT_NE(plan, nullptr);
    EXPECT_EQ(plan->warpgroup.layer_count > 0, c.warpgroup);
    if (c.warpgroup) {
      EXPECT_EQ(plan->warpgroup.tail.kind, c.net == &softmax ? fusednn::cuda::RowTailKind::Softmax
                                                             : fusednn::cuda::RowTailKind::None);
      EXPECT_EQ(plan->warpgroup.min_rows, fusednn::cuda::kWarpgroupMinRows);
      EXPECT_EQ(plan->warpgroup.width_class, 128);
      EXPECT_GE(plan->warpgroup.warpgroups, 2);
      EXPECT_EQ(plan->warpgroup_image_offset % 16, 0u);
    }
  }
}

// Chains whose first layer is too wide for the tensor-core MLP kernels split at large batches:
// the first layer on the implicit GEMM, the rest in the WarpRegisters form, from the rows that
// give every SM a warp tile. LeNet-5's 400-120-84-10 head in fp32, and in bf16 1100-64-10 (the
// SharedTiles form takes first inputs up to 1024 in the reduced precisions). Not where the batch
// cannot reach those rows, not with override split_mlp=0, not where the first layer fits the
// tensor-core kernels (the seed MLP, even with override split_mlp=1).
TEST(FusedMlpInternal, WideFirstLayersSplitAtLargeBatches) {
  REQUIRE_CUDA();
  int major = 0, sm_count = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, 0), cudaSuccess);
  if (major < 8) GTEST_SKIP() << "compute capability " << major << ": no tensor cores";
  const Net head = lenet5_head(R"({"type": "Tanh"})");
  Net wide({1100});
  wide.linear("a", 1100, 64).act(R"({"type": "ReLU"})").linear("b", 64, 10);
  const Net seed = seed_mlp();
  const int64_t split_rows = int64_t{sm_count} * 16;
  struct Case {
    const Net* net;
    fdnn_precision precision;
    int64_t max_batch;
    const char* knob;
    bool split;
    TensorCoreMath math;
  };
  for (const Case& c : {Case{&head, FDNN_PRECISION_FP32, 16384, "", true, TensorCoreMath::Tf32x3},
                        Case{&head, FDNN_PRECISION_FP32, split_rows - 1, "", false, {}},
                        Case{&head, FDNN_PRECISION_FP32, 16384, "0", false, {}},
                        Case{&head, FDNN_PRECISION_FP32, 8, "1", true, TensorCoreMath::Tf32x3},
                        Case{&wide, FDNN_PRECISION_BF16, 16384, "", true, TensorCoreMath::Bf16},
                        Case{&seed, FDNN_PRECISION_FP32, 16384, "", false, {}},
                        Case{&seed, FDNN_PRECISION_FP32, 8, "1", false, {}}}) {
    SCOPED_TRACE(std::string(c.knob) + " precision " + std::to_string(c.precision) + " max_batch " +
                 std::to_string(c.max_batch) + " " + c.net->spec());
    ScopedOverride knob("split_mlp", c.knob);
    std::mt19937 random(17);
    const std::unique_ptr<fdnn_model, void (*)(fdnn_model*)> model(
        create_model(c.net->spec(), FDNN_DEVICE_CUDA, c.max_batch, 1, c.precision),
        fdnn_model_destroy);
    ASSERT_NE(model, nullptr);
    set_weights(model.get(), *c.net, draw_weights(*c.net, random));
    const CudaBackend* backend = backend_of(model.get());
    ASSERT_NE(backend, nullptr);
    const MlpChainOp* chain = fused_chain(*backend);
    ASSERT_NE(chain, nullptr);
    EXPECT_EQ(chain->split.usable(), c.split);
    if (!c.split) continue;
    const int64_t min_rows = std::string(c.knob) == "1" ? 0 : split_rows;
    EXPECT_EQ(chain->split.min_rows, min_rows);
    // Two kernels and the context's workspace from the split's rows on; below them one kernel
    // on the caller's buffers alone.
    EXPECT_EQ(backend->launches_per_run(std::max<int64_t>(min_rows, 1)), 2);
    EXPECT_TRUE(backend->runs_touch_context_memory(std::max<int64_t>(min_rows, 1)));
    if (min_rows > 1) {
      EXPECT_EQ(backend->launches_per_run(min_rows - 1), 1);
      EXPECT_FALSE(backend->runs_touch_context_memory(min_rows - 1));
    }
    EXPECT_EQ(chain->split.first.math, c.math);
    EXPECT_EQ(chain->split.rest.math, c.math);
    EXPECT_EQ(chain->split.rest.form, TensorCoreForm::WarpRegisters);
    EXPECT_NE(chain->split.first.image, nullptr);
    EXPECT_NE(chain->split.rest.image, nullptr);
    EXPECT_EQ(chain->tensor_core.tile_rows, 0);
    EXPECT_GE(backend->workspace_floats(),
              backend->split_middle_offset() + c.max_batch * c.net->tensors()[0].shape[0]);
    EXPECT_EQ(backend->split_middle_offset() % 4, 0);
  }
}

// In fp16 and bf16 a chain whose first layer only the SharedTiles form takes (509 inputs) keeps
// SharedTiles below the split's rows and runs split from them (form_selection.hpp); in tf32
// SharedTiles runs at every batch past 16 rows and no split is planned. Both under the rule that
// takes reduced precisions to tensor cores at small batches, which it sets itself.
TEST(FusedMlpInternal, SixteenBitSplitsTakeOverFromSharedTiles) {
  REQUIRE_CUDA();
  ScopedOverride rule("small_batch_tensor_cores", "1");
  int major = 0, sm_count = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, 0), cudaSuccess);
  if (major < 8) GTEST_SKIP() << "compute capability " << major << ": no tensor cores";
  Net mid({509});
  mid.linear("a", 509, 32).act(R"({"type": "SiLU"})").linear("b", 32, 5);
  mid.act(R"({"type": "SiLU"})").linear("c", 5, 1);
  const int64_t split_rows = int64_t{sm_count} * 16;
  for (const fdnn_precision precision :
       {FDNN_PRECISION_FP16, FDNN_PRECISION_BF16, FDNN_PRECISION_TF32}) {
    SCOPED_TRACE("precision " + std::to_string(precision));
    std::mt19937 random(18);
    const std::unique_ptr<fdnn_model, void (*)(fdnn_model*)> model(
        create_model(mid.spec(), FDNN_DEVICE_CUDA, 16384, 1, precision), fdnn_model_destroy);
    ASSERT_NE(model, nullptr);
    set_weights(model.get(), mid, draw_weights(mid, random));
    const CudaBackend* backend = backend_of(model.get());
    ASSERT_NE(backend, nullptr);
    const MlpChainOp* chain = fused_chain(*backend);
    ASSERT_NE(chain, nullptr);
    ASSERT_GT(chain->tensor_core.tile_rows, 0);
    EXPECT_EQ(chain->tensor_core.form, TensorCoreForm::SharedTiles);
    const bool sixteen = precision != FDNN_PRECISION_TF32;
    EXPECT_EQ(chain->split.usable(), sixteen);
    EXPECT_EQ(CudaBackend::mlp_route(*chain, split_rows - 1), MlpRoute::TensorCore);
    EXPECT_EQ(CudaBackend::mlp_route(*chain, split_rows),
              sixteen ? MlpRoute::Split : MlpRoute::TensorCore);
    EXPECT_EQ(backend->launches_per_run(split_rows - 1), 1);
    EXPECT_EQ(backend->launches_per_run(split_rows), sixteen ? 2 : 1);
    // The explanation names the form at each batch and, below the split, where it starts.
    const std::string below = explain_text(model.get(), split_rows - 1);
    const std::string from = explain_text(model.get(), split_rows);
    EXPECT_NE(below.find("SharedTiles"), std::string::npos) << below;
    EXPECT_EQ(below.find("below the split form's") != std::string::npos, sixteen) << below;
    EXPECT_EQ(from.find("split MLP") != std::string::npos, sixteen) << from;
  }
}

// A Softmax or LayerNorm after a split chain ends the split's second kernel: two launches at every
// batch (the fused kernel and the row kernel below the split's rows, the split's two from there),
// against three from the split's rows with override fold_row_ops=0.
TEST(FusedMlpInternal, RowTailsAfterSplitChainsFoldIntoTheSecondKernel) {
  REQUIRE_CUDA();
  int major = 0, sm_count = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, 0), cudaSuccess);
  if (major < 8) GTEST_SKIP() << "compute capability " << major << ": no tensor cores";
  Net softmax = lenet5_head(R"({"type": "Tanh"})");
  softmax.layer(R"({"type": "Softmax", "dim": -1})");
  Net norm({400});
  norm.linear("f5", 400, 120).act(R"({"type": "ReLU"})").linear("f6", 120, 84);
  norm.layer_norm("norm", 84);
  const int64_t split_rows = int64_t{sm_count} * 16;
  using Head = std::pair<const Net*, RowTailKind>;
  for (const auto& [net, kind] :
       {Head{&softmax, RowTailKind::Softmax}, Head{&norm, RowTailKind::LayerNorm}}) {
    for (const char* fold : {"", "0"}) {
      SCOPED_TRACE(net->spec() + " override fold_row_ops=" + fold);
      ScopedOverride knob("fold_row_ops", fold);
      std::mt19937 random(18);
      const std::unique_ptr<fdnn_model, void (*)(fdnn_model*)> model(
          create_model(net->spec(), FDNN_DEVICE_CUDA, 16384, 1, FDNN_PRECISION_FP32),
          fdnn_model_destroy);
      ASSERT_NE(model, nullptr);
      set_weights(model.get(), *net, draw_weights(*net, random));
      const CudaBackend* backend = backend_of(model.get());
      ASSERT_NE(backend, nullptr);
      const MlpChainOp* chain = fused_chain(*backend);
      ASSERT_NE(chain, nullptr);
      ASSERT_TRUE(chain->split.usable());
      const bool folded = std::string(fold) != "0";
      EXPECT_EQ(chain->row_tail_input >= 0, folded);
      EXPECT_EQ(chain->split.rest.tail.kind, folded ? kind : RowTailKind::None);
      if (folded && kind == RowTailKind::LayerNorm) {
        EXPECT_TRUE(chain->split.rest.tail.gamma);
        EXPECT_TRUE(chain->split.rest.tail.beta);
      }
      EXPECT_EQ(backend->launches_per_run(split_rows - 1), 2);
      EXPECT_EQ(backend->launches_per_run(split_rows), folded ? 2 : 3);
    }
  }
}

}  // namespace
