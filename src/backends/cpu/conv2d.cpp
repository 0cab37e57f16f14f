// SPDX-License-Identifier: Apache-2.0
// Conv2d as one matrix multiply per sample and group: out[oc][p] = bias[oc] + sum_k w[oc][k] *
// col[k][p], k running over (input channel, kernel row, kernel column) of the group and p over
// output pixels. The weight is A as stored ([out, in / groups * kh * kw] row-major). B (col) is
// read one of two ways:
//
// Shifted windows (stride 1). With the input plane zero-padded to PH x PW (a copy in scratch,
// or the input itself when there is no padding and every read stays inside it), output pixel
// (oh, ow) of tap (c, kh, kw) reads plane[c][oh + kh * dh][ow + kw * dw]. Numbering pixels
// q = oh * PW + ow, the tap's row of B is the plane from offset c * PH * PW + kh * dh * PW +
// kw * dw on, contiguous: no im2col copy at all, the multiply reads the plane through a table of
// per-tap offsets. The price: the q with ow >= OW (PW - OW = (KW - 1) * dw of every PW) are
// computed and dropped, so results land in scratch rows of PW and are compacted into y. Taken
// when that waste is at most half the real work (LeNet conv1: 892 computed for 784 pixels).
//
// im2col (strides above 1, or when the waste would be larger): col is written into scratch as a
// row-major matrix whose rows are padded with zeros to whole 16-column panels.
//
// Blocking: kGemmColumnBlock pixels by kGemmDepthBlock taps (128 KiB of B, L2) per gemm_block
// call; the weight rows sweep across it.
#include "backends/cpu/conv2d.hpp"

#include <algorithm>

#include "backends/cpu/epilogue.hpp"
#include "backends/cpu/gemm.hpp"

namespace fusednn::cpu {
namespace {

static_assert(kGemmColumnBlock % kGemmPanelWidth == 0, "column blocks start on a panel");

int64_t round_up_to_panels(int64_t count) {
  return (count + kGemmPanelWidth - 1) / kGemmPanelWidth * kGemmPanelWidth;
}

// Copies of a few dozen floats, as a loop the compiler vectorises in place: std::copy calls
// memmove, whose call overhead is a large share of LeNet conv1's time.
void copy_floats(const float* source, int64_t count, float* destination) {
  for (int64_t i = 0; i < count; ++i) destination[i] = source[i];
}

// How one call lays out its work and its scratch; a function of the geometry alone.
struct ConvLayout {
  int64_t in_channels_per_group, out_channels_per_group, depth, pixels, in_plane;
  bool shifted;  // the shifted-windows path, else im2col

  // Shifted windows: the plane B is read from (PH x PW per channel), the number of pixels q
  // computed (the last one at (OH - 1) * PW + OW - 1), where the plane and the results live.
  int64_t plane_height, plane_width, computed_pixels;
  bool copy_plane;        // false: the input is the plane (no padding, no read past it)
  bool compact;           // results computed into scratch rows of PW, then copied to y
  int64_t plane_floats;   // scratch for the padded plane, 0 when not copied
  int64_t result_floats;  // scratch for the results, 0 when not compacted

  // im2col: the padded row length of col.
  int64_t col_row_length;

