// SPDX-License-Identifier: Apache-2.0
// The CUDA backend's lowering: one plan step (or a run of steps one kernel takes together) into
// an Op (op.hpp), by one function per step kind. The forms come from the selection table
// (form_selection.hpp), their plans from the kernels' planners; the weights go into host images
// in the layouts the kernels read, which the backend uploads in one allocation each and then
// points the ops at (the offsets in LoweredOp::refs and LoweredOp::images).
#pragma once

#include <cstddef>
#include <cstdint>
#include <variant>
#include <vector>

#include "backends/cuda/conv/conv2d.hpp"
#include "backends/cuda/elementwise/convert_dtype.hpp"
#include "backends/cuda/exec/op.hpp"
#include "backends/cuda/linear/linear_cublaslt.hpp"
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

// Where a FusedMlp op's data starts in the images, besides a folded LayerNorm's gamma and beta
// (OpRefs::weight and bias).
struct MlpChainRefs {
  std::vector<size_t> layer_weight;  // into floats: W^T of each layer
  std::vector<size_t> layer_bias;
  size_t block_image = kNoOffset;    // the single-block form's image, into floats
  size_t cluster_image = kNoOffset;  // the cluster form's image, into floats
  // Into tensor_core: the tensor-core plan's image, and a split chain's two.
  size_t tensor_core_image = kNoOffset, split_first_image = kNoOffset, split_rest_image = kNoOffset;
};

// A CublasLtLinear op's 16-bit copies (into half) and cuBLASLt's epilogue, besides W and the
// bias in fp32 (OpRefs::weight and bias).
struct LinearRefs {
  CublasLtActivation activation = CublasLtActivation::None;
  size_t half_weight = kNoOffset;
  size_t half_bias = kNoOffset;  // a bias cuBLASLt may add to a 16-bit y
};

// A Conv2d op on the implicit GEMM: its image, into tensor_core.
struct ConvGemmRefs {
  size_t image = kNoOffset;
};

// Where an op's data starts in the images (kNoOffset where it has none): the weight and bias in
// floats that most kinds have (a ChannelAffine's scale and shift, a LayerNorm's gamma and beta,
// also those of a LayerNorm folded into a FusedMlp op), and the offsets of one kind besides.
struct OpRefs {
  size_t weight = kNoOffset;
  size_t bias = kNoOffset;
  std::variant<std::monostate, MlpChainRefs, LinearRefs, ConvGemmRefs> of_kind;
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
