// SPDX-License-Identifier: Apache-2.0
// The CUDA backend's lowering: one plan step (or a run of steps one kernel takes together) into
// an Op, by one function per step kind. The forms come from the selection table
// (form_selection.hpp), their plans from the kernels' planners; the weights go into host images
// in the layouts the kernels read, which the backend uploads in one allocation each and then
// points the ops at (the offsets in LoweredOp::refs and LoweredOp::images).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "backends/cuda/conv/conv2d.hpp"
#include "backends/cuda/elementwise/convert_dtype.hpp"
#include "backends/cuda/exec/cuda_executor.hpp"
#include "backends/cuda/platform/device_info.hpp"
#include "common/precision.hpp"
#include "planner/plan.hpp"

namespace fusednn::cuda {

inline constexpr size_t kNoOffset = static_cast<size_t>(-1);
inline constexpr int64_t kSlotAlignment = 64;  // floats: every workspace slot starts on 256 bytes

// The host images of the device data, filled op by op.
struct HostImages {
  std::vector<float> floats;          // weights and biases in each kernel's layout
  std::vector<uint16_t> half;         // cuBLASLt's 16-bit weights (and output biases)
  std::vector<uint32_t> tensor_core;  // tensor-core images (MLP chains, convolutions)
};

// Where an op's data starts in the images (kNoOffset where it has none).
struct OpRefs {
  size_t weight = kNoOffset;  // into floats
  size_t bias = kNoOffset;
  std::vector<size_t> layer_weight;  // FusedMlp: W^T of each layer
  std::vector<size_t> layer_bias;
  CublasLtActivation lt_activation = CublasLtActivation::None;  // CublasLtLinear only
  size_t half_weight = kNoOffset;                               // into half
  size_t half_bias = kNoOffset;      // into half: a bias cuBLASLt may add to a 16-bit y
  size_t block_image = kNoOffset;    // FusedMlp: the single-block form's image, into floats
  size_t cluster_image = kNoOffset;  // FusedMlp: the cluster form's image, into floats
  // Into tensor_core: the tensor-core plan's or the implicit GEMM's image, and a split chain's
  // two.
  size_t main_image = kNoOffset, split_first_image = kNoOffset, split_rest_image = kNoOffset;
};

// What lowering reads besides the step: the plan, the model's settings, the device.
struct LoweringInput {
  const Plan* plan = nullptr;
  std::vector<int> consumers;  // per value, the steps reading it
  DeviceInfo device;
  Precision precision = Precision::FP32;
  int64_t max_batch = 1;
  bool cublaslt_half_operands = false;  // cuBLASLt reads W and x in half_format
  HalfFormat half_format = HalfFormat::Bfloat16;
};

LoweringInput make_lowering_input(const Plan& plan, const DeviceInfo& device, Precision precision,
                                  int64_t max_batch);

struct LoweredOp {
  Op op;
  OpRefs refs;
  bool runs_reduced_precision = false;  // a kernel of the op computes in the model's precision
  // cuBLASLt reads the model input or writes the model output: device graphs cannot be
  // re-pointed and the host path cannot map them.
  bool cublaslt_touches_model_io = false;
};

// The op that starts at step `s` (it may take the steps after it too: op.last_step says).
LoweredOp lower_step(const LoweringInput& input, size_t s, HostImages* images);

// The epilogue in pieces of at most kMaxEpilogueOps, in order; one empty piece for an empty
// epilogue, so that result.front() is always what the producing kernel applies.
std::vector<DeviceEpilogue> split_epilogue(const Epilogue& epilogue);

// A Conv2d step's geometry as Conv2dArgs (no pointers, no batch).
Conv2dArgs conv2d_geometry(const WindowGeometry& w);

// The tensor-core math of a model precision (3xTF32 for fp32).
TensorCoreMath tensor_core_math(Precision precision);

}  // namespace fusednn::cuda
