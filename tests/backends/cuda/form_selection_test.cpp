// SPDX-License-Identifier: Apache-2.0
// The CUDA backend's selection table (host code: runs in every configuration, no GPU): on the
// device properties of an H200 (and an H100 PCIe's SM count), a Jetson Orin (sm_87) and a Jetson
// Xavier (sm_72), the form each representative problem gets, and that the reason names the fact
// that decided it.
#include "backends/cuda/selection/form_selection.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace {

using fusednn::Precision;
using namespace fusednn::cuda;  // NOLINT(google-build-using-namespace): the table's many names

DeviceInfo device(int major, int minor, int sm_count, size_t shared_per_block_optin) {
  DeviceInfo info;
  info.major = major;
  info.minor = minor;
  info.sm_count = sm_count;
  info.shared_per_block_optin = shared_per_block_optin;
  info.shared_per_sm = shared_per_block_optin + 1024;
  return info;
}

const DeviceInfo kH200 = device(9, 0, 132, 232448);
const DeviceInfo kH100Pcie = device(9, 0, 114, 232448);
const DeviceInfo kOrin = device(8, 7, 16, 166912);
const DeviceInfo kXavier = device(7, 2, 8, 98304);

const Precision kEveryPrecision[] = {Precision::FP32, Precision::TF32, Precision::FP16,
                                     Precision::BF16};

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

std::string all_rejected(const std::vector<RejectedForm>& rejected) {
  return rejected_text(rejected);
}

// ---- Lone Linear layers ----

TEST(FormSelection, AWideInputLoneLinearGoesToCublasLtInEveryPrecision) {
  for (const auto& [in, out] : std::vector<std::pair<int64_t, int64_t>>{
           {4096, 64}, {512, 64}, {257, 100}, {769, 256}, {129, 200}, {1025, 16}}) {
    for (const Precision precision : kEveryPrecision) {
      const LoneLinearChoice choice = choose_lone_linear_form({in, out, precision}, kH200);
      EXPECT_EQ(choice.form, LoneLinearForm::CublasLt) << in << "->" << out;
      EXPECT_TRUE(contains(choice.reason, std::to_string(in) + "->" + std::to_string(out)))
          << choice.reason;
      EXPECT_TRUE(contains(choice.reason, "its input wider than the 128")) << choice.reason;
      EXPECT_TRUE(contains(all_rejected(choice.rejected), "the fused MLP kernel"))
          << all_rejected(choice.rejected);
    }
  }
}

TEST(FormSelection, ANarrowLoneLinearStaysOnTheFusedKernel) {
  for (const auto& [in, out] :
       std::vector<std::pair<int64_t, int64_t>>{{96, 96}, {64, 64}, {128, 2}, {100, 256}}) {
    for (const DeviceInfo& gpu : {kH200, kOrin, kXavier}) {
      const LoneLinearChoice choice = choose_lone_linear_form({in, out, Precision::FP32}, gpu);
      EXPECT_EQ(choice.form, LoneLinearForm::FusedMlp) << in << "->" << out;
      EXPECT_TRUE(contains(choice.reason, "every column in one block")) << choice.reason;
      EXPECT_TRUE(contains(all_rejected(choice.rejected), "cuBLASLt"));
    }
  }
}

TEST(FormSelection, AWideInputLoneLinearWithASmallWeightStaysOnTheFusedKernel) {
  // At most 16384 weights (1024 x 16 is the boundary; 1025 x 16 goes to cuBLASLt above).
  for (const auto& [in, out] : std::vector<std::pair<int64_t, int64_t>>{
           {520, 10}, {256, 3}, {255, 16}, {1024, 16}, {4096, 1}}) {
    for (const Precision precision : kEveryPrecision) {
      const LoneLinearChoice choice = choose_lone_linear_form({in, out, precision}, kH200);
      EXPECT_EQ(choice.form, LoneLinearForm::FusedMlp) << in << "->" << out;
      EXPECT_TRUE(contains(choice.reason, "a weight of at most 16384 values")) << choice.reason;
    }
  }
  // The product is compared without overflow for widths no model could hold.
  const int64_t huge = int64_t{1} << 40;
  EXPECT_EQ(choose_lone_linear_form({huge, 3, Precision::FP16}, kH200).form,
            LoneLinearForm::CublasLt);
}

