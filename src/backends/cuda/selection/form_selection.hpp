// SPDX-License-Identifier: Apache-2.0
// The CUDA backend's selection table: which kernel form each lowered step prefers, from the
// problem's sizes, the device's properties and the debugging overrides (selection_overrides.hpp),
// with the reason that decided it and the forms it passed over. Pure host code with no CUDA
// headers: its tests run in every configuration. Every threshold of the choice is a named
// constant here; the forms' own planners (fused_mlp*.hpp, fused_mlp_split.hpp, conv*.hpp) then
// say whether the preferred form fits the device, and the backend falls back in the order these
// choices give. docs/cuda-kernels.md states the rules in prose.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backends/cuda/platform/device_info.hpp"
#include "common/precision.hpp"

namespace fusednn::cuda {

// The kernels' limits the table reasons with (cuda_backend.cpp checks that they equal the
// kernels' own constants).
inline constexpr int64_t kSelectionFusedMlpMaxWidth = 256;  // widest output a fused block holds
inline constexpr int64_t kSelectionBlockMaxRows = 16;       // the single-block FMA form's rows
inline constexpr int64_t kSelectionWarpTileRows = 16;       // rows of one WarpRegisters warp tile
inline constexpr int kTensorCoreMinMajor = 8;               // tensor-core forms: compute 8.0+
inline constexpr int64_t kTensorCoreMaxHiddenWidth = 256;   // widths past the first input
inline constexpr int64_t kTensorCoreMaxFirstInput = 1024;   // the first layer's input

// A lone Linear layer (no chain to keep on chip) stays on the fused MLP kernel only while its
// input is at most this wide: the fused kernels hold whole rows of narrow chains, and a longer
// reduction over one layer is a plain GEMM, which cuBLASLt tiles better at every batch.
inline constexpr int64_t kLoneLinearFusedMaxInputs = 128;
// ... or while its whole weight is at most this many values, however wide its input: so small a
// layer (a classifier head such as 512->10) costs one short launch on the fused kernel.
inline constexpr int64_t kLoneLinearFusedMaxWeights = 16384;

// A form the table passed over, and why.
struct RejectedForm {
  std::string form;
  std::string why;
};

// "; not <form>: <why>" for each, in order ("" for none): what a load reason appends.
std::string rejected_text(const std::vector<RejectedForm>& rejected);

// ---- A lone Linear layer: the fused MLP kernel or cuBLASLt ----

enum class LoneLinearForm { FusedMlp, CublasLt };

struct LoneLinearProblem {
  int64_t in = 0, out = 0;
  Precision precision = Precision::FP32;
  // The layer is the last step and reads a convolution's or pooling's output: the head of a
  // conv stack, which the conv net's single launch (conv_net.hpp) takes whole only as a fused
  // MLP.
  bool heads_conv_stack = false;
};

struct LoneLinearChoice {
  LoneLinearForm form = LoneLinearForm::FusedMlp;
  std::string reason;
  std::vector<RejectedForm> rejected;
};

// Whether cuBLASLt may take lone Linear layers at all: unless the override cublaslt=0, which
// keeps them on fusednn's own kernels in every precision (a debugging aid: compute-sanitizer's
// initcheck does not see cuBLASLt's stores).
bool cublaslt_allowed(const SelectionOverrides& overrides);

// The preferred form of a lone Linear layer. FusedMlp is a preference: when no fused tile holds
// the layer, the backend runs it on cuBLASLt all the same.
LoneLinearChoice choose_lone_linear_form(const LoneLinearProblem& problem,
                                         const DeviceInfo& device);

// ---- A chain of Linear layers on the fused MLP kernels ----

struct LinearWidths {
  int64_t in = 0, out = 0;
};

struct ChainProblem {
  std::vector<LinearWidths> layers;  // one or more, each reading the previous one's output
  Precision precision = Precision::FP32;
  int64_t max_rows = 1;  // max_batch x rows per sample
};

// When each form of a chain runs. A row count of -1 means never; the fused FMA kernel takes
// every batch below the others.
struct ChainFormRules {
  // Plan the tensor-core forms at all (planning loads their module, so not where no batch can
  // reach them).
  bool plan_tensor_cores = false;
  std::string tensor_core_reason;  // why they run from the rows below, or why not at all
  int64_t warp_registers_min_rows = -1;
  int64_t shared_tiles_min_rows = -1;
  std::string size_refusal;  // the sizes' limit a tensor-core form would pass ("" for none)
  // The split form (first layer as an implicit GEMM, the rest as WarpRegisters).
  bool plan_split = false;
  bool split_at_every_batch = false;         // override split_mlp=1
  int64_t split_forced_min_rows = 0;         // its rows then: tf32 keeps the FMA kernels' rows
  bool split_replaces_shared_tiles = false;  // from the split's rows, over SharedTiles
  std::string split_reason;
  bool fold_row_tail = false;  // a Softmax or LayerNorm after the chain joins its kernel
};

ChainFormRules choose_chain_forms(const ChainProblem& problem, const DeviceInfo& device);

// Why the chain has no tensor-core form, by the first limit it passes (compute capability,
// widths); "" when the sizes allow one (shared memory then decides).
std::string tensor_core_size_refusal(const std::vector<LinearWidths>& layers,
                                     const DeviceInfo& device);

// The rows from which a split chain runs split when the override does not force every batch:
// one WarpRegisters warp tile per SM.
int64_t split_min_rows(const DeviceInfo& device);

// ---- An unfused Conv2d ----

struct ConvProblem {
  int64_t in_channels = 0, out_channels = 0, groups = 1;
  int64_t kernel_height = 0, kernel_width = 0;
  bool fits_direct_staging = true;  // the direct kernel can stage the layer in shared memory
  Precision precision = Precision::FP32;
};

struct ConvFormRules {
  bool prefer_implicit_gemm = false;   // over the fused conv (+ pool) kernel
  bool implicit_gemm_allowed = false;  // where the fused kernel does not take the layer
  bool fused_conv_allowed = true;
  std::string reason;  // why the implicit GEMM is preferred, allowed or not
};

// An implicit GEMM fills tensor-core tiles from this many output channels a group and this long
// a dot product (input channels a group x kernel area).
inline constexpr int64_t kConvGemmMinGroupOutChannels = 32;
inline constexpr int64_t kConvGemmMinDotLength = 64;

ConvFormRules choose_conv_form(const ConvProblem& problem, const DeviceInfo& device);

// ---- cuBLASLt's operands ----

// Whether cuBLASLt reads W and x in 16 bits: fp16 and bf16 models from compute capability 8.0 on,
// unless the overrides tensor_cores=0 or cublaslt_half_operands=0.
bool cublaslt_half_operands(Precision precision, const DeviceInfo& device);

}  // namespace fusednn::cuda
