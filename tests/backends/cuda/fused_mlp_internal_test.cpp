// The fused MLP's plan seen from inside the library (linked like cublaslt_internal_test.cpp):
// which weight layout the fp32 chains on tensor cores get, and which small-batch form a chain
// takes. Whether the results are right is cuda_backend_test.cpp's to check, for every form.
//
// Without a GPU, or below the compute capability a form needs, its test skips.
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>
#include <utility>

#include "api/handles.hpp"
#include "backends/cuda/cuda_executor.hpp"
#include "cuda_test_support.hpp"
#include "fusednn/fusednn.h"

namespace {

using namespace fusednn_cuda_test;
using fusednn::cuda::CudaBackend;
using fusednn::cuda::FusedMlpPlan;
using fusednn::cuda::Op;
using fusednn::cuda::OpKind;
using fusednn::cuda::TensorCoreForm;
using fusednn::cuda::TensorCoreMath;
using fusednn::cuda::TensorCoreMlpPlan;

// The tensor-core plan of the model's one fused chain, or null when there is none (a CPU model,
// no chain, or a chain with no tensor-core form on this device).
const TensorCoreMlpPlan* chain_plan(fdnn_model* model) {
  const std::shared_ptr<const fusednn::PreparedModel> prepared = model->model.prepare();
  const auto* backend = dynamic_cast<const CudaBackend*>(prepared->backend.get());
  if (backend == nullptr) return nullptr;
  for (const Op& op : backend->ops()) {
    if (op.kind == OpKind::FusedMlp && op.tensor_core.tile_rows > 0) return &op.tensor_core;
  }
  return nullptr;
}

// The fused chain's plan, or null when the model has none.
const FusedMlpPlan* fused_plan(fdnn_model* model) {
  const std::shared_ptr<const fusednn::PreparedModel> prepared = model->model.prepare();
  const auto* backend = dynamic_cast<const CudaBackend*>(prepared->backend.get());
  if (backend == nullptr) return nullptr;
  for (const Op& op : backend->ops()) {
    if (op.kind == OpKind::FusedMlp) return &op.mlp;
  }
  return nullptr;
}

// On compute capability 9.0 and newer, small batches of a chain whose layers are at most 256
// wide run on the cluster form (fused_mlp_cluster.cu), with the row image uploaded for it; the
// knob FUSEDNN_CUDA_SMALL_BATCH_MLP=block gives the single-block form instead.
TEST(FusedMlpInternal, SmallBatchesTakeTheClusterFormOnHopper) {
  REQUIRE_CUDA();
  int major = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0), cudaSuccess);
  if (major < 9) GTEST_SKIP() << "compute capability " << major << ": no thread-block clusters";
  Net seed({100});
  seed.linear("fc1", 100, 128).act(R"({"type": "ReLU"})");
  seed.linear("fc2", 128, 64).act(R"({"type": "ReLU"})");
  seed.linear("fc3", 64, 10);
  Net head({400});  // LeNet-5's head: 236 KB of weights, more than one block holds
  head.linear("f5", 400, 120).act(R"({"type": "ReLU"})");
  head.linear("f6", 120, 84).act(R"({"type": "ReLU"})");
  head.linear("f7", 84, 10);
  for (const char* knob : {"", "block"}) {
    ScopedEnvironment form("FUSEDNN_CUDA_SMALL_BATCH_MLP", knob);
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
      EXPECT_EQ(plan->block_image != nullptr, cluster || net == &seed) << knob;
    }
  }
}

// An fp32 chain forced onto tensor cores (3xTF32) takes its weights split into tf32 parts at
// load where the doubled shared-memory image keeps as many blocks per SM resident, and whole
// where it would not.
TEST(FusedMlpInternal, Fp32ChainsSplitTheirWeightsWhereTheyFit) {
  REQUIRE_CUDA();
  int major = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0), cudaSuccess);
  if (major < 8) GTEST_SKIP() << "compute capability " << major << ": no tf32 tensor cores";
  ScopedEnvironment force("FUSEDNN_CUDA_FP32_TENSOR_CORES", "1");
  Net seed({100});  // 208 KB split: one 8-warp block per SM either way
  seed.linear("fc1", 100, 128).act(R"({"type": "ReLU"})");
  seed.linear("fc2", 128, 64).act(R"({"type": "ReLU"})");
  seed.linear("fc3", 64, 10);
  Net wide({32});  // 64-wide: 98 KB whole (two blocks per SM), 164 KB split (one)
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

}  // namespace