TEST(FormSelection, AConvStacksHeadStaysFusedForTheSingleLaunch) {
  LoneLinearProblem head{400, 120, Precision::FP32};
  head.heads_conv_stack = true;
  const LoneLinearChoice fused = choose_lone_linear_form(head, kH200);
  EXPECT_EQ(fused.form, LoneLinearForm::FusedMlp);
  EXPECT_TRUE(contains(fused.reason, "single launch")) << fused.reason;
  // Without the single launch the width rule decides.
  DeviceInfo gpu = kH200;
  gpu.overrides.conv_net_single_launch = Forced::Off;
  EXPECT_EQ(choose_lone_linear_form(head, gpu).form, LoneLinearForm::CublasLt);
  head.heads_conv_stack = false;
  EXPECT_EQ(choose_lone_linear_form(head, kH200).form, LoneLinearForm::CublasLt);
}

TEST(FormSelection, AWideOutputLoneLinearGoesToCublasLt) {
  const LoneLinearChoice choice = choose_lone_linear_form({768, 3072, Precision::BF16}, kH200);
  EXPECT_EQ(choice.form, LoneLinearForm::CublasLt);
  EXPECT_TRUE(contains(choice.reason, "wider than the fused MLP's 256 outputs")) << choice.reason;
  // Even a narrow input: 64 -> 4096.
  EXPECT_EQ(choose_lone_linear_form({64, 4096, Precision::FP32}, kOrin).form,
            LoneLinearForm::CublasLt);
}

TEST(FormSelection, CublasLtOffKeepsEveryPrecisionOnTheFusedKernel) {
  DeviceInfo gpu = kH200;
  gpu.overrides.cublaslt = false;
  for (const Precision precision :
       {Precision::FP32, Precision::TF32, Precision::FP16, Precision::BF16}) {
    for (const auto& [in, out] :
         std::vector<std::pair<int64_t, int64_t>>{{4096, 64}, {768, 3072}}) {
      const LoneLinearChoice choice = choose_lone_linear_form({in, out, precision}, gpu);
      EXPECT_EQ(choice.form, LoneLinearForm::FusedMlp) << in << "->" << out;
      EXPECT_TRUE(contains(choice.reason, "cublaslt=0")) << choice.reason;
      EXPECT_TRUE(contains(all_rejected(choice.rejected), "cublaslt=0"));
    }
  }
  EXPECT_FALSE(cublaslt_allowed(gpu.overrides));
  EXPECT_TRUE(cublaslt_allowed(kH200.overrides));
}

// ---- Chains ----

ChainProblem chain(std::vector<LinearWidths> layers, Precision precision, int64_t max_rows) {
  ChainProblem problem;
  problem.layers = std::move(layers);
  problem.precision = precision;
  problem.max_rows = max_rows;
  return problem;
}

const std::vector<LinearWidths> kSeed = {{100, 128}, {128, 64}, {64, 10}};

TEST(FormSelection, Fp32ChainsTake3xTf32FromOneWarpTilePerSm) {
  const ChainFormRules h200 = choose_chain_forms(chain(kSeed, Precision::FP32, 262144), kH200);
  EXPECT_TRUE(h200.plan_tensor_cores);
  EXPECT_EQ(h200.warp_registers_min_rows, 132 * 16);
  EXPECT_EQ(h200.shared_tiles_min_rows, -1);  // slower than the FMA kernels at every size
  EXPECT_TRUE(contains(h200.tensor_core_reason, "132 SMs")) << h200.tensor_core_reason;
  const ChainFormRules pcie = choose_chain_forms(chain(kSeed, Precision::FP32, 262144), kH100Pcie);
  EXPECT_EQ(pcie.warp_registers_min_rows, 114 * 16);
  EXPECT_TRUE(contains(pcie.tensor_core_reason, "114 SMs")) << pcie.tensor_core_reason;
  // Below those rows nothing is planned, and the reason says both row counts.
  const ChainFormRules small = choose_chain_forms(chain(kSeed, Precision::FP32, 2111), kH200);
  EXPECT_FALSE(small.plan_tensor_cores);
  EXPECT_TRUE(contains(small.tensor_core_reason, "2112 rows")) << small.tensor_core_reason;
  EXPECT_TRUE(contains(small.tensor_core_reason, "2111 rows")) << small.tensor_core_reason;
  const ChainFormRules orin = choose_chain_forms(chain(kSeed, Precision::FP32, 256), kOrin);
  EXPECT_TRUE(orin.plan_tensor_cores);
  EXPECT_EQ(orin.warp_registers_min_rows, 256);
}

