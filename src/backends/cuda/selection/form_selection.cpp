// SPDX-License-Identifier: Apache-2.0
#include "backends/cuda/selection/form_selection.hpp"

#include <string>

namespace fusednn::cuda {
namespace {

std::string widths_text(int64_t in, int64_t out) {
  return std::to_string(in) + "->" + std::to_string(out);
}

bool reduced(Precision precision) { return precision != Precision::FP32; }

// The rows tf32 keeps in exact fp32 where tensor cores are forced to small batches: the
// single-block form's (its products there would pass tf32's bound on some chains); 0 otherwise.
int64_t fp32_rows_kept(Precision precision) {
  return precision == Precision::TF32 ? kSelectionBlockMaxRows + 1 : 0;
}

bool sixteen_bit(Precision precision) {
  return precision == Precision::FP16 || precision == Precision::BF16;
}

}  // namespace

std::string rejected_text(const std::vector<RejectedForm>& rejected) {
  std::string text;
  for (const RejectedForm& form : rejected) text += "; not " + form.form + ": " + form.why;
  return text;
}

bool cublaslt_allowed(const SelectionOverrides& overrides) { return overrides.cublaslt; }

LoneLinearChoice choose_lone_linear_form(const LoneLinearProblem& problem,
                                         const DeviceInfo& device) {
  LoneLinearChoice choice;
  const std::string layer = "a lone Linear layer " + widths_text(problem.in, problem.out);
  const bool lt = cublaslt_allowed(device.overrides);
  if (problem.out > kSelectionFusedMlpMaxWidth) {
    if (lt) {
      choice.form = LoneLinearForm::CublasLt;
      choice.reason = layer + ", wider than the fused MLP's " +
                      std::to_string(kSelectionFusedMlpMaxWidth) + " outputs: cuBLASLt";
      choice.rejected.push_back({"the fused MLP kernel", "its columns would split over blocks"});
      return choice;
    }
    choice.reason = "a lone Linear layer wider than " + std::to_string(kSelectionFusedMlpMaxWidth) +
                    " with cuBLASLt off (override cublaslt=0): the fused MLP kernel, "
                    "columns split over blocks";
    choice.rejected.push_back({"cuBLASLt", "override cublaslt=0"});
    return choice;
  }
  const bool single_launch_head = problem.heads_conv_stack && device.overrides.fused_conv &&
                                  device.overrides.conv_net_single_launch != Forced::Off;
  if (problem.in > kLoneLinearFusedMaxInputs && single_launch_head) {
    choice.reason = layer +
                    ", the head of a conv stack: the fused MLP kernel, which the conv "
                    "net's single launch takes with the convolutions";
    if (lt) {
      choice.rejected.push_back({"cuBLASLt", "the single launch cannot take it"});
    }
    return choice;
  }
  // in x out compared by division: the widths come from a model file.
  const bool small_weight =
      problem.out > 0 && problem.in <= kLoneLinearFusedMaxWeights / problem.out;
  if (problem.in > kLoneLinearFusedMaxInputs && !small_weight) {
    if (lt) {
      choice.form = LoneLinearForm::CublasLt;
      choice.reason = layer + ", its input wider than the " +
                      std::to_string(kLoneLinearFusedMaxInputs) +
                      " a lone layer keeps on the fused MLP kernel and its weight over " +
                      std::to_string(kLoneLinearFusedMaxWeights) +
                      " values: cuBLASLt (a GEMM with its epilogue)";
      choice.rejected.push_back({"the fused MLP kernel",
                                 "one layer has no activations to keep on chip, and a reduction "
                                 "of " +
                                     std::to_string(problem.in) +
                                     " is a GEMM cuBLASLt tiles better"});
      return choice;
    }
    choice.reason = layer + " (" + std::to_string(problem.in) + " inputs) with cuBLASLt off " +
                    "(override cublaslt=0): the fused MLP kernel, every column in one block";
    choice.rejected.push_back({"cuBLASLt", "override cublaslt=0"});
    return choice;
  }
  choice.reason =
      layer + " (at most " + std::to_string(kSelectionFusedMlpMaxWidth) + " outputs, and " +
      (problem.in > kLoneLinearFusedMaxInputs
           ? "a weight of at most " + std::to_string(kLoneLinearFusedMaxWeights) + " values"
           : "at most " + std::to_string(kLoneLinearFusedMaxInputs) + " inputs") +
      "): the fused MLP kernel, every column in one block";
  if (lt) choice.rejected.push_back({"cuBLASLt", "one fused launch with no GEMM set-up"});
  return choice;
}

std::string tensor_core_size_refusal(const std::vector<LinearWidths>& layers,
                                     const DeviceInfo& device) {
  if (device.major < kTensorCoreMinMajor) {
    return "compute capability " + std::to_string(device.major) + "." +
           std::to_string(device.minor) + " (the forms need " +
           std::to_string(kTensorCoreMinMajor) + ".0 or newer)";
  }
  for (size_t i = 0; i < layers.size(); ++i) {
    if (layers[i].out > kTensorCoreMaxHiddenWidth) {
      return "layer " + std::to_string(i + 1) + " has " + std::to_string(layers[i].out) +
             " outputs (the forms take up to " + std::to_string(kTensorCoreMaxHiddenWidth) + ")";
    }
    const int64_t most_in = i == 0 ? kTensorCoreMaxFirstInput : kTensorCoreMaxHiddenWidth;
    if (layers[i].in > most_in) {
      return "layer " + std::to_string(i + 1) + " has " + std::to_string(layers[i].in) +
             " inputs (the forms take up to " + std::to_string(most_in) + ")";
    }
  }
  return "";
}

int64_t split_min_rows(const DeviceInfo& device) {
  return int64_t{device.sm_count} * kSelectionWarpTileRows;
}

ChainFormRules choose_chain_forms(const ChainProblem& problem, const DeviceInfo& device) {
  ChainFormRules rules;
  const SelectionOverrides& overrides = device.overrides;
  const Precision precision = problem.precision;
  const int64_t tile_per_sm = split_min_rows(device);
  if (precision == Precision::FP32) {
    // 3xTF32 products (a few times the FMA kernels' error, well inside fp32's contract) pay off
    // from one WarpRegisters warp tile per SM; SharedTiles is slower than the FMA kernels at
    // every size, so it runs only when the override asks for every batch.
    const Forced forced = overrides.fp32_tensor_cores;
    if (forced == Forced::Off) {
      rules.tensor_core_reason = "override fp32_tensor_cores=0";
    } else if (forced == Forced::On) {
      rules.plan_tensor_cores = true;
      rules.warp_registers_min_rows = rules.shared_tiles_min_rows = 0;
      rules.tensor_core_reason = "override fp32_tensor_cores=1: 3xTF32 at every batch";
    } else if (problem.max_rows < tile_per_sm) {
      rules.tensor_core_reason = "fp32 chains take 3xTF32 from one 16-row tile per SM (" +
                                 std::to_string(tile_per_sm) + " rows), beyond max_batch's " +
                                 std::to_string(problem.max_rows) + " rows";
    } else {
      rules.plan_tensor_cores = true;
      rules.warp_registers_min_rows = tile_per_sm;
      rules.tensor_core_reason =
          "3xTF32 pays off from one 16-row tile per SM: " + std::to_string(device.sm_count) +
          " SMs";
    }
  } else if (!overrides.reduced_tensor_cores) {
    rules.tensor_core_reason = "override tensor_cores=0";
  } else {
    // Like fp32's 3xTF32, tf32/fp16/bf16 chains take tensor cores from one 16-row warp tile per
    // SM: below that a run is bound by its launch and its one pass over the weights, which the
    // FMA kernels make in exact fp32 (more accurate than the precision asked for) in a fraction
    // of the tensor-core forms' time, whose weight staging and 16-row tiles then dominate.
    if (overrides.reduced_tensor_cores_every_batch) {
      rules.plan_tensor_cores = true;
      const int64_t from = fp32_rows_kept(precision);
      rules.warp_registers_min_rows = rules.shared_tiles_min_rows = from;
      rules.tensor_core_reason =
          "override small_batch_tensor_cores=1: from " +
          (from == 0 ? std::string("the first row") : "row " + std::to_string(from));
    } else if (problem.max_rows < tile_per_sm) {
      rules.tensor_core_reason = std::string(precision_name(precision)) +
                                 " chains take tensor cores from one 16-row tile per SM (" +
                                 std::to_string(tile_per_sm) + " rows), beyond max_batch's " +
                                 std::to_string(problem.max_rows) +
                                 " rows: the FMA kernels in fp32";
    } else {
      rules.plan_tensor_cores = true;
      rules.warp_registers_min_rows = rules.shared_tiles_min_rows = tile_per_sm;
      rules.tensor_core_reason = "one 16-row tile per SM: " + std::to_string(device.sm_count) +
                                 " SMs; fewer rows run in fp32 on the FMA kernels";
    }
  }
  // The sizes' refusal names the limit when the planner refuses the chain; below compute
  // capability 8.0 no form exists, so nothing is planned.
  rules.size_refusal = tensor_core_size_refusal(problem.layers, device);
  if (device.major < kTensorCoreMinMajor && rules.plan_tensor_cores) {
    rules.plan_tensor_cores = false;
    rules.warp_registers_min_rows = rules.shared_tiles_min_rows = -1;
    rules.tensor_core_reason = rules.size_refusal;
  }

  // The split form: chains whose first layer is too wide for WarpRegisters, from the rows that
  // give every SM a warp tile of the rest (override split_mlp=1: every batch, =0: never). In
  // fp16 and bf16 it also takes over from SharedTiles at those rows: SharedTiles reads a wide
  // first layer's weights through shared memory for every tile, where the split runs that
  // layer as a GEMM.
  const bool tensor_cores_on = precision == Precision::FP32
                                   ? overrides.fp32_tensor_cores != Forced::Off
                                   : overrides.reduced_tensor_cores;
  rules.split_at_every_batch = overrides.split_mlp == Forced::On;
  rules.split_forced_min_rows = fp32_rows_kept(precision);
  const bool split_allowed =
      overrides.split_mlp != Forced::Off && tensor_cores_on && device.major >= kTensorCoreMinMajor;
  const bool split_reachable = rules.split_at_every_batch || problem.max_rows >= tile_per_sm;
  rules.plan_split = problem.layers.size() >= 2 && split_allowed && split_reachable;
  rules.split_replaces_shared_tiles =
      rules.plan_split && sixteen_bit(precision) && overrides.split_mlp != Forced::Off;
  if (problem.layers.size() < 2) {
    rules.split_reason = "a lone layer has no rest to run as WarpRegisters";
  } else if (!split_allowed) {
    rules.split_reason = overrides.split_mlp == Forced::Off ? "override split_mlp=0"
                         : !tensor_cores_on                 ? "tensor cores are off"
                                                            : "no tensor cores on this device";
  } else if (!split_reachable) {
    rules.split_reason = "it pays from " + std::to_string(tile_per_sm) +
                         " rows (a warp tile per SM), beyond max_batch's " +
                         std::to_string(problem.max_rows) + " rows";
  } else {
    rules.split_reason =
        rules.split_at_every_batch
            ? "override split_mlp=1: at every batch"
            : "from " + std::to_string(tile_per_sm) + " rows (a warp tile per SM)" +
                  (rules.split_replaces_shared_tiles
                       ? std::string(", over SharedTiles in ") + precision_name(precision)
                       : std::string());
  }
  rules.fold_row_tail = overrides.fold_row_ops;
  return rules;
}

ConvFormRules choose_conv_form(const ConvProblem& problem, const DeviceInfo& device) {
  ConvFormRules rules;
  const SelectionOverrides& overrides = device.overrides;
  rules.fused_conv_allowed = overrides.fused_conv;
  const bool tensor_cores = overrides.reduced_tensor_cores;
  if (overrides.implicit_gemm == Forced::Off) {
    rules.reason = "override implicit_gemm=0";
    return rules;
  }
  if (overrides.implicit_gemm == Forced::On) {
    rules.implicit_gemm_allowed = true;
    rules.reason = "override implicit_gemm=1";
  } else if (reduced(problem.precision)) {
    rules.implicit_gemm_allowed = tensor_cores;
    rules.reason = tensor_cores ? "reduced precision: an implicit GEMM on tensor cores"
                                : "override tensor_cores=0";
  } else {
    rules.implicit_gemm_allowed = !problem.fits_direct_staging;
    rules.reason = problem.fits_direct_staging
                       ? "the direct kernel stages it in shared memory"
                       : "too large for the direct kernel's shared-memory staging: an implicit "
                         "GEMM in 3xTF32 on tensor cores";
  }
  // Over the fused conv kernel where the product fills tensor-core tiles (LeNet-5's 6 and 16
  // channels stay fused).
  if (reduced(problem.precision) && tensor_cores && problem.groups > 0) {
    const int64_t group_out = problem.out_channels / problem.groups;
    const int64_t dot =
        problem.in_channels / problem.groups * problem.kernel_height * problem.kernel_width;
    rules.prefer_implicit_gemm =
        group_out >= kConvGemmMinGroupOutChannels && dot >= kConvGemmMinDotLength;
    if (rules.prefer_implicit_gemm) {
      rules.reason = "reduced precision, at least " + std::to_string(kConvGemmMinGroupOutChannels) +
                     " output channels a group and dot products of at least " +
                     std::to_string(kConvGemmMinDotLength) + ": an implicit GEMM on tensor cores";
    }
  }
  return rules;
}

bool cublaslt_half_operands(Precision precision, const DeviceInfo& device) {
  if (device.major < kTensorCoreMinMajor || !device.overrides.reduced_tensor_cores) return false;
  if (!device.overrides.cublaslt_half_operands) return false;
  return sixteen_bit(precision);
}

}  // namespace fusednn::cuda
