// SPDX-License-Identifier: Apache-2.0
// Debugging overrides of the CUDA backend's kernel selection. By default every choice of form,
// tile and split is made from the model and the device; for comparing forms in tests and
// benchmarks, the one environment variable FUSEDNN_CUDA_OVERRIDES, read once when a model is
// created, can force some of them: a comma-separated list of key=value pairs (the keys and
// values below; docs/cuda-kernels.md lists them). A later pair for a key replaces an earlier one.
// An unknown key or value makes the model's creation fail with INVALID_ARGUMENT naming it.
#pragma once

#include <string>

namespace fusednn::cuda {

// A choice left to the selection (Auto) or forced off or on.
enum class Forced { Auto, Off, On };

// The small-batch Linear kernel's use (small_batch_linear.hpp).
enum class SmallBatchLinearMode { Auto, Off, Always, Unicast };

// The small-batch MLP forms allowed (fused_mlp.hpp).
enum class SmallBatchMlpForms { Both, BlockOnly, ClusterOnly };

struct SelectionOverrides {
  Forced fp32_tensor_cores = Forced::Auto;        // fp32 chains on 3xTF32 tensor cores
  bool reduced_tensor_cores = true;               // tf32/fp16/bf16 on tensor cores at all
  bool reduced_tensor_cores_every_batch = false;  // ... from the first row, not one tile per SM
  Forced implicit_gemm = Forced::Auto;            // unfused Conv2d as an implicit GEMM
  bool cublaslt = true;                           // lone wide fp32 Linear layers on cuBLASLt
  bool cublaslt_half_operands = true;             // 16-bit operands for 16-bit models' cuBLASLt
  bool fused_conv = true;                         // the fused conv + pool kernel
  Forced split_mlp = Forced::Auto;                // split chains with a too-wide first layer
  bool fold_row_ops = true;                       // Softmax/LayerNorm folded into the MLP kernel
  SmallBatchLinearMode small_batch_linear = SmallBatchLinearMode::Auto;
  SmallBatchMlpForms small_batch_mlp = SmallBatchMlpForms::Both;
  Forced host_zero_copy = Forced::Auto;          // host path through mapped pinned staging
  bool shared_tile_tensor_cores_only = false;    // the SharedTiles tensor-core form alone
  Forced warpgroup = Forced::Auto;               // the wgmma MLP form (On: at every batch)
  Forced conv_net_single_launch = Forced::Auto;  // the conv net in one launch
  bool conv_net_whole_tail = true;               // head layers after the first whole per block
  std::string conv_tile;                         // "CxRxC" tile of the fused conv, "" to choose
};

// The overrides that `text` (FUSEDNN_CUDA_OVERRIDES's value; null or empty for none) asks for.
// Throws FDNN_STATUS_INVALID_ARGUMENT naming the variable and the pair it cannot take.
SelectionOverrides parse_selection_overrides(const char* text);

// The variable's name.
inline constexpr const char* kSelectionOverridesVariable = "FUSEDNN_CUDA_OVERRIDES";

}  // namespace fusednn::cuda