TEST(FormSelection, Fp32TensorCoreOverrides) {
  DeviceInfo gpu = kH200;
  gpu.overrides.fp32_tensor_cores = Forced::On;
  const ChainFormRules on = choose_chain_forms(chain(kSeed, Precision::FP32, 1), gpu);
  EXPECT_TRUE(on.plan_tensor_cores);
  EXPECT_EQ(on.warp_registers_min_rows, 0);
  EXPECT_EQ(on.shared_tiles_min_rows, 0);
  gpu.overrides.fp32_tensor_cores = Forced::Off;
  const ChainFormRules off = choose_chain_forms(chain(kSeed, Precision::FP32, 1 << 20), gpu);
  EXPECT_FALSE(off.plan_tensor_cores);
  EXPECT_TRUE(contains(off.tensor_core_reason, "fp32_tensor_cores=0")) << off.tensor_core_reason;
  EXPECT_FALSE(off.plan_split);
}

TEST(FormSelection, ReducedPrecisionChainsTakeTensorCoresFromOneWarpTilePerSm) {
  for (const Precision precision : {Precision::TF32, Precision::FP16, Precision::BF16}) {
    const ChainFormRules h200 = choose_chain_forms(chain(kSeed, precision, 4096), kH200);
    EXPECT_TRUE(h200.plan_tensor_cores);
    EXPECT_EQ(h200.warp_registers_min_rows, 132 * 16);  // fewer rows: the fp32 FMA kernels
    EXPECT_EQ(h200.shared_tiles_min_rows, 132 * 16);
    EXPECT_TRUE(contains(h200.tensor_core_reason, "132 SMs")) << h200.tensor_core_reason;
    const ChainFormRules orin = choose_chain_forms(chain(kSeed, precision, 4096), kOrin);
    EXPECT_EQ(orin.warp_registers_min_rows, 16 * 16);
    // No batch reaches the tensor cores: they are not planned, and the reason says why.
    const ChainFormRules small = choose_chain_forms(chain(kSeed, precision, 2111), kH200);
    EXPECT_FALSE(small.plan_tensor_cores);
    EXPECT_TRUE(contains(small.tensor_core_reason, "2112 rows")) << small.tensor_core_reason;
    EXPECT_TRUE(contains(small.tensor_core_reason, "FMA kernels in fp32"))
        << small.tensor_core_reason;
    // The override runs fp16 and bf16 from the first row, tf32 from the 17th.
    DeviceInfo every = kH200;
    every.overrides.reduced_tensor_cores_every_batch = true;
    const ChainFormRules forced = choose_chain_forms(chain(kSeed, precision, 1), every);
    EXPECT_TRUE(forced.plan_tensor_cores);
    EXPECT_EQ(forced.warp_registers_min_rows, precision == Precision::TF32 ? 17 : 0);
    EXPECT_TRUE(contains(forced.tensor_core_reason, "small_batch_tensor_cores=1"))
        << forced.tensor_core_reason;
  }
  DeviceInfo off = kH200;
  off.overrides.reduced_tensor_cores = false;
  const ChainFormRules none = choose_chain_forms(chain(kSeed, Precision::BF16, 4096), off);
  EXPECT_FALSE(none.plan_tensor_cores);
  EXPECT_TRUE(contains(none.tensor_core_reason, "tensor_cores=0")) << none.tensor_core_reason;
}

