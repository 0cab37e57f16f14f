// SPDX-License-Identifier: Apache-2.0
// The implicit-GEMM convolution's plan and weight image, on the host (conv2d_implicit_gemm.hpp).
#include <limits>

#include "backends/cuda/conv/conv2d_implicit_gemm.hpp"
#include "common/half_float.hpp"

namespace fusednn::cuda {
namespace {

bool is_half_math(TensorCoreMath math) {
  return math == TensorCoreMath::Fp16 || math == TensorCoreMath::Bf16;
}

// Rounded to tf32 (10 fraction bits) to nearest, ties away from zero, as cvt.rna does; infinity
// and NaN kept.
uint32_t tf32_bits_of(float value) {
  const uint32_t bits = bits_of_float(value);
  if ((bits & 0x7f800000u) == 0x7f800000u) return bits;
  return (bits + 0x1000u) & 0xffffe000u;
}

}  // namespace

bool plan_conv_gemm(const Conv2dArgs& g, TensorCoreMath math, const DeviceInfo& device,
                    ConvGemmPlan* plan) {
  if (device.major < 8 || g.groups <= 0 || g.in_channels % g.groups != 0 ||
      g.out_channels % g.groups != 0) {
    return false;
  }
  constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
  const int64_t group_in = g.in_channels / g.groups;
  const int64_t k = group_in * g.kernel_height * g.kernel_width;
  const int64_t per_stage = is_half_math(math) ? 2 * kConvGemmStageWords : kConvGemmStageWords;
  const int64_t padded_k = (k + per_stage - 1) / per_stage * per_stage;
  const int64_t row_words = is_half_math(math) ? padded_k / 2 : padded_k;
  const int64_t window_rows = int64_t{g.kernel_height - 1} * g.dilation_height;
  const int64_t window_columns = int64_t{g.kernel_width - 1} * g.dilation_width;
  const int64_t group_input = group_in * g.in_height * g.in_width;
  const int64_t out_plane = int64_t{g.out_height} * g.out_width;
  // Table entries are 32-bit offsets and 16-bit steps; the grid's y and z are at most 65535.
  const int64_t column_tiles = (g.out_channels / g.groups + 63) / 64;
  if (k <= 0 || window_rows >= 32768 || window_columns >= 32768 ||
      group_input + int64_t{g.in_width} * window_rows > kInt32Max || out_plane > kInt32Max ||
      row_words * g.out_channels > kInt32Max || 2 * padded_k > kInt32Max || column_tiles > 65535 ||
      g.groups > 65535 || g.in_height >= 16384 || g.padding_height >= 16384) {
    return false;
  }
  plan->usable = true;
  plan->math = math;
  plan->k = static_cast<int32_t>(k);
  plan->padded_k = static_cast<int32_t>(padded_k);
  plan->row_words = static_cast<int32_t>(row_words);
  plan->dense_rows = g.groups == 1 && g.in_height == 1 && g.in_width == 1 && g.kernel_height == 1 &&
                     g.kernel_width == 1 && g.padding_height == 0 && g.padding_width == 0 &&
                     g.out_height == 1 && g.out_width == 1 && k % 4 == 0;
  plan->image = nullptr;
  return true;
}

std::vector<uint32_t> build_conv_gemm_image(const ConvGemmPlan& plan, const Conv2dArgs& g,
                                            const float* weight) {
  const int taps = g.kernel_height * g.kernel_width;
  const int64_t in_plane = int64_t{g.in_height} * g.in_width;
  std::vector<uint32_t> image(
      2 * static_cast<size_t>(plan.padded_k) + static_cast<size_t>(plan.row_words) * g.out_channels,
      0u);
  for (int k = plan.k; k < plan.padded_k; ++k) {
    image[2 * k + 1] = static_cast<uint32_t>(kConvGemmNowhere) << 16;
  }
  for (int k = 0; k < plan.k; ++k) {
    const int channel = k / taps;
    const int tap = k % taps;
    const int row_step = (tap / g.kernel_width) * g.dilation_height;
    const int column_step = (tap % g.kernel_width) * g.dilation_width;
    image[2 * k] =
        static_cast<uint32_t>(channel * in_plane + int64_t{row_step} * g.in_width + column_step);
    image[2 * k + 1] = static_cast<uint32_t>(row_step) << 16 | static_cast<uint32_t>(column_step);
  }
  uint32_t* rows = image.data() + 2 * static_cast<size_t>(plan.padded_k);
  const bool half = is_half_math(plan.math);
  for (int oc = 0; oc < g.out_channels; ++oc) {
    const float* w = weight + static_cast<int64_t>(oc) * plan.k;
    uint32_t* row = rows + static_cast<int64_t>(oc) * plan.row_words;
    if (!half) {
      for (int k = 0; k < plan.k; ++k) {
        row[k] = plan.math == TensorCoreMath::Tf32 ? tf32_bits_of(w[k]) : bits_of_float(w[k]);
      }
      continue;
    }
    auto narrow = [&](int k) -> uint32_t {
      if (k >= plan.k) return 0u;
      return plan.math == TensorCoreMath::Fp16 ? float_to_half(w[k]) : float_to_bfloat16(w[k]);
    };
    for (int word = 0; word < (plan.k + 1) / 2; ++word) {
      row[word] = narrow(2 * word) | narrow(2 * word + 1) << 16;
    }
  }
  return image;
}

}  // namespace fusednn::cuda
