// SPDX-License-Identifier: Apache-2.0

#include "backends/cpu/pool2d.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "cpu_test_support.hpp"

namespace fusednn::cpu::testing {
namespace {

struct PoolCase {
  int64_t channels, in_height, in_width, kernel_height, kernel_width;
  int64_t stride_height, stride_width, padding_height, padding_width;

  // PyTorch's output size with ceil_mode=False.
  Pool2dGeometry geometry(bool count_include_pad) const {
    return {channels,
            in_height,
            in_width,
            (in_height + 2 * padding_height - kernel_height) / stride_height + 1,
            (in_width + 2 * padding_width - kernel_width) / stride_width + 1,
            kernel_height,
            kernel_width,
            stride_height,
            stride_width,
            padding_height,
            padding_width,
            count_include_pad};
  }
};

// PyTorch's definitions, element by element in double. Max: the largest input element of the
// window (padding never wins), NaN if the window holds one. Average: the sum of the window's
// input elements over either the window's area inside the padded input (count_include_pad) or
// the number of input elements in it.
std::vector<double> reference_pool(const std::vector<float>& x, int64_t batch,
                                   const Pool2dGeometry& g, bool average) {
  std::vector<double> y;
  for (int64_t plane = 0; plane < batch * g.channels; ++plane) {
    const float* in = x.data() + plane * g.in_height * g.in_width;
    for (int64_t oh = 0; oh < g.out_height; ++oh) {
      for (int64_t ow = 0; ow < g.out_width; ++ow) {
        const int64_t h0 = oh * g.stride_height - g.padding_height;
        const int64_t w0 = ow * g.stride_width - g.padding_width;
        double max = -std::numeric_limits<double>::infinity(), sum = 0;
        int64_t inside = 0;
        bool nan = false;
        for (int64_t ih = h0; ih < h0 + g.kernel_height; ++ih) {
          for (int64_t iw = w0; iw < w0 + g.kernel_width; ++iw) {
            if (ih < 0 || ih >= g.in_height || iw < 0 || iw >= g.in_width) continue;
            const double v = in[ih * g.in_width + iw];
            nan = nan || std::isnan(v);
            max = std::max(max, v);
            sum += v;
            ++inside;
          }
        }
        if (!average) {
          y.push_back(nan ? std::numeric_limits<double>::quiet_NaN() : max);
        } else if (inside == 0) {
          y.push_back(0.0);
        } else {
          const int64_t area_h =
              std::min(h0 + g.kernel_height, g.in_height + g.padding_height) - h0;
          const int64_t area_w = std::min(w0 + g.kernel_width, g.in_width + g.padding_width) - w0;
          y.push_back(sum / double(g.count_include_pad ? area_h * area_w : inside));
        }
      }
    }
  }
  return y;
}

std::vector<float> run_pool(const std::vector<float>& x, int64_t batch, const Pool2dGeometry& g,
                            bool average) {
  std::vector<float> y =
      poisoned(static_cast<size_t>(batch * g.channels * g.out_height * g.out_width));
  if (average) {
    avg_pool2d_forward(x.data(), y.data(), batch, g);
  } else {
    max_pool2d_forward(x.data(), y.data(), batch, g);
  }
  return y;
}

// x = 0..15 on 4x4 (x[i][j] = 4i + j), 2x2 windows, stride 2: the maxima are the bottom-right
// elements 5, 7, 13, 15; the averages (4i + j) + (4i + j + 1) + (4i + j + 4) + (4i + j + 5) over 4
// = top-left + 2.5: 2.5, 4.5, 10.5, 12.5.
TEST(CpuPool2d, HandComputedTwoByTwo) {
  std::vector<float> x(16);
  for (int i = 0; i < 16; ++i) x[i] = static_cast<float>(i);
  const Pool2dGeometry g = PoolCase{1, 4, 4, 2, 2, 2, 2, 0, 0}.geometry(true);
  EXPECT_TRUE(near_values(run_pool(x, 1, g, false), {5, 7, 13, 15}));
  EXPECT_TRUE(near_values(run_pool(x, 1, g, true), {2.5f, 4.5f, 10.5f, 12.5f}));
}

// Max padding is -infinity, not zero: x = [[-1, -2], [-3, -4]], 3x3 window, stride 1, padding 1.
// Every window holds -1, so the output is all -1 (a zero padding would give all 0).
TEST(CpuPool2d, MaxPaddingNeverWins) {
  const std::vector<float> x = {-1, -2, -3, -4};
  const Pool2dGeometry g = PoolCase{1, 2, 2, 3, 3, 1, 1, 1, 1}.geometry(true);
  EXPECT_TRUE(near_values(run_pool(x, 1, g, false), {-1, -1, -1, -1}));
}

// A NaN in a window makes that window's maximum NaN, as in PyTorch, and leaves the others alone.
// x = [[1, NaN, 3, 4], [5, 6, 7, 8]], 2x2 windows, stride 1: the windows over columns 0..1 and
// 1..2 hold the NaN; the one over columns 2..3 gives max(3, 4, 7, 8) = 8.
// With the NaN moved to column 0 and padding (0, 1), five windows over columns -1..0, 0..1, 1..2,
// 2..3, 3..4: NaN (a clipped edge window), NaN, max(2, 3, 6, 7) = 7, 8, max(4, 8) = 8.
TEST(CpuPool2d, MaxPropagatesNaN) {
  const std::vector<float> x = {1, quiet_nan(), 3, 4, 5, 6, 7, 8};
  const std::vector<float> y =
      run_pool(x, 1, PoolCase{1, 2, 4, 2, 2, 1, 1, 0, 0}.geometry(true), false);
  ASSERT_EQ(y.size(), 3u);
  EXPECT_TRUE(std::isnan(y[0]));
  EXPECT_TRUE(std::isnan(y[1]));
  EXPECT_EQ(y[2], 8.0f);

  const std::vector<float> x_edge = {quiet_nan(), 2, 3, 4, 5, 6, 7, 8};
  const std::vector<float> y_edge =
      run_pool(x_edge, 1, PoolCase{1, 2, 4, 2, 2, 1, 1, 0, 1}.geometry(true), false);
  ASSERT_EQ(y_edge.size(), 5u);
  EXPECT_TRUE(std::isnan(y_edge[0]));
  EXPECT_TRUE(std::isnan(y_edge[1]));
  EXPECT_EQ(y_edge[2], 7.0f);
  EXPECT_EQ(y_edge[3], 8.0f);
  EXPECT_EQ(y_edge[4], 8.0f);
}

// x = 1..9 on 3x3, 2x2 windows, stride 2, padding 1: output 2x2 with windows
//   (0,0): rows -1..0, cols -1..0 -> {1}            area in padded input 4, inside 1
//   (0,1): rows -1..0, cols 1..2  -> {2, 3} = 5      area 4, inside 2
//   (1,0): rows 1..2,  cols -1..0 -> {4, 7} = 11     area 4, inside 2
//   (1,1): rows 1..2,  cols 1..2  -> {5, 6, 8, 9} = 28  area 4, inside 4
// count_include_pad: [1/4, 5/4, 11/4, 28/4] = [0.25, 1.25, 2.75, 7];
// otherwise [1/1, 5/2, 11/2, 28/4] = [1, 2.5, 5.5, 7].
TEST(CpuPool2d, HandComputedAverageWithPadding) {
  const std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  const PoolCase c{1, 3, 3, 2, 2, 2, 2, 1, 1};
  EXPECT_TRUE(near_values(run_pool(x, 1, c.geometry(true), true), {0.25f, 1.25f, 2.75f, 7}));
  EXPECT_TRUE(near_values(run_pool(x, 1, c.geometry(false), true), {1, 2.5f, 5.5f, 7}));
}

const PoolCase kCases[] = {
    // channels, h, w, kh, kw, sh, sw, ph, pw
    {6, 28, 28, 2, 2, 2, 2, 0, 0},  // LeNet-5 pooling
    {3, 11, 13, 3, 3, 2, 2, 1, 1},  // ResNet-style 3x3/2 with padding
    {2, 9, 7, 3, 3, 1, 1, 1, 1},    // stride 1 with padding
    {4, 10, 17, 2, 5, 3, 3, 1, 2},  // stride 3: the runtime-stride path
    {1, 7, 201, 3, 3, 1, 1, 1, 1},  // rows longer than one 64-column chunk
    {5, 6, 150, 2, 4, 2, 2, 0, 1},  // stride 2 over several chunks
    {3, 5, 5, 1, 1, 1, 1, 0, 0},    // 1x1 window: a copy
    {2, 4, 6, 4, 6, 1, 1, 0, 0},    // one window over the whole plane
    {7, 13, 9, 5, 3, 4, 1, 2, 1},   // uneven kernel and strides
};

TEST(CpuPool2d, MatchesNaiveReferenceOnRandomData) {
  Random random;
  for (const PoolCase& c : kCases) {
    for (int64_t batch : {1, 3, 32, 257}) {
      for (int mode = 0; mode < 3; ++mode) {  // max, average with and without padding counted
        const bool average = mode > 0;
        const Pool2dGeometry g = c.geometry(mode == 1);
        const std::vector<float> x = random.uniform_vector(
            static_cast<size_t>(batch * g.channels * g.in_height * g.in_width));
        EXPECT_TRUE(
            near_reference(run_pool(x, batch, g, average), reference_pool(x, batch, g, average)))
            << (average ? "avg" : "max") << " count_include_pad " << g.count_include_pad
            << ", batch " << batch << ", " << g.channels << "x" << g.in_height << "x" << g.in_width
            << ", kernel " << g.kernel_height << "x" << g.kernel_width << ", stride "
            << g.stride_height << "," << g.stride_width << ", padding " << g.padding_height << ","
            << g.padding_width;
      }
    }
  }
}

// Max pooling of values that are all negative and far apart, with padding: a kernel that let the
// padding in as 0, or dropped an element, would be off by a lot (the random test above uses
// [-1, 1], where a padding 0 would also show, but only near the edges).
TEST(CpuPool2d, MaxOfNegativeValuesWithPadding) {
  Random random;
  const PoolCase c{3, 9, 70, 3, 3, 2, 1, 1, 1};
  const Pool2dGeometry g = c.geometry(true);
  const std::vector<float> x =
      random.uniform_vector(static_cast<size_t>(3 * 9 * 70), -100.0f, -1.0f);
  EXPECT_TRUE(near_reference(run_pool(x, 1, g, false), reference_pool(x, 1, g, false)));
}

}  // namespace
}  // namespace fusednn::cpu::testing
