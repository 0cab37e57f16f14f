// SPDX-License-Identifier: Apache-2.0
// The implicit-GEMM convolution seen from inside the library (linked like
// fused_mlp_internal_test.cpp): its image, read back on the host the way the kernel reads it,
// must reproduce the CPU backend's convolution, and the backend must route the convolutions
// conv2d_implicit_gemm.hpp names to it. Whether the kernel's results are right is
// implicit_gemm_conv_test.cpp's to check.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "backends/cpu/conv2d.hpp"
#include "backends/cuda/conv/conv2d_implicit_gemm.hpp"
#include "backends/cuda/exec/cuda_executor.hpp"
#include "common/half_float.hpp"
#include "cuda_test_support.hpp"
#include "fusednn/fusednn.h"
#include "internal_test_support.hpp"

namespace {

using namespace fusednn_cuda_test;
using fusednn::cuda::Conv2dArgs;
using fusednn::cuda::ConvGemmPlan;
using fusednn::cuda::TensorCoreMath;

Conv2dArgs geometry(int in, int height, int width, int out, int kernel_h, int kernel_w, int stride,
                    int padding, int dilation, int groups) {
  Conv2dArgs g;
  g.in_channels = in;
  g.in_height = height;
  g.in_width = width;
  g.out_channels = out;
  g.kernel_height = kernel_h;
  g.kernel_width = kernel_w;
  g.stride_height = g.stride_width = stride;
  g.padding_height = g.padding_width = padding;
  g.dilation_height = g.dilation_width = dilation;
  g.groups = groups;
  g.out_height = (height + 2 * padding - dilation * (kernel_h - 1) - 1) / stride + 1;
  g.out_width = (width + 2 * padding - dilation * (kernel_w - 1) - 1) / stride + 1;
  return g;
}

// W[oc][k] as the image stores it, widened back to fp32.
float image_weight(const ConvGemmPlan& plan, const uint32_t* rows, int oc, int k) {
  const uint32_t word =
      rows[static_cast<size_t>(oc) * plan.row_words +
           (plan.math == TensorCoreMath::Fp16 || plan.math == TensorCoreMath::Bf16 ? k / 2 : k)];
  if (plan.math != TensorCoreMath::Fp16 && plan.math != TensorCoreMath::Bf16) {
    return fusednn::float_from_bits(word);
  }
  const auto half = static_cast<uint16_t>(k % 2 == 0 ? word & 0xffffu : word >> 16);
  return plan.math == TensorCoreMath::Fp16 ? fusednn::half_to_float(half)
                                           : fusednn::bfloat16_to_float(half);
}

// The convolution computed from the image alone, as the kernel gathers it: table entry k gives
// the element's offset from the window's origin and its step inside the window; steps that leave
// the input read zero. Every k of the padded stages is visited, as the kernel does: the padding's
// steps must leave the input.
std::vector<float> convolve_from_image(const ConvGemmPlan& plan, const std::vector<uint32_t>& image,
                                       const Conv2dArgs& g, const std::vector<float>& x,
                                       int batch) {
  const uint32_t* rows = image.data() + 2 * static_cast<size_t>(plan.padded_k);
  const int group_in = g.in_channels / g.groups, group_out = g.out_channels / g.groups;
  const int64_t in_plane = int64_t{g.in_height} * g.in_width;
  std::vector<float> y(static_cast<size_t>(batch) * g.out_channels * g.out_height * g.out_width);
  size_t index = 0;
  for (int n = 0; n < batch; ++n) {
    for (int oc = 0; oc < g.out_channels; ++oc) {
      const int group = oc / group_out;
      const float* group_x = x.data() + (int64_t{n} * g.in_channels + group * group_in) * in_plane;
      for (int oh = 0; oh < g.out_height; ++oh) {
        for (int ow = 0; ow < g.out_width; ++ow) {
          const int top = oh * g.stride_height - g.padding_height;
          const int left = ow * g.stride_width - g.padding_width;
          double sum = 0.0;
          for (int k = 0; k < plan.padded_k; ++k) {
            const auto offset = static_cast<int32_t>(image[2 * k]);
            const int ih = top + static_cast<int>(image[2 * k + 1] >> 16);
            const int iw = left + static_cast<int>(image[2 * k + 1] & 0xffffu);
            if (ih < 0 || ih >= g.in_height || iw < 0 || iw >= g.in_width) continue;
            sum += double{group_x[int64_t{top} * g.in_width + left + offset]} *
                   image_weight(plan, rows, oc, k);
          }
          y[index++] = static_cast<float>(sum);
        }
      }
    }
  }
  return y;
}

fusednn::cpu::Conv2dGeometry cpu_geometry(const Conv2dArgs& g) {
  return {g.in_channels,    g.in_height,     g.in_width,        g.out_channels,   g.out_height,
          g.out_width,      g.kernel_height, g.kernel_width,    g.stride_height,  g.stride_width,
          g.padding_height, g.padding_width, g.dilation_height, g.dilation_width, g.groups};
}

// Host code only: runs without a GPU.
TEST(ConvGemmInternal, ImageReproducesTheCpuConvolution) {
  fusednn::cuda::DeviceInfo device;
  device.major = 9;
  const Conv2dArgs geometries[] = {
      geometry(3, 13, 11, 70, 3, 3, 1, 1, 1, 1),  // K = 27
      geometry(4, 12, 12, 6, 3, 3, 1, 2, 2, 2),   // groups, dilation
      geometry(8, 10, 9, 8, 5, 5, 2, 2, 1, 8),    // depthwise, stride 2
      geometry(40, 7, 5, 33, 1, 1, 1, 0, 1, 1),   // 1x1, K = 40
      geometry(17, 15, 14, 5, 3, 5, 1, 0, 1, 1),  // K = 255
  };
  std::mt19937 random(31);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int batch = 2;
  for (const TensorCoreMath math :
       {TensorCoreMath::Tf32x3, TensorCoreMath::Tf32, TensorCoreMath::Fp16, TensorCoreMath::Bf16}) {
    for (const Conv2dArgs& g : geometries) {
      const std::string what = std::string(fusednn::cuda::tensor_core_math_name(math)) + ", " +
                               std::to_string(g.in_channels) + " -> " +
                               std::to_string(g.out_channels) + ", groups " +
                               std::to_string(g.groups);
      SCOPED_TRACE(what);
      ConvGemmPlan plan;
      ASSERT_TRUE(fusednn::cuda::plan_conv_gemm(g, math, device, &plan));
      const int taps = g.kernel_height * g.kernel_width;
      EXPECT_EQ(plan.k, g.in_channels / g.groups * taps);
      const bool half = math == TensorCoreMath::Fp16 || math == TensorCoreMath::Bf16;
      const int per_stage = half ? 32 : 16;
      EXPECT_EQ(plan.padded_k % per_stage, 0);
      EXPECT_LT(plan.padded_k - plan.k, per_stage);
      std::vector<float> weight(static_cast<size_t>(g.out_channels) * plan.k);
      for (float& v : weight) v = normal(random);
      std::vector<float> x(static_cast<size_t>(batch) * g.in_channels * g.in_height * g.in_width);
      for (float& v : x) v = normal(random);
      const std::vector<uint32_t> image =
          fusednn::cuda::build_conv_gemm_image(plan, g, weight.data());
      ASSERT_EQ(image.size(), 2 * static_cast<size_t>(plan.padded_k) +
                                  static_cast<size_t>(plan.row_words) * g.out_channels);
      // Past k the table's row step must leave every input the plan admits (heights and
      // paddings under 16384), and the weights must be zero, not NaN: the kernel copies zeros for
      // those patches and multiplies them.
      for (int k = plan.k; k < plan.padded_k; ++k) {
        ASSERT_GE(static_cast<int>(image[2 * k + 1] >> 16), 2 * 16384 - 1) << "k " << k;
      }
      const uint32_t* rows = image.data() + 2 * static_cast<size_t>(plan.padded_k);
      for (int oc = 0; oc < g.out_channels; ++oc) {
        for (int k = plan.k; k < plan.padded_k; ++k) {
          ASSERT_EQ(image_weight(plan, rows, oc, k), 0.0f) << "oc " << oc << ", k " << k;
        }
      }
      // The reference gets W rounded as the image stores it (tf32: to nearest, ties away).
      std::vector<float> rounded = weight;
      if (math == TensorCoreMath::Tf32) {
        for (float& v : rounded) {
          v = fusednn::float_from_bits((fusednn::bits_of_float(v) + 0x1000u) & 0xffffe000u);
        }
      }
      if (half) {
        for (float& v : rounded) {
          v = math == TensorCoreMath::Fp16
                  ? fusednn::half_to_float(fusednn::float_to_half(v))
                  : fusednn::bfloat16_to_float(fusednn::float_to_bfloat16(v));
        }
      }
      const fusednn::cpu::Conv2dGeometry cpu = cpu_geometry(g);
      std::vector<float> scratch(fusednn::cpu::conv2d_scratch_floats(cpu));
      std::vector<float> expected(static_cast<size_t>(batch) * g.out_channels * g.out_height *
                                  g.out_width);
      fusednn::cpu::conv2d_forward(x.data(), rounded.data(), nullptr, expected.data(), batch, cpu,
                                   {}, scratch.data());
      EXPECT_LE(relative_error(convolve_from_image(plan, image, g, x, batch), expected), 1e-6);
    }
  }
}

// The limits the table's 16-bit steps and 32-bit offsets need: refused, the convolution stays on
// the direct kernel.
TEST(ConvGemmInternal, PlanRefusesWhatTheTableCannotHold) {
  fusednn::cuda::DeviceInfo device;
  device.major = 9;
  ConvGemmPlan plan;
  EXPECT_TRUE(fusednn::cuda::plan_conv_gemm(geometry(4, 16383, 8, 8, 3, 3, 1, 1, 1, 1),
                                            TensorCoreMath::Bf16, device, &plan));
  EXPECT_FALSE(fusednn::cuda::plan_conv_gemm(geometry(4, 16384, 8, 8, 3, 3, 1, 1, 1, 1),
                                             TensorCoreMath::Bf16, device, &plan));
  EXPECT_FALSE(fusednn::cuda::plan_conv_gemm(geometry(4000, 1000, 1000, 8, 3, 3, 1, 1, 1, 1),
                                             TensorCoreMath::Bf16, device, &plan))
      << "4000 x 1000 x 1000 floats: offsets past 32 bits";
  device.major = 7;
  EXPECT_FALSE(fusednn::cuda::plan_conv_gemm(geometry(4, 12, 12, 8, 3, 3, 1, 1, 1, 1),
                                             TensorCoreMath::Fp16, device, &plan))
      << "no tf32 / bf16 mma.sync before compute capability 8.0";
}

// Dense rows (x's rows copied whole) only for a 1 x 1 convolution over 1 x 1 images, one group,
// no padding, K a multiple of 4: the layout of a Linear layer's [rows][in]. Host code only.
TEST(ConvGemmInternal, DenseRowsOnlyForLinearLayouts) {
  fusednn::cuda::DeviceInfo device;
  device.major = 9;
  struct Case {
    Conv2dArgs geometry;
    bool dense;
    const char* what;
  };
  const Case cases[] = {
      {geometry(400, 1, 1, 120, 1, 1, 1, 0, 1, 1), true, "400 -> 120 on 1 x 1"},
      {geometry(4, 1, 1, 3, 1, 1, 1, 0, 1, 1), true, "4 -> 3 on 1 x 1"},
      {geometry(402, 1, 1, 120, 1, 1, 1, 0, 1, 1), false, "K = 402, off 4"},
      {geometry(400, 2, 2, 120, 1, 1, 1, 0, 1, 1), false, "2 x 2 images"},
      {geometry(400, 1, 1, 120, 1, 1, 1, 0, 1, 2), false, "two groups"},
      {geometry(400, 1, 1, 120, 3, 3, 1, 1, 1, 1), false, "3 x 3 with padding"},
  };
  for (const Case& c : cases) {
    for (TensorCoreMath math : {TensorCoreMath::Tf32x3, TensorCoreMath::Bf16}) {
      ConvGemmPlan plan;
      ASSERT_TRUE(fusednn::cuda::plan_conv_gemm(c.geometry, math, device, &plan)) << c.what;
      EXPECT_EQ(plan.dense_rows, c.dense) << c.what;
    }
  }
}

// The model's convolution ops: fused conv + pool, or Conv2d and whether it runs as an implicit
// GEMM (and in which math, with its image on the device).
struct ConvRoute {
  bool fused;
  bool gemm;
  TensorCoreMath math;
  bool has_image;
};

std::vector<ConvRoute> conv_routes(const Net& net, fdnn_precision precision) {
  fdnn_model* model = create_model(net.spec(), FDNN_DEVICE_CUDA, 4, 1, precision);
  std::vector<ConvRoute> routes;
  if (model == nullptr) return routes;
  std::mt19937 random(5);
  set_weights(model, net, draw_weights(net, random));
  const fusednn::cuda::CudaBackend* backend = backend_of(model);
  if (backend != nullptr) {
    for (const fusednn::cuda::Op& op : backend->ops()) {
      if (const auto* conv = op.as<fusednn::cuda::Conv2dOp>()) {
        const fusednn::cuda::ConvGemmPlan& gemm = conv->conv_gemm;
        routes.push_back({false, gemm.usable, gemm.math, gemm.image != nullptr});
      } else if (op.as<fusednn::cuda::ConvPoolOp>() != nullptr) {
        routes.push_back({true, false, fusednn::cuda::ConvGemmPlan().math, false});
      }
    }
  }
  fdnn_model_destroy(model);
  return routes;
}

// Skips below compute capability 8.0, where no convolution runs as an implicit GEMM.
#define REQUIRE_TENSOR_CORES()                                                                     \
  do {                                                                                             \
    int major_ = 0;                                                                                \
    ASSERT_EQ(cudaDeviceGetAttribute(&major_, cudaDevAttrComputeCapabilityMajor, 0), cudaSuccess); \
    if (major_ < 8) GTEST_SKIP() << "compute capability " << major_ << " below 8.0";               \
  } while (0)

TEST(ConvGemmInternal, WhichConvolutionsRunAsImplicitGemms) {
  REQUIRE_CUDA();
  REQUIRE_TENSOR_CORES();
  ScopedOverride unfused("fused_conv", "0");
  Net small({3, 12, 12});  // a sample and a filter fit the direct kernel's 48 KB
  small.conv("conv", 3, 8, {3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, true);
  Net large({16, 60, 60});  // 246 KB padded: they do not
  large.conv("conv", 16, 32, {3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, true);

  std::vector<ConvRoute> routes = conv_routes(small, FDNN_PRECISION_FP32);
  ASSERT_EQ(routes.size(), 1u);
  EXPECT_FALSE(routes[0].gemm) << "fp32, staged";
  routes = conv_routes(large, FDNN_PRECISION_FP32);
  ASSERT_EQ(routes.size(), 1u);
  EXPECT_TRUE(routes[0].gemm) << "fp32, too large to stage";
  EXPECT_TRUE(routes[0].has_image);
  EXPECT_EQ(routes[0].math, TensorCoreMath::Tf32x3);
  const std::pair<fdnn_precision, TensorCoreMath> reduced[] = {
      {FDNN_PRECISION_TF32, TensorCoreMath::Tf32},
      {FDNN_PRECISION_FP16, TensorCoreMath::Fp16},
      {FDNN_PRECISION_BF16, TensorCoreMath::Bf16}};
  for (const auto& [precision, math] : reduced) {
    routes = conv_routes(small, precision);
    ASSERT_EQ(routes.size(), 1u);
    EXPECT_TRUE(routes[0].gemm) << "precision " << precision;
    EXPECT_TRUE(routes[0].has_image);
    EXPECT_EQ(routes[0].math, math);
  }
  {
    ScopedOverride off("implicit_gemm", "0");
    routes = conv_routes(large, FDNN_PRECISION_BF16);
    ASSERT_EQ(routes.size(), 1u);
    EXPECT_FALSE(routes[0].gemm) << "override implicit_gemm=0";
  }
}

// With the fused conv + pool kernel on (the default), reduced precisions still take the
// convolutions that fill tensor-core tiles (32 channels a group, K of 64) to the implicit GEMM;
// fp32 keeps them on the fused kernel, and LeNet-class convolutions stay fused in every precision.
TEST(ConvGemmInternal, ReducedPrecisionsTakeWideConvolutionsFromTheFusedKernel) {
  REQUIRE_CUDA();
  REQUIRE_TENSOR_CORES();
  Net wide({64, 14, 14});
  wide.conv("conv", 64, 64, {3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, true).act(R"({"type": "ReLU"})");
  wide.layer(R"({"type": "MaxPool2d", "name": "pool", "kernel_size": 2, "stride": 2})");
  Net narrow({6, 14, 14});  // LeNet-5's second convolution: 16 channels, K = 150
  narrow.conv("conv", 6, 16, {5, 5}, {1, 1}, {0, 0}, {1, 1}, 1, true).act(R"({"type": "Tanh"})");
  narrow.layer(R"({"type": "AvgPool2d", "name": "pool", "kernel_size": 2, "stride": 2})");

  std::vector<ConvRoute> routes = conv_routes(wide, FDNN_PRECISION_FP32);
  ASSERT_EQ(routes.size(), 1u);
  EXPECT_TRUE(routes[0].fused) << "fp32, 64 -> 64";
  for (const fdnn_precision precision :
       {FDNN_PRECISION_TF32, FDNN_PRECISION_FP16, FDNN_PRECISION_BF16}) {
    routes = conv_routes(wide, precision);
    ASSERT_EQ(routes.size(), 1u);
    EXPECT_TRUE(routes[0].gemm) << "precision " << precision << ", 64 -> 64";
    EXPECT_TRUE(routes[0].has_image);
    routes = conv_routes(narrow, precision);
    ASSERT_EQ(routes.size(), 1u);
    EXPECT_TRUE(routes[0].fused) << "precision " << precision << ", 6 -> 16";
  }
}

}  // namespace