TEST(FormSelection, NoTensorCoreFormBelowComputeCapability8) {
  for (const Precision precision : kEveryPrecision) {
    const ChainFormRules rules = choose_chain_forms(chain(kSeed, precision, 1 << 20), kXavier);
    EXPECT_FALSE(rules.plan_tensor_cores) << fusednn::precision_name(precision);
    EXPECT_FALSE(rules.plan_split);
    EXPECT_TRUE(contains(rules.tensor_core_reason, "compute capability 7.2"))
        << rules.tensor_core_reason;
    EXPECT_TRUE(contains(rules.split_reason, "no tensor cores")) << rules.split_reason;
  }
  EXPECT_FALSE(cublaslt_half_operands(Precision::BF16, kXavier));
}

TEST(FormSelection, TheSizesRefusalNamesTheFirstLimit) {
  EXPECT_EQ(tensor_core_size_refusal(kSeed, kH200), "");
  EXPECT_TRUE(contains(tensor_core_size_refusal({{100, 128}, {128, 300}, {300, 10}}, kH200),
                       "layer 2 has 300 outputs"));
  EXPECT_TRUE(
      contains(tensor_core_size_refusal({{2000, 64}, {64, 10}}, kH200), "layer 1 has 2000 inputs"));
  EXPECT_EQ(tensor_core_size_refusal({{1000, 64}, {64, 10}}, kH200), "");
  EXPECT_TRUE(contains(tensor_core_size_refusal(kSeed, kXavier), "compute capability 7.2"));
}

TEST(FormSelection, TheSplitTakesWideFirstLayersFromAWarpTilePerSm) {
  // mlp_08: 509-32(silu)-5(silu)-1, whose first layer is too wide for WarpRegisters.
  const std::vector<LinearWidths> mlp08 = {{509, 32}, {32, 5}, {5, 1}};
  for (const Precision precision : kEveryPrecision) {
    const ChainFormRules rules = choose_chain_forms(chain(mlp08, precision, 65536), kH200);
    EXPECT_TRUE(rules.plan_split) << fusednn::precision_name(precision);
    EXPECT_TRUE(contains(rules.split_reason, "2112 rows")) << rules.split_reason;
    // In fp16 and bf16 it takes over from SharedTiles at those rows; tf32 keeps SharedTiles.
    const bool sixteen = precision == Precision::FP16 || precision == Precision::BF16;
    EXPECT_EQ(rules.split_replaces_shared_tiles, sixteen) << fusednn::precision_name(precision);
    EXPECT_EQ(contains(rules.split_reason, "over SharedTiles"), sixteen) << rules.split_reason;
  }
  const ChainFormRules few = choose_chain_forms(chain(mlp08, Precision::BF16, 2111), kH200);
  EXPECT_FALSE(few.plan_split);
  EXPECT_FALSE(few.split_replaces_shared_tiles);
  EXPECT_TRUE(contains(few.split_reason, "beyond max_batch's 2111 rows")) << few.split_reason;
  const ChainFormRules orin = choose_chain_forms(chain(mlp08, Precision::BF16, 256), kOrin);
  EXPECT_TRUE(orin.plan_split);
  // A lone layer has no rest.
  const ChainFormRules lone = choose_chain_forms(chain({{509, 32}}, Precision::BF16, 65536), kH200);
  EXPECT_FALSE(lone.plan_split);
  EXPECT_TRUE(contains(lone.split_reason, "lone layer")) << lone.split_reason;
}

TEST(FormSelection, SplitOverrides) {
  const std::vector<LinearWidths> head = {{400, 120}, {120, 84}, {84, 10}};
  DeviceInfo gpu = kH200;
  gpu.overrides.split_mlp = Forced::On;
  const ChainFormRules tf32 = choose_chain_forms(chain(head, Precision::TF32, 1), gpu);
  EXPECT_TRUE(tf32.plan_split);
  EXPECT_TRUE(tf32.split_at_every_batch);
  EXPECT_EQ(tf32.split_forced_min_rows, 17);
  EXPECT_EQ(choose_chain_forms(chain(head, Precision::FP32, 1), gpu).split_forced_min_rows, 0);
  gpu.overrides.split_mlp = Forced::Off;
  const ChainFormRules off = choose_chain_forms(chain(head, Precision::BF16, 1 << 20), gpu);
  EXPECT_FALSE(off.plan_split);
  EXPECT_FALSE(off.split_replaces_shared_tiles);
  EXPECT_TRUE(contains(off.split_reason, "split_mlp=0")) << off.split_reason;
}

