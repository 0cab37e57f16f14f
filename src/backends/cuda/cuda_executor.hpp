// The CUDA backend's internals: the plan lowered to a program of kernel launches ("ops") over
// device-resident weights, and the backend that owns them. Contexts (cuda_context.hpp) own the
// per-run memory and call enqueue().
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "backends/backend.hpp"
#include "backends/cuda/device_epilogue.hpp"
#include "backends/cuda/device_info.hpp"
#include "backends/cuda/device_memory.hpp"
#include "backends/cuda/fused_mlp.hpp"
#include "planner/plan.hpp"

namespace fusednn::cuda {

enum class OpKind {
  FusedMlp,  // one or more Linear steps in one launch (fused_mlp.cu)
  Linear,    // a Linear the fused kernel cannot hold (linear.cu)
  Conv2d,
  MaxPool2d,
  AvgPool2d,
  Elementwise,
  ChannelAffine,
  LayerNorm,
  Softmax,
  Add,
  Concat,
  Copy,
};

struct Op {
  OpKind kind = OpKind::Copy;
  int first_step = 0;  // the plan steps it runs: [first_step, last_step]
  int last_step = 0;
  const float* weight = nullptr;  // device copies, laid out as the kernel wants them
  const float* bias = nullptr;
  FusedMlpPlan mlp;                      // FusedMlp only
  std::vector<DeviceEpilogue> epilogue;  // [0] applied by the kernel, the rest in place after it
};

class CudaBackend final : public Backend {
 public:
  CudaBackend(std::shared_ptr<const Plan> plan, int64_t max_batch, int device_ordinal,
              bool cuda_graphs, Precision precision);
  ~CudaBackend() override;

  fdnn_device device() const override { return FDNN_DEVICE_CUDA; }
  // Everything runs in fp32 until the tensor-core kernels land, whatever precision() allows.
  // reduced-precision kernels: see fused_mlp_tensor_core
  Precision effective_precision() const override { return Precision::FP32; }
  size_t weight_bytes() const override { return weights_.bytes(); }
  size_t context_bytes() const override;
  std::unique_ptr<ExecutionContext> create_context() const override;

  // Queues the whole plan for `batch` samples on `stream`: input and output are device
  // pointers, workspace a context's workspace_floats() buffer. Nothing is allocated.
  void enqueue(int64_t batch, const float* input, float* output, float* workspace,
               cudaStream_t stream) const;

  const Plan& plan() const { return *plan_; }
  const DeviceInfo& device_info() const { return device_; }
  int64_t max_batch() const { return max_batch_; }
  bool cuda_graphs() const { return cuda_graphs_; }
  // The precision the caller allows (fdnn_model_options::precision).
  Precision precision() const { return precision_; }
  int64_t workspace_floats() const { return workspace_floats_; }
  int64_t input_floats() const { return max_batch_ * plan_->values[0].elements; }
  int64_t output_floats() const { return max_batch_ * plan_->values[plan_->output_value].elements; }
  // Kernel launches one run makes (graphs pay off from two).
  int launches_per_run() const { return launches_per_run_; }
  const std::vector<Op>& ops() const { return ops_; }

 private:
  void lower_plan(std::vector<float>& blob, std::vector<std::vector<size_t>>& pending);
  void assign_workspace();

  std::shared_ptr<const Plan> plan_;
  int64_t max_batch_;
  bool cuda_graphs_;
  Precision precision_;
  DeviceInfo device_;
  DeviceArray<float> weights_;
  std::vector<Op> ops_;
  std::vector<int64_t> value_offset_;  // device workspace offset (floats) of each workspace value
  int64_t workspace_floats_ = 0;
  int launches_per_run_ = 0;
};

}  // namespace fusednn::cuda
