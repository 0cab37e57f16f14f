// SPDX-License-Identifier: Apache-2.0
// FUSEDNN_CUDA_OVERRIDES's parser (host code: runs in every configuration): every key and value it
// documents is taken, a later pair replaces an earlier one, and anything else is refused with
// INVALID_ARGUMENT naming the variable and the pair.
#include "backends/cuda/platform/selection_overrides.hpp"

#include <gtest/gtest.h>

#include <string>

#include "common/error.hpp"

namespace {

using fusednn::StatusError;
using fusednn::cuda::Forced;
using fusednn::cuda::parse_selection_overrides;
using fusednn::cuda::SelectionOverrides;
using fusednn::cuda::SmallBatchLinearMode;
using fusednn::cuda::SmallBatchMlpForms;

TEST(SelectionOverrides, NoneLeavesEveryChoiceToTheSelection) {
  for (const char* text : {static_cast<const char*>(nullptr), "", " , ,"}) {
    const SelectionOverrides o = parse_selection_overrides(text);
    EXPECT_EQ(o.fp32_tensor_cores, Forced::Auto);
    EXPECT_TRUE(o.reduced_tensor_cores);
    EXPECT_FALSE(o.reduced_tensor_cores_every_batch);
    EXPECT_EQ(o.implicit_gemm, Forced::Auto);
    EXPECT_TRUE(o.cublaslt);
    EXPECT_TRUE(o.cublaslt_half_operands);
    EXPECT_TRUE(o.fused_conv);
    EXPECT_EQ(o.split_mlp, Forced::Auto);
    EXPECT_TRUE(o.fold_row_ops);
    EXPECT_EQ(o.small_batch_linear, SmallBatchLinearMode::Auto);
    EXPECT_EQ(o.small_batch_mlp, SmallBatchMlpForms::Both);
    EXPECT_EQ(o.host_zero_copy, Forced::Auto);
    EXPECT_FALSE(o.shared_tile_tensor_cores_only);
    EXPECT_EQ(o.warpgroup, Forced::Auto);
    EXPECT_EQ(o.conv_net_single_launch, Forced::Auto);
    EXPECT_TRUE(o.conv_net_whole_tail);
    EXPECT_EQ(o.conv_tile, "");
  }
}

TEST(SelectionOverrides, EveryKeyIsTaken) {
  const SelectionOverrides o = parse_selection_overrides(
      "fp32_tensor_cores=1, tensor_cores=0,implicit_gemm=0,cublaslt=0,cublaslt_half_operands=0,"
      "fused_conv=0,split_mlp=1,fold_row_ops=0,small_batch_linear=unicast,small_batch_mlp=block,"
      "host_zero_copy=0,tensor_core_form=shared,wgmma=1,single_launch=0,conv_net_whole_tail=0,"
      "conv_tile=8x2x2,small_batch_tensor_cores=1");
  EXPECT_EQ(o.fp32_tensor_cores, Forced::On);
  EXPECT_FALSE(o.reduced_tensor_cores);
  EXPECT_TRUE(o.reduced_tensor_cores_every_batch);
  EXPECT_EQ(o.implicit_gemm, Forced::Off);
  EXPECT_FALSE(o.cublaslt);
  EXPECT_FALSE(o.cublaslt_half_operands);
  EXPECT_FALSE(o.fused_conv);
  EXPECT_EQ(o.split_mlp, Forced::On);
  EXPECT_FALSE(o.fold_row_ops);
  EXPECT_EQ(o.small_batch_linear, SmallBatchLinearMode::Unicast);
  EXPECT_EQ(o.small_batch_mlp, SmallBatchMlpForms::BlockOnly);
  EXPECT_EQ(o.host_zero_copy, Forced::Off);
  EXPECT_TRUE(o.shared_tile_tensor_cores_only);
  EXPECT_EQ(o.warpgroup, Forced::On);
  EXPECT_EQ(o.conv_net_single_launch, Forced::Off);
  EXPECT_FALSE(o.conv_net_whole_tail);
  EXPECT_EQ(o.conv_tile, "8x2x2");
}

TEST(SelectionOverrides, ALaterPairReplacesAnEarlierOne) {
  const SelectionOverrides o = parse_selection_overrides(
      "wgmma=0,small_batch_linear=0,conv_tile=4x2x2,wgmma=auto,small_batch_linear=1,conv_tile="
      "auto");
  EXPECT_EQ(o.warpgroup, Forced::Auto);
  EXPECT_EQ(o.small_batch_linear, SmallBatchLinearMode::Always);
  EXPECT_EQ(o.conv_tile, "");
}

TEST(SelectionOverrides, AnythingElseIsRefusedByName) {
  const struct {
    const char* text;
    const char* named;
  } cases[] = {
      {"wgmma", "'wgmma'"},
      {"no_such_key=1", "'no_such_key=1'"},
      {"fused_conv=yes", "'fused_conv=yes'"},
      {"fused_conv=", "'fused_conv='"},
      {"split_mlp=2", "'split_mlp=2'"},
      {"small_batch_mlp=both", "'small_batch_mlp=both'"},
      {"tensor_core_form=registers", "'tensor_core_form=registers'"},
      {"small_batch_tensor_cores=0", "'small_batch_tensor_cores=0'"},
      {"conv_tile=8x2", "'conv_tile=8x2'"},
      {"conv_tile=8x2x2x2", "'conv_tile=8x2x2x2'"},
      {"conv_tile=x2x2", "'conv_tile=x2x2'"},
      {"conv_tile=123x2x2", "'conv_tile=123x2x2'"},
      {"cublaslt=1,=1", "'=1'"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.text);
    try {
      parse_selection_overrides(c.text);
      ADD_FAILURE() << "accepted";
    } catch (const StatusError& e) {
      EXPECT_EQ(e.status(), FDNN_STATUS_INVALID_ARGUMENT);
      const std::string message = e.what();
      EXPECT_NE(message.find("FUSEDNN_CUDA_OVERRIDES"), std::string::npos) << message;
      EXPECT_NE(message.find(c.named), std::string::npos) << message;
    }
  }
}

TEST(SelectionOverrides, AnOverlongValueIsRefused) {
  const std::string text(5000, ',');
  try {
    parse_selection_overrides(text.c_str());
    ADD_FAILURE() << "accepted";
  } catch (const StatusError& e) {
    EXPECT_EQ(e.status(), FDNN_STATUS_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("longer than"), std::string::npos) << e.what();
  }
}

}  // namespace
