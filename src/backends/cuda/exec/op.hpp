// SPDX-License-Identifier: Apache-2.0
// One lowered op of the CUDA backend: a kernel launch (or the few launches one kernel family
// makes) over a run of plan steps. What every op has (its kind, its steps, its epilogue, why it
// took its form) is the common part; each kernel's plan and device pointers live in the payload
// of the kinds that use them, one alternative of a std::variant.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "backends/cuda/conv/conv2d_implicit_gemm.hpp"
#include "backends/cuda/conv/conv_pool.hpp"
#include "backends/cuda/device/device_epilogue.hpp"
#include "backends/cuda/linear/linear_cublaslt.hpp"
#include "backends/cuda/linear/small_batch_linear.hpp"
#include "backends/cuda/mlp/fused_mlp.hpp"
#include "backends/cuda/mlp/fused_mlp_split.hpp"
#include "backends/cuda/mlp/fused_mlp_tensor_core.hpp"

namespace fusednn::cuda {

enum class OpKind {
  FusedMlp,        // one or more Linear steps in one launch (fused_mlp.cu)
  CublasLtLinear,  // a lone Linear the fused kernel does not take (linear_cublaslt.cpp; the
                   // tiled GEMM of linear.cu where cuBLASLt has no algorithm)
  Conv2d,          // conv2d.cu's direct kernel, or an implicit GEMM (conv_gemm.usable)
  ConvPool,        // a Conv2d and the pooling step after it, or a Conv2d alone (conv_pool.cu)
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

// FusedMlp: a chain of Linear layers on the fp32 FMA kernels, on tensor cores from
// tensor_core_min_rows rows, or split from split.min_rows rows (CudaBackend::mlp_route).
struct MlpChainOp {
  FusedMlpPlan mlp;  // the FMA kernels' plan, the layers' W^T and biases on the device
  // On tensor cores, when the chain fits (tensor_core.tile_rows > 0); used from
  // tensor_core_min_rows rows on (0 for reduced precisions: always).
  TensorCoreMlpPlan tensor_core;
  int64_t tensor_core_min_rows = 0;
  // A Softmax or LayerNorm folded in after the chain (tensor_core.tail): the tensor-core kernel
  // applies it; below tensor_core_min_rows the fused kernel writes the chain's output value and
  // the row kernel runs from there, with a LayerNorm's gamma and beta (null where it has none).
  int row_tail_input = -1;
  const float* tail_gamma = nullptr;
  const float* tail_beta = nullptr;
  // Chains the tensor-core kernels cannot hold whole (a wide first layer), and fp16 and bf16
  // chains on SharedTiles: from split.min_rows rows the first layer on the implicit GEMM, the
  // rest on tensor cores, through the context's workspace (CudaBackend::split_middle_offset()).
  SplitMlpPlan split;
};

// CublasLtLinear: a lone Linear step on cuBLASLt, the small-batch kernel or the tiled GEMM.
struct LinearOp {
  // W in PyTorch's [out][in] layout and the bias, fp32, as the tiled GEMM and the small-batch
  // kernel read them (cuBLASLt too in fp32 models).
  const float* weight = nullptr;
  const float* bias = nullptr;
  std::unique_ptr<CublasLtLinear> lt;  // null where cuBLASLt is not loaded
  // In fp16 and bf16 models: W in that type ([out][in]), which cuBLASLt reads with x narrowed
  // into the context's staging (CudaBackend::half_staging_offset()); null otherwise.
  const void* half_weight = nullptr;
  // In fp32 models: the kernel that takes runs of a few rows instead, where the shape allows
  // (small_batch_linear.hpp).
  SmallBatchLinearPlan small_batch;
  // cuBLASLt with 16-bit operands reads a model input of its own type as its operand instead of
  // narrowing it into the staging (CudaBackend::op_reads_16_bit()), decided at load.
  bool reads_16_bit_input = false;
  // cuBLASLt with 16-bit operands writes the model output with nothing in place after it: it
  // writes a model output of its operands' type itself, where it has an algorithm for that
  // (CudaBackend::op_writes_16_bit()).
  bool writes_16_bit_output = false;
};

// Conv2d: the direct kernel (W in weight), or an implicit GEMM where conv_gemm.usable (W in its
// image, weight null).
struct Conv2dOp {
  const float* weight = nullptr;
  const float* bias = nullptr;
  ConvGemmPlan conv_gemm;
};

// ConvPool: the fused conv (+ pool) kernel, W in its layout.
struct ConvPoolOp {
  ConvPoolPlan conv_pool;
  const float* weight = nullptr;
  const float* bias = nullptr;
};

// ChannelAffine (an inference BatchNorm): scale and shift per channel.
struct ChannelAffineOp {
  const float* scale = nullptr;
  const float* shift = nullptr;
};

// LayerNorm: gamma and beta, null where the step has none.
struct LayerNormOp {
  const float* gamma = nullptr;
  const float* beta = nullptr;
};

// The steps whose one kernel reads only their values and the epilogue: MaxPool2d, AvgPool2d,
// Elementwise, Softmax, Add, Concat, Copy (the op's kind says which).
struct StepKernelOp {};

using OpPayload = std::variant<StepKernelOp, MlpChainOp, LinearOp, Conv2dOp, ConvPoolOp,
                               ChannelAffineOp, LayerNormOp>;

struct Op {
  OpKind kind = OpKind::Copy;
  int first_step = 0;  // the plan steps it runs: [first_step, last_step]
  int last_step = 0;
  // [0] applied by the kernel (for CublasLtLinear: what cuBLASLt's epilogue fuses after the
  // bias, which the fallback GEMM applies the same), the rest in place after it.
  std::vector<DeviceEpilogue> epilogue;
  // Why the op took its kind and plans, written where the backend decided them at load; the
  // per-batch choice is added by CudaBackend::explain().
  std::string load_reason;
  // Whether one of its steps reads the model input, and whether it writes the model output.
  bool reads_model_input = false;
  bool writes_model_output = false;
  // The kind's plans and device data: MlpChainOp for FusedMlp, LinearOp for CublasLtLinear,
  // Conv2dOp, ConvPoolOp, ChannelAffineOp and LayerNormOp for their kinds, StepKernelOp for the
  // rest.
  OpPayload payload;

  // Whether the payload is the one of the op's kind.
  bool payload_fits_kind() const {
    switch (kind) {
      case OpKind::FusedMlp: return as<MlpChainOp>() != nullptr;
      case OpKind::CublasLtLinear: return as<LinearOp>() != nullptr;
      case OpKind::Conv2d: return as<Conv2dOp>() != nullptr;
      case OpKind::ConvPool: return as<ConvPoolOp>() != nullptr;
      case OpKind::ChannelAffine: return as<ChannelAffineOp>() != nullptr;
      case OpKind::LayerNorm: return as<LayerNormOp>() != nullptr;
      default: return as<StepKernelOp>() != nullptr;
    }
  }

  // The payload as `Payload`, or null where the op has another.
  template <typename Payload>
  const Payload* as() const {
    return std::get_if<Payload>(&payload);
  }
  template <typename Payload>
  Payload* as() {
    return std::get_if<Payload>(&payload);
  }
};

}  // namespace fusednn::cuda