  int64_t scratch_floats;
};

ConvLayout plan_layout(const Conv2dGeometry& g) {
  ConvLayout layout{};
  layout.in_channels_per_group = g.in_channels / g.groups;
  layout.out_channels_per_group = g.out_channels / g.groups;
  layout.depth = layout.in_channels_per_group * g.kernel_height * g.kernel_width;
  layout.pixels = g.out_height * g.out_width;
  layout.in_plane = g.in_height * g.in_width;

  layout.plane_height = g.in_height + 2 * g.padding_height;
  layout.plane_width = g.in_width + 2 * g.padding_width;
  layout.computed_pixels = (g.out_height - 1) * layout.plane_width + g.out_width;
  layout.shifted = g.stride_height == 1 && g.stride_width == 1 &&
                   2 * layout.computed_pixels <= 3 * layout.pixels;
  if (layout.shifted) {
    // With OH = PH - (KH - 1) dh and OW = PW - (KW - 1) dw, the last tap starts at
    // C PH PW - ((OH - 1) PW + OW) = C PH PW - computed_pixels: its row of B ends exactly at the
    // plane's last element, and reads past it come only from rounding the last panel up to 16
    // columns (the copied plane has 16 zeros of slack after it).
    layout.copy_plane = g.padding_height != 0 || g.padding_width != 0 ||
                        layout.computed_pixels % kGemmPanelWidth != 0;
    layout.compact = layout.plane_width != g.out_width;
    if (layout.copy_plane) {
      layout.plane_floats =
          layout.in_channels_per_group * layout.plane_height * layout.plane_width + kGemmPanelWidth;
    }
    if (layout.compact) {
      layout.result_floats = layout.out_channels_per_group * layout.computed_pixels;
    }
    layout.scratch_floats = layout.plane_floats + layout.result_floats;
  } else {
    layout.col_row_length = round_up_to_panels(layout.pixels);
    layout.scratch_floats = layout.depth * layout.col_row_length;
  }
  return layout;
}

// The taps [depth0, depth0 + count) as offsets into a plane of plane_height x plane_width per
// channel: tap (c, kh, kw) starts at c * PH * PW + kh * dh * PW + kw * dw.
void tap_offsets(const Conv2dGeometry& g, const ConvLayout& layout, int64_t depth0, int64_t count,
                 int64_t* offsets) {
  const int64_t taps_per_channel = g.kernel_height * g.kernel_width;
  int64_t c = depth0 / taps_per_channel;
  int64_t kh = depth0 % taps_per_channel / g.kernel_width;
  int64_t kw = depth0 % g.kernel_width;
  for (int64_t k = 0; k < count; ++k) {
    offsets[k] = (c * layout.plane_height + kh * g.dilation_height) * layout.plane_width +
                 kw * g.dilation_width;
    if (++kw == g.kernel_width) {
      kw = 0;
      if (++kh == g.kernel_height) {
        kh = 0;
        ++c;
      }
    }
  }
}

// Copies one group's input into the middle of the padded plane (its border, zeroed once per
// call, stays zero).
void fill_plane(const float* x_group, const Conv2dGeometry& g, const ConvLayout& layout,
                float* plane) {
  for (int64_t c = 0; c < layout.in_channels_per_group; ++c) {
    const float* source = x_group + c * layout.in_plane;
    float* destination =
        plane + (c * layout.plane_height + g.padding_height) * layout.plane_width + g.padding_width;
    for (int64_t ih = 0; ih < g.in_height; ++ih) {
      copy_floats(source + ih * g.in_width, g.in_width, destination + ih * layout.plane_width);
    }
  }
}

// First and one-past-last output column whose input column ow * stride + offset lies in
// [0, width).
void valid_output_range(int64_t offset, int64_t stride, int64_t width, int64_t out_width,
                        int64_t* begin, int64_t* end) {
  const int64_t first = offset >= 0 ? 0 : (-offset + stride - 1) / stride;
  const int64_t last_input = width - 1 - offset;  // largest ow * stride allowed
  const int64_t past_last = last_input < 0 ? 0 : last_input / stride + 1;
  *end = std::min(out_width, past_last);
  *begin = std::min(first, *end);
}

// col[k][p] for one group: x_group is [in_channels / groups, H, W]; col rows have row_length
// floats, the pixels past out_height * out_width zero.
void im2col(const float* x_group, const Conv2dGeometry& g, const ConvLayout& layout, float* col) {
  for (int64_t c = 0; c < layout.in_channels_per_group; ++c) {
    const float* plane = x_group + c * layout.in_plane;
    for (int64_t kh = 0; kh < g.kernel_height; ++kh) {
      for (int64_t kw = 0; kw < g.kernel_width; ++kw) {
        float* row =
            col + ((c * g.kernel_height + kh) * g.kernel_width + kw) * layout.col_row_length;
        const int64_t column_offset = kw * g.dilation_width - g.padding_width;
        int64_t ow_begin = 0;
        int64_t ow_end = 0;
        valid_output_range(column_offset, g.stride_width, g.in_width, g.out_width, &ow_begin,
                           &ow_end);
        for (int64_t oh = 0; oh < g.out_height; ++oh) {
          float* out = row + oh * g.out_width;
          const int64_t ih = oh * g.stride_height - g.padding_height + kh * g.dilation_height;
          if (ih < 0 || ih >= g.in_height) {
            std::fill(out, out + g.out_width, 0.0f);
            continue;
          }
          const float* in = plane + ih * g.in_width;
          std::fill(out, out + ow_begin, 0.0f);
          const int64_t stride = g.stride_width;
          for (int64_t ow = ow_begin; ow < ow_end; ++ow) out[ow] = in[ow * stride + column_offset];
          std::fill(out + ow_end, out + g.out_width, 0.0f);
        }
        std::fill(row + layout.pixels, row + layout.col_row_length, 0.0f);
      }
    }
  }
}

// One group of one sample on the shifted-windows path.
void conv_group_shifted(const float* x_group, const float* w_group, const float* bias_group,
                        float* y_group, const Conv2dGeometry& g, const ConvLayout& layout,
                        const Epilogue& epilogue, float* scratch) {
  const float* plane = x_group;
  if (layout.copy_plane) {
    fill_plane(x_group, g, layout, scratch);
    plane = scratch;
  }
  float* results = layout.compact ? scratch + layout.plane_floats : y_group;
  const int64_t result_stride = layout.compact ? layout.computed_pixels : layout.pixels;

  int64_t offsets[kGemmDepthBlock];
  for (int64_t col0 = 0; col0 < layout.computed_pixels; col0 += kGemmColumnBlock) {
    const int64_t cols = std::min(kGemmColumnBlock, layout.computed_pixels - col0);
    int64_t depth0 = 0;
    do {
      const int64_t block_depth = std::min(kGemmDepthBlock, layout.depth - depth0);
      tap_offsets(g, layout, depth0, block_depth, offsets);
      GemmBlock block{};
      block.a = w_group + depth0;
      block.lda = layout.depth;
      block.b = plane + col0;
      block.b_panel_stride = kGemmPanelWidth;
      block.b_row_offsets = offsets;
      block.c = results + col0;
      block.ldc = result_stride;
      block.m = layout.out_channels_per_group;
      block.n = cols;
      block.depth = block_depth;
      block.accumulate = depth0 > 0;
      block.finish = depth0 + block_depth >= layout.depth;
      block.row_bias = bias_group;
      block.epilogue = layout.compact ? nullptr : &epilogue;
      gemm_block(block);
      depth0 += block_depth;
    } while (depth0 < layout.depth);
  }

  if (layout.compact) {
    for (int64_t oc = 0; oc < layout.out_channels_per_group; ++oc) {
      for (int64_t oh = 0; oh < g.out_height; ++oh) {
        const float* source = results + oc * result_stride + oh * layout.plane_width;
        copy_floats(source, g.out_width, y_group + oc * layout.pixels + oh * g.out_width);
      }
    }
    apply_epilogue(epilogue, y_group, layout.out_channels_per_group * layout.pixels);
  }
}

// One group of one sample on the im2col path.
void conv_group_im2col(const float* x_group, const float* w_group, const float* bias_group,
                       float* y_group, const Conv2dGeometry& g, const ConvLayout& layout,
                       const Epilogue& epilogue, float* scratch) {
  im2col(x_group, g, layout, scratch);
  for (int64_t col0 = 0; col0 < layout.pixels; col0 += kGemmColumnBlock) {
    const int64_t cols = std::min(kGemmColumnBlock, layout.pixels - col0);
    int64_t depth0 = 0;
    do {
      const int64_t block_depth = std::min(kGemmDepthBlock, layout.depth - depth0);
      GemmBlock block{};
      block.a = w_group + depth0;
      block.lda = layout.depth;
      block.b = scratch + depth0 * layout.col_row_length + col0;
      block.b_row_stride = layout.col_row_length;
      block.b_panel_stride = kGemmPanelWidth;
      block.c = y_group + col0;
      block.ldc = layout.pixels;
      block.m = layout.out_channels_per_group;
      block.n = cols;
      block.depth = block_depth;
      block.accumulate = depth0 > 0;
      block.finish = depth0 + block_depth >= layout.depth;
      block.row_bias = bias_group;
      block.epilogue = &epilogue;
      gemm_block(block);
      depth0 += block_depth;
    } while (depth0 < layout.depth);
  }
}

}  // namespace

Conv2dForm conv2d_form(const Conv2dGeometry& geometry, std::string* reason) {
  const ConvLayout layout = plan_layout(geometry);
  if (reason != nullptr) {
    const std::string positions = std::to_string(layout.computed_pixels) +
                                  " positions computed for " + std::to_string(layout.pixels) +
                                  " output pixels";
    if (geometry.stride_height != 1 || geometry.stride_width != 1) {
      *reason = "stride " + std::to_string(geometry.stride_height) + "x" +
                std::to_string(geometry.stride_width) + " (shifted windows need stride 1)";
    } else if (layout.shifted) {
      *reason = "stride 1, " + positions + " (at most 1.5x)";
    } else {
      *reason = "shifted windows would waste too much: " + positions + " (over 1.5x)";
    }
  }
  return layout.shifted ? Conv2dForm::ShiftedWindows : Conv2dForm::Im2col;
}

size_t conv2d_scratch_floats(const Conv2dGeometry& geometry) {
  return static_cast<size_t>(plan_layout(geometry).scratch_floats);
}

void conv2d_forward(const float* x, const float* weight, const float* bias, float* y, int64_t batch,
                    const Conv2dGeometry& geometry, const Epilogue& epilogue, float* scratch) {
  const Conv2dGeometry& g = geometry;
  const ConvLayout layout = plan_layout(g);
  if (batch <= 0 || layout.pixels <= 0 || layout.out_channels_per_group <= 0) return;
  if (layout.shifted && layout.copy_plane) std::fill(scratch, scratch + layout.plane_floats, 0.0f);

  for (int64_t n = 0; n < batch; ++n) {
    for (int64_t group = 0; group < g.groups; ++group) {
      const float* x_group =
          x + (n * g.in_channels + group * layout.in_channels_per_group) * layout.in_plane;
      const float* w_group = weight + group * layout.out_channels_per_group * layout.depth;
      const float* bias_group = bias ? bias + group * layout.out_channels_per_group : nullptr;
      float* y_group =
          y + (n * g.out_channels + group * layout.out_channels_per_group) * layout.pixels;
      if (layout.shifted) {
        conv_group_shifted(x_group, w_group, bias_group, y_group, g, layout, epilogue, scratch);
      } else {
        conv_group_im2col(x_group, w_group, bias_group, y_group, g, layout, epilogue, scratch);
      }
    }
  }
}

}  // namespace fusednn::cpu
