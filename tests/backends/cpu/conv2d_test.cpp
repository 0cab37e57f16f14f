// SPDX-License-Identifier: Apache-2.0

#include "backends/cpu/conv2d.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <vector>

#include "cpu_test_support.hpp"

namespace fusednn::cpu::testing {
namespace {

using K = ElementwiseKind;

// PyTorch's output size for one dimension.
int64_t output_size(int64_t in, int64_t kernel, int64_t stride, int64_t padding, int64_t dilation) {
  return (in + 2 * padding - dilation * (kernel - 1) - 1) / stride + 1;
}

struct ConvCase {
  int64_t in_channels, in_height, in_width, out_channels;
  int64_t kernel_height, kernel_width, stride_height, stride_width;
  int64_t padding_height, padding_width, dilation_height, dilation_width, groups;

  Conv2dGeometry geometry() const {
    return {in_channels,
            in_height,
            in_width,
            out_channels,
            output_size(in_height, kernel_height, stride_height, padding_height, dilation_height),
            output_size(in_width, kernel_width, stride_width, padding_width, dilation_width),
            kernel_height,
            kernel_width,
            stride_height,
            stride_width,
            padding_height,
            padding_width,
            dilation_height,
            dilation_width,
            groups};
  }
};

// The definition, one output element at a time, in double: out[n][oc][oh][ow] = bias[oc] +
// sum over the group's input channels c and taps (kh, kw) of w[oc][c][kh][kw] *
// x[n][group * C/g + c][oh * sh - ph + kh * dh][ow * sw - pw + kw * dw], taps outside the input
// being zero.
Expected reference_conv(const std::vector<float>& x, const std::vector<float>& w, const float* bias,
                        int64_t batch, const Conv2dGeometry& g, const Epilogue& epilogue) {
  const int64_t cin_g = g.in_channels / g.groups, cout_g = g.out_channels / g.groups;
  Expected y;
  for (int64_t n = 0; n < batch; ++n) {
    for (int64_t oc = 0; oc < g.out_channels; ++oc) {
      const int64_t group = oc / cout_g;
      for (int64_t oh = 0; oh < g.out_height; ++oh) {
        for (int64_t ow = 0; ow < g.out_width; ++ow) {
          double sum = bias ? bias[oc] : 0.0;
          for (int64_t c = 0; c < cin_g; ++c) {
            for (int64_t kh = 0; kh < g.kernel_height; ++kh) {
              for (int64_t kw = 0; kw < g.kernel_width; ++kw) {
                const int64_t ih = oh * g.stride_height - g.padding_height + kh * g.dilation_height;
                const int64_t iw = ow * g.stride_width - g.padding_width + kw * g.dilation_width;
                if (ih < 0 || ih >= g.in_height || iw < 0 || iw >= g.in_width) continue;
                const int64_t ic = group * cin_g + c;
                sum += double(w[((oc * cin_g + c) * g.kernel_height + kh) * g.kernel_width + kw]) *
                       double(x[((n * g.in_channels + ic) * g.in_height + ih) * g.in_width + iw]);
              }
            }
          }
          y.add(sum, epilogue);
        }
      }
    }
  }
  return y;
}

// Runs the kernel with a NaN-poisoned output and a NaN-poisoned scratch of the size
// conv2d_scratch_floats asks for, followed by guard values that must survive (AddressSanitizer
// builds catch reads past it too).
std::vector<float> run_conv(const std::vector<float>& x, const std::vector<float>& w,
                            const float* bias, int64_t batch, const Conv2dGeometry& g,
                            const Epilogue& epilogue) {
  std::vector<float> y =
      poisoned(static_cast<size_t>(batch * g.out_channels * g.out_height * g.out_width));
  const size_t scratch_floats = conv2d_scratch_floats(g);
  constexpr size_t kGuard = 64;
  constexpr float kGuardValue = -12345.0f;
  std::vector<float> scratch = poisoned(scratch_floats + kGuard);
  std::fill(scratch.begin() + static_cast<std::ptrdiff_t>(scratch_floats), scratch.end(),
            kGuardValue);
  conv2d_forward(x.data(), w.data(), bias, y.data(), batch, g, epilogue, scratch.data());
  for (size_t i = scratch_floats; i < scratch.size(); ++i) {
    EXPECT_EQ(scratch[i], kGuardValue) << "scratch overrun at " << i - scratch_floats
                                       << " past its " << scratch_floats << " floats";
  }
  return y;
}

class CpuConv2d : public GemmIsaTest {};

// x = [[1, 2, 3], [4, 5, 6], [7, 8, 9]], w = [[1, 2], [3, 4]], stride 1, no padding, bias -40:
//   (0,0): 1*1 + 2*2 + 4*3 + 5*4 = 37 -> -3     (0,1): 2 + 6 + 15 + 24 = 47 -> 7
//   (1,0): 4 + 10 + 21 + 32 = 67 -> 27          (1,1): 5 + 12 + 24 + 36 = 77 -> 37
// ReLU: [0, 7, 27, 37].
TEST_P(CpuConv2d, HandComputedValidConvolution) {
  const ConvCase c{1, 3, 3, 1, 2, 2, 1, 1, 0, 0, 1, 1, 1};
  const std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  const std::vector<float> w = {1, 2, 3, 4};
  const float bias = -40;
  EXPECT_TRUE(near_values(run_conv(x, w, &bias, 1, c.geometry(), {{K::ReLU}}), {0, 7, 27, 37}));
}

// Same x, 3x3 kernel of ones, padding 1, stride 2: output 2x2, each the sum of the window's
// inside part (the padding adds zero):
//   (0,0): rows -1..1, cols -1..1 -> 1 + 2 + 4 + 5 = 12     (0,1): cols 1..3 -> 2 + 3 + 5 + 6 = 16
//   (1,0): rows 1..3, cols -1..1 -> 4 + 5 + 7 + 8 = 24      (1,1): 5 + 6 + 8 + 9 = 28
TEST_P(CpuConv2d, HandComputedPaddingAndStride) {
  const ConvCase c{1, 3, 3, 1, 3, 3, 2, 2, 1, 1, 1, 1, 1};
  const std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  const std::vector<float> w(9, 1.0f);
  EXPECT_TRUE(near_values(run_conv(x, w, nullptr, 1, c.geometry(), {}), {12, 16, 24, 28}));
}

// x[i][j] = 5i + j on 5x5, 2x2 kernel of ones with dilation 2: the taps are (0,0), (0,2), (2,0),
// (2,2), so out[i][j] = (5i + j) + (5i + j + 2) + (5i + j + 10) + (5i + j + 12) = 4(5i + j) + 24
// on a 3x3 output: [24, 28, 32, 44, 48, 52, 64, 68, 72].
TEST_P(CpuConv2d, HandComputedDilation) {
  const ConvCase c{1, 5, 5, 1, 2, 2, 1, 1, 0, 0, 2, 2, 1};
  std::vector<float> x(25);
  for (int i = 0; i < 25; ++i) x[i] = static_cast<float>(i);
  const std::vector<float> w(4, 1.0f);
  EXPECT_TRUE(near_values(run_conv(x, w, nullptr, 1, c.geometry(), {}),
                          {24, 28, 32, 44, 48, 52, 64, 68, 72}));
}

// Two groups of one channel, 1x1 kernel: out channel 0 = 2 * in channel 0 + 0, out channel 1 =
// -1 * in channel 1 + 10. x ch0 = [1, 2, 3, 4], ch1 = [5, 6, 7, 8] ->
// [2, 4, 6, 8, 5, 4, 3, 2]. Any mixing across groups would change these.
TEST_P(CpuConv2d, HandComputedGroups) {
  const ConvCase c{2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 1, 1, 2};
  const std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8};
  const std::vector<float> w = {2, -1};
  const std::vector<float> bias = {0, 10};
  EXPECT_TRUE(
      near_values(run_conv(x, w, bias.data(), 1, c.geometry(), {}), {2, 4, 6, 8, 5, 4, 3, 2}));
}

// 1x1, stride 1, no padding on a 4x4 plane (16 pixels, a whole panel): the multiply reads the
// input itself, with no copy. Two input channels, x ch0 = 0..15, ch1 = all 1; out = 3 * ch0 - ch1,
// then LeakyReLU(0.5): pixel p -> 3p - 1, which is -1 -> -0.5 at p = 0.
TEST_P(CpuConv2d, HandComputedPointwiseOnWholePanels) {
  const ConvCase c{2, 4, 4, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1};
  std::vector<float> x(32, 1.0f);
  for (int p = 0; p < 16; ++p) x[p] = static_cast<float>(p);
  const std::vector<float> w = {3, -1};
  std::vector<float> want(16);
  for (int p = 0; p < 16; ++p) want[p] = static_cast<float>(3 * p - 1);
  want[0] = -0.5f;
  EXPECT_TRUE(near_values(run_conv(x, w, nullptr, 1, c.geometry(), {{K::LeakyReLU, 0.5f}}), want));
}

const ConvCase kCases[] = {
    // in_c, h, w, out_c, kh, kw, sh, sw, ph, pw, dh, dw, groups
    {1, 28, 28, 6, 5, 5, 1, 1, 2, 2, 1, 1, 1},   // LeNet-5 conv1
    {6, 14, 14, 16, 5, 5, 1, 1, 0, 0, 1, 1, 1},  // LeNet-5 conv2
    {3, 11, 13, 7, 3, 3, 2, 2, 1, 1, 1, 1, 1},   // stride 2, padding 1
    {4, 9, 10, 6, 3, 2, 1, 1, 2, 1, 2, 3, 2},    // groups 2, dilation (2, 3), uneven padding
    {5, 7, 9, 5, 3, 3, 1, 1, 1, 1, 1, 1, 5},     // depthwise
    {6, 5, 7, 9, 1, 1, 1, 1, 0, 0, 1, 1, 3},     // 1x1 in groups, 35 pixels (im2col path)
    {7, 4, 8, 19, 1, 1, 1, 1, 0, 0, 1, 1, 1},    // 1x1 on 32 pixels (input read directly)
    {30, 6, 7, 13, 3, 3, 1, 1, 1, 1, 1, 1, 1},   // depth 270: two depth blocks
    {1, 15, 17, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1},   // 255 pixels: two column blocks
    {2, 9, 20, 4, 1, 4, 1, 3, 0, 2, 1, 1, 1},    // stride (1, 3), kernel 1x4, padding (0, 2)
    {3, 8, 8, 6, 3, 3, 3, 2, 2, 2, 2, 1, 3},     // strides, dilation and groups at once
    {2, 5, 6, 3, 5, 6, 1, 1, 0, 0, 1, 1, 1},     // kernel covers the whole input: 1x1 output
    {2, 6, 4, 3, 3, 3, 1, 1, 0, 0, 1, 1, 1},     // stride 1 on a narrow plane: im2col path
    {2, 10, 18, 5, 2, 3, 1, 1, 0, 0, 1, 1, 1},   // 160 computed pixels: input read directly
};

TEST_P(CpuConv2d, MatchesNaiveReferenceOnRandomData) {
  Random random;
  const std::vector<Epilogue> epilogues = test_epilogues();
  int check = 0;
  for (const ConvCase& c : kCases) {
    const Conv2dGeometry g = c.geometry();
    for (int64_t batch : {1, 3, 32, 257}) {
      const Epilogue& epilogue = epilogues[check % epilogues.size()];
      const bool with_bias = check % 3 != 1;
      ++check;
      const std::vector<float> x = random.uniform_vector(
          static_cast<size_t>(batch * g.in_channels * g.in_height * g.in_width));
      const std::vector<float> w = random.uniform_vector(static_cast<size_t>(
          g.out_channels * (g.in_channels / g.groups) * g.kernel_height * g.kernel_width));
      const std::vector<float> bias = random.uniform_vector(static_cast<size_t>(g.out_channels));
      const float* b = with_bias ? bias.data() : nullptr;
      EXPECT_TRUE(near_expected(run_conv(x, w, b, batch, g, epilogue),
                                reference_conv(x, w, b, batch, g, epilogue)))
          << "batch " << batch << ", in " << g.in_channels << "x" << g.in_height << "x"
          << g.in_width << " -> out " << g.out_channels << "x" << g.out_height << "x" << g.out_width
          << ", kernel " << g.kernel_height << "x" << g.kernel_width << ", stride "
          << g.stride_height << "," << g.stride_width << ", padding " << g.padding_height << ","
          << g.padding_width << ", dilation " << g.dilation_height << "," << g.dilation_width
          << ", groups " << g.groups << ", bias " << with_bias << ", epilogue "
          << describe(epilogue);
    }
  }
}

// Each slice of the batch run on its own (pointers offset into the full buffers, one scratch
// reused) gives the whole batch's answer, bit for bit, and writes nothing past its slice.
TEST_P(CpuConv2d, SlicesOfTheBatchMatchTheWholeBatch) {
  Random random;
  const ConvCase c{4, 9, 10, 6, 3, 2, 1, 1, 2, 1, 2, 3, 2};
  const Conv2dGeometry g = c.geometry();
  const int64_t batch = 32;
  const int64_t in_sample = g.in_channels * g.in_height * g.in_width;
  const int64_t out_sample = g.out_channels * g.out_height * g.out_width;
  const Epilogue epilogue = {{K::SiLU}};
  const std::vector<float> x = random.uniform_vector(static_cast<size_t>(batch * in_sample));
  const std::vector<float> w = random.uniform_vector(
      static_cast<size_t>(g.out_channels * 2 * g.kernel_height * g.kernel_width));
  const std::vector<float> bias = random.uniform_vector(static_cast<size_t>(g.out_channels));

  std::vector<float> y = poisoned(static_cast<size_t>(batch * out_sample));
  std::vector<float> scratch = poisoned(conv2d_scratch_floats(g));
  const int64_t cuts[] = {0, 1, 4, 17, 32};
  for (size_t s = 0; s + 1 < std::size(cuts); ++s) {
    const int64_t first = cuts[s], count = cuts[s + 1] - cuts[s];
    conv2d_forward(x.data() + first * in_sample, w.data(), bias.data(),
                   y.data() + first * out_sample, count, g, epilogue, scratch.data());
    for (int64_t i = cuts[s + 1] * out_sample; i < batch * out_sample; ++i) {
      ASSERT_TRUE(std::isnan(y[i]))
          << "slice [" << first << ", " << cuts[s + 1] << ") wrote element " << i;
    }
  }
  EXPECT_TRUE(near_expected(y, reference_conv(x, w, bias.data(), batch, g, epilogue)));

  // Each sample is computed the same way whatever the slice: bit for bit the whole batch's output.
  EXPECT_EQ(std::memcmp(y.data(), run_conv(x, w, bias.data(), batch, g, epilogue).data(),
                        y.size() * sizeof(float)),
            0);
}

INSTANTIATE_TEST_SUITE_P(Isa, CpuConv2d, ::testing::ValuesIn(kEveryGemmIsa), isa_test_name);

}  // namespace
}  // namespace fusednn::cpu::testing