// ---- Convolutions ----

ConvProblem conv(int64_t in, int64_t out, int64_t kernel, bool fits, Precision precision) {
  ConvProblem problem;
  problem.in_channels = in;
  problem.out_channels = out;
  problem.kernel_height = problem.kernel_width = kernel;
  problem.fits_direct_staging = fits;
  problem.precision = precision;
  return problem;
}

TEST(FormSelection, ReducedPrecisionConvolutionsThatFillTilesPreferTheImplicitGemm) {
  const ConvFormRules vgg = choose_conv_form(conv(64, 64, 3, true, Precision::BF16), kH200);
  EXPECT_TRUE(vgg.prefer_implicit_gemm);
  EXPECT_TRUE(vgg.implicit_gemm_allowed);
  EXPECT_TRUE(contains(vgg.reason, "at least 32 output channels")) << vgg.reason;
  // LeNet-5's second convolution: 16 output channels stay on the fused kernel.
  const ConvFormRules lenet = choose_conv_form(conv(6, 16, 5, true, Precision::FP16), kOrin);
  EXPECT_FALSE(lenet.prefer_implicit_gemm);
  EXPECT_TRUE(lenet.implicit_gemm_allowed);
  // A dot product of 3 x 3 x 3 = 27 is too short.
  EXPECT_FALSE(choose_conv_form(conv(3, 64, 3, true, Precision::BF16), kH200).prefer_implicit_gemm);
}

TEST(FormSelection, Fp32ConvolutionsTakeTheImplicitGemmOnlyPastTheDirectKernelsStaging) {
  const ConvFormRules fits = choose_conv_form(conv(64, 64, 3, true, Precision::FP32), kH200);
  EXPECT_FALSE(fits.implicit_gemm_allowed);
  EXPECT_FALSE(fits.prefer_implicit_gemm);
  const ConvFormRules large = choose_conv_form(conv(512, 512, 3, false, Precision::FP32), kH200);
  EXPECT_TRUE(large.implicit_gemm_allowed);
  EXPECT_TRUE(contains(large.reason, "shared-memory staging")) << large.reason;
}

TEST(FormSelection, ConvolutionOverrides) {
  DeviceInfo gpu = kH200;
  gpu.overrides.implicit_gemm = Forced::Off;
  const ConvFormRules off = choose_conv_form(conv(64, 64, 3, false, Precision::BF16), gpu);
  EXPECT_FALSE(off.implicit_gemm_allowed);
  EXPECT_FALSE(off.prefer_implicit_gemm);
  gpu.overrides.implicit_gemm = Forced::On;
  EXPECT_TRUE(choose_conv_form(conv(3, 6, 5, true, Precision::FP32), gpu).implicit_gemm_allowed);
  gpu.overrides.implicit_gemm = Forced::Auto;
  gpu.overrides.reduced_tensor_cores = false;
  const ConvFormRules no_tensor_cores =
      choose_conv_form(conv(64, 64, 3, true, Precision::BF16), gpu);
  EXPECT_FALSE(no_tensor_cores.implicit_gemm_allowed);
  EXPECT_FALSE(no_tensor_cores.prefer_implicit_gemm);
  gpu.overrides.fused_conv = false;
  EXPECT_FALSE(choose_conv_form(conv(6, 16, 5, true, Precision::FP32), gpu).fused_conv_allowed);
}

// ---- cuBLASLt's operands ----

TEST(FormSelection, CublasLtReads16BitOperandsIn16BitModelsFromComputeCapability8) {
  EXPECT_TRUE(cublaslt_half_operands(Precision::BF16, kH200));
  EXPECT_TRUE(cublaslt_half_operands(Precision::FP16, kOrin));
  EXPECT_FALSE(cublaslt_half_operands(Precision::TF32, kH200));
  EXPECT_FALSE(cublaslt_half_operands(Precision::FP32, kH200));
  DeviceInfo gpu = kH200;
  gpu.overrides.cublaslt_half_operands = false;
  EXPECT_FALSE(cublaslt_half_operands(Precision::BF16, gpu));
}

}  // namespace
