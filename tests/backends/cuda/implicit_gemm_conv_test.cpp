// SPDX-License-Identifier: Apache-2.0
// Convolutions as implicit GEMMs on tensor cores (conv2d_implicit_gemm.hpp) against the CPU
// backend, by the method of cuda_test_support.hpp: fresh random weights and inputs, NaN-poisoned
// outputs, every path, batch sizes that leave partial pixel tiles. The geometries are picked to
// cross the kernel's edges: channel counts off its 64-channel tile, K off its 16- and 32-element
// stages, windows reaching into the padding, groups, dilation, strides, 1x1 and depthwise.
//
// The overrides implicit_gemm=1 and fused_conv=0 send every Conv2d to the implicit
// GEMM; the default routing (which convolutions go there unasked) is checked by the last tests
// and, from inside the library, by conv_gemm_internal_test.cpp. Without a GPU every test skips.
#include <gtest/gtest.h>

#include <iterator>
#include <string>
#include <vector>

#include "cuda_test_support.hpp"

namespace {

using namespace fusednn_cuda_test;

struct PrecisionBound {
  fdnn_precision precision;
  const char* name;
  double bound;  // the accuracy contract's relative error (fusednn.h)
};

const PrecisionBound kPrecisions[] = {
    {FDNN_PRECISION_FP32, "fp32 (3xTF32)", 1e-5},
    {FDNN_PRECISION_TF32, "tf32", 1e-3},
    {FDNN_PRECISION_FP16, "fp16", 1e-2},
    {FDNN_PRECISION_BF16, "bf16", 1e-2},
};

struct Geometry {
  const char* what;
  std::vector<int64_t> input;  // channels, height, width
  int64_t out_channels;
  std::vector<int64_t> kernel, stride, padding, dilation;
  int64_t groups;
  bool bias;
  const char* activation;  // JSON, or empty for none
};

const Geometry kGeometries[] = {
    {"3 -> 70, 3x3, padding 1, 13 x 11",
     {3, 13, 11},
     70,
     {3, 3},
     {1, 1},
     {1, 1},
     {1, 1},
     1,
     true,
     R"({"type": "ReLU"})"},
    {"64 -> 64, 3x3, stride 2, 20 x 20 (K = 576)",
     {64, 20, 20},
     64,
     {3, 3},
     {2, 2},
     {1, 1},
     {1, 1},
     1,
     true,
     R"({"type": "GELU", "approximate": "tanh"})"},
    {"4 -> 6, groups 2, dilation 2",
     {4, 12, 12},
     6,
     {3, 3},
     {1, 1},
     {2, 2},
     {2, 2},
     2,
     false,
     R"({"type": "Tanh"})"},
    {"2 -> 5, 3x5, stride (2, 1), padding (1, 2)",
     {2, 9, 11},
     5,
     {3, 5},
     {2, 1},
     {1, 2},
     {1, 1},
     1,
     true,
     ""},
    {"1x1, 40 -> 130 (three channel tiles)",
     {40, 7, 5},
     130,
     {1, 1},
     {1, 1},
     {0, 0},
     {1, 1},
     1,
     true,
     R"({"type": "SiLU"})"},
    {"depthwise 8 -> 8, groups 8, 5x5, padding 2",
     {8, 10, 9},
     8,
     {5, 5},
     {1, 1},
     {2, 2},
     {1, 1},
     8,
     true,
     R"({"type": "Sigmoid"})"},
    {"17 -> 33, 7x7, stride 3, no padding, 31 x 29",
     {17, 31, 29},
     33,
     {7, 7},
     {3, 3},
     {0, 0},
     {1, 1},
     1,
     true,
     R"({"type": "LeakyReLU", "negative_slope": 0.1})"},
    // fp32's 1e-5 over a long K (3xTF32 sums each k-step apart: chained through the tensor
    // core's truncating sums, host emulation put K = 2304 at 2.2e-5).
    {"256 -> 24, 3x3, K = 2304", {256, 6, 7}, 24, {3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, true, ""},
    // Grid y and z together: two groups of 70 channels, each two channel tiles, one partial.
    {"8 -> 140, groups 2 (70 channels a group)",
     {8, 9, 9},
     140,
     {3, 3},
     {1, 1},
     {1, 1},
     {1, 1},
     2,
     true,
     R"({"type": "ReLU"})"},
    // 1x1 over 1 x 1 images with K a multiple of 4: the dense-rows form (x's rows copied whole),
    // K off the 32-element stage.
    {"1x1 on 1 x 1, 100 -> 70 (dense rows)",
     {100, 1, 1},
     70,
     {1, 1},
     {1, 1},
     {0, 0},
     {1, 1},
     1,
     true,
     R"({"type": "Tanh"})"},
};

Net conv_only(const Geometry& g) {
  Net net(g.input);
  net.conv("conv", g.input[0], g.out_channels, g.kernel, g.stride, g.padding, g.dilation, g.groups,
           g.bias);
  if (g.activation[0] != '\0') net.act(g.activation);
  return net;
}

// A Tanh output in tf32 or bf16 is held to twice the contract's bound: Tanh squeezes the largest
// outputs to about 1 while the products' rounding error passes at slope 1 near zero, so exact
// rounding of both operands (what the tensor cores, and PyTorch in that precision, do) lands at
// 0.7-1.5e-3 of the largest output in tf32 and fp16 and 0.6-1.3e-2 in bf16 for this geometry's
// weights (host emulation in float64, 5 batches; every geometry here lands near there with a
// Tanh), and the kernel lands in the same range; fp16 stays inside its 1e-2. docs/precision.md
// states it. A wrong index costs O(1), so twice the bound
// still catches one.
double bound_for(const PrecisionBound& p, const Geometry& g) {
  const bool tanh_output = std::string(g.activation).find("Tanh") != std::string::npos;
  const bool squeezed_precision =
      p.precision == FDNN_PRECISION_TF32 || p.precision == FDNN_PRECISION_BF16;
  return squeezed_precision && tanh_output ? 2 * p.bound : p.bound;
}

TEST(ImplicitGemmConv, EveryGeometryInEveryPrecision) {
  REQUIRE_CUDA();
  ScopedOverride unfused("fused_conv", "0");
  ScopedOverride gemm("implicit_gemm", "1");
  uint32_t seed = 1300;
  for (const PrecisionBound& p : kPrecisions) {
    SCOPED_TRACE(p.name);
    for (const Geometry& g : kGeometries) {
      expect_matches_cpu(conv_only(g), few_batches(), seed++, g.what, {}, p.precision,
                         bound_for(p, g));
    }
  }
}

// The batch sizes that fill many pixel tiles, and a conv inside a network (a pool and a Linear
// after it read what it wrote).
TEST(ImplicitGemmConv, ManySamplesAndInsideANetwork) {
  REQUIRE_CUDA();
  ScopedOverride unfused("fused_conv", "0");
  ScopedOverride gemm("implicit_gemm", "1");
  Net net({3, 16, 16});
  net.conv("conv1", 3, 32, {3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, true).act(R"({"type": "ReLU"})");
  net.layer(R"({"type": "MaxPool2d", "name": "pool", "kernel_size": 2, "stride": 2})");
  net.conv("conv2", 32, 48, {3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, false);
  net.batch_norm("bn", "BatchNorm2d", 48).act(R"({"type": "ReLU"})");
  net.layer(R"({"type": "Flatten"})").linear("fc", 48 * 8 * 8, 10);
  uint32_t seed = 1400;
  for (const PrecisionBound& p : kPrecisions) {
    SCOPED_TRACE(p.name);
    expect_matches_cpu(net, with_large(few_batches(), 1000, 200), seed++, "conv-pool-conv-fc", {},
                       p.precision, p.bound);
  }
}

#if FUSEDNN_TEST_WITH_CUDART
// The dense-rows geometry with the caller's buffers 8 and 4 bytes off 16 too (graphs re-pointed
// between them): x off 16 bytes takes the table's gather instead of the 16-byte row copies.
TEST(ImplicitGemmConv, DenseRowsAndTheirGatherOnBuffersOffSixteenBytes) {
  REQUIRE_CUDA();
  ScopedOverride unfused("fused_conv", "0");
  ScopedOverride gemm("implicit_gemm", "1");
  const Geometry& dense = kGeometries[std::size(kGeometries) - 1];
  uint32_t seed = 1450;
  for (const PrecisionBound& p : kPrecisions) {
    SCOPED_TRACE(p.name);
    expect_rotating_buffers_match(conv_only(dense), seed++, dense.what, true, 133, p.precision,
                                  bound_for(p, dense));
  }
}
#endif

// Hooks that check the model reports running in `expected`.
GpuHooks reports(fdnn_precision expected) {
  GpuHooks hooks;
  hooks.before_runs = [expected](fdnn_model* model) {
    fdnn_precision runs_in = FDNN_PRECISION_FP32;
    ASSERT_EQ(fdnn_model_precision(model, &runs_in), FDNN_STATUS_OK);
    EXPECT_EQ(runs_in, expected);
  };
  return hooks;
}

// Unasked: in fp32 the convolution too large for the direct kernel's shared memory (and for the
// fused conv + pool) runs as an implicit GEMM; in a reduced precision every unfused one does, and
// the model reports that precision; a wide one the fused kernel could hold goes too.
TEST(ImplicitGemmConv, DefaultRouting) {
  REQUIRE_CUDA();
  Net large({16, 60, 60});  // 16 x 62 x 62 padded floats per sample: 246 KB
  large.conv("conv", 16, 32, {3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, true).act(R"({"type": "ReLU"})");
  large.layer(R"({"type": "MaxPool2d", "name": "pool", "kernel_size": 2, "stride": 2})");
  uint32_t seed = 1500;
  for (const PrecisionBound& p : kPrecisions) {
    SCOPED_TRACE(p.name);
    expect_matches_cpu(large, {1, 5}, seed++, "16 -> 32 on 60 x 60", reports(p.precision),
                       p.precision, p.bound);
  }
  // One the fused conv + pool kernel holds: fp32 keeps it there, the reduced precisions take it
  // to the implicit GEMM and pool after it.
  Net wide({64, 14, 14});
  wide.conv("conv", 64, 64, {3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, true).act(R"({"type": "ReLU"})");
  wide.layer(R"({"type": "MaxPool2d", "name": "pool", "kernel_size": 2, "stride": 2})");
  for (const PrecisionBound& p : kPrecisions) {
    SCOPED_TRACE(p.name);
    // Only the implicit GEMM runs a reduced precision here.
    expect_matches_cpu(wide, few_batches(), seed++, "64 -> 64 on 14 x 14 + max pool",
                       reports(p.precision), p.precision, p.bound);
  }
}

}  // namespace
