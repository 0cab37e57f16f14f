// SPDX-License-Identifier: Apache-2.0
// MaxPool2d and AvgPool2d, one output row at a time. The output columns whose windows lie wholly
// inside the input row are computed kChunk at a time, window element by window element across the
// chunk (a loop the compiler vectorises for strides 1 and 2, which get their own instantiations);
// the few edge columns clip their windows one by one. Each output reduces its window in the same
// order either way: input rows top to bottom, columns left to right, as PyTorch's CPU kernels do.
#include "backends/cpu/pool2d.hpp"

#include <algorithm>
#include <limits>

namespace fusednn::cpu {
namespace {

constexpr int64_t kChunk = 64;

struct MaxReduction {
  static constexpr float initial() { return -std::numeric_limits<float>::infinity(); }
  // A NaN wins and then stays, as in PyTorch: (value > max) || isnan(value).
  static float combine(float acc, float value) {
    return ((value > acc) | (value != value)) ? value : acc;
  }
};

struct SumReduction {
  static constexpr float initial() { return 0.0f; }
  static float combine(float acc, float value) { return acc + value; }
};

// The rows [begin, end) of the input that a window starting at row start covers, and the end of
// the window clipped to the padded input (PyTorch's pool_size uses that one).
struct WindowRange {
  int64_t start, begin, end, padded_end;
};

WindowRange window_range(int64_t start, int64_t kernel, int64_t size, int64_t padding) {
  return {start, std::max<int64_t>(start, 0), std::min(start + kernel, size),
          std::min(start + kernel, size + padding)};
}

template <class Reduction>
float reduce_window(const float* plane, int64_t width, const WindowRange& rows,
                    const WindowRange& cols) {
  float acc = Reduction::initial();
  for (int64_t ih = rows.begin; ih < rows.end; ++ih) {
    const float* row = plane + ih * width;
    for (int64_t iw = cols.begin; iw < cols.end; ++iw) acc = Reduction::combine(acc, row[iw]);
  }
  return acc;
}

// PyTorch's avg_pool2d divisor: the padded window's area (count_include_pad) or the number of
// input elements in the window; 0 for a window with no input element, whose average is 0.
int64_t average_divisor(const WindowRange& rows, const WindowRange& cols, bool count_include_pad) {
  if (rows.begin >= rows.end || cols.begin >= cols.end) return 0;
  return count_include_pad ? (rows.padded_end - rows.start) * (cols.padded_end - cols.start)
                           : (rows.end - rows.begin) * (cols.end - cols.begin);
}

float finish_average(float sum, int64_t divisor) {
  return divisor == 0 ? 0.0f : sum / static_cast<float>(divisor);
}

// kStride: the column stride when it is 1 or 2, 0 to read it from the geometry.
template <class Reduction, bool kAverage, int kStride>
void pool_plane(const float* plane, float* out_plane, const Pool2dGeometry& g) {
  const int64_t stride = kStride > 0 ? kStride : g.stride_width;
  // Output columns [interior_begin, interior_end) have windows wholly inside [0, in_width).
  const int64_t interior_begin = std::min(g.out_width, (g.padding_width + stride - 1) / stride);
  const int64_t last_start = g.in_width - g.kernel_width + g.padding_width;
  const int64_t interior_end =
      std::max(interior_begin, std::min(g.out_width, last_start < 0 ? 0 : last_start / stride + 1));

  for (int64_t oh = 0; oh < g.out_height; ++oh) {
    const WindowRange rows = window_range(oh * g.stride_height - g.padding_height, g.kernel_height,
                                          g.in_height, g.padding_height);
    float* out = out_plane + oh * g.out_width;

    auto edge_column = [&](int64_t ow) {
      const WindowRange cols =
          window_range(ow * stride - g.padding_width, g.kernel_width, g.in_width, g.padding_width);
      const float value = reduce_window<Reduction>(plane, g.in_width, rows, cols);
      out[ow] = kAverage ? finish_average(value, average_divisor(rows, cols, g.count_include_pad))
                         : value;
    };
    for (int64_t ow = 0; ow < interior_begin; ++ow) edge_column(ow);
    for (int64_t ow = interior_end; ow < g.out_width; ++ow) edge_column(ow);

    // Interior windows span kernel_width columns of the input, so only rows clip.
    const WindowRange interior_cols = {0, 0, g.kernel_width, g.kernel_width};
    for (int64_t chunk0 = interior_begin; chunk0 < interior_end; chunk0 += kChunk) {
      const int64_t count = std::min(kChunk, interior_end - chunk0);
      float acc[kChunk];
      for (int64_t t = 0; t < count; ++t) acc[t] = Reduction::initial();
      const int64_t first_column = chunk0 * stride - g.padding_width;
      for (int64_t ih = rows.begin; ih < rows.end; ++ih) {
        const float* row = plane + ih * g.in_width + first_column;
        for (int64_t kw = 0; kw < g.kernel_width; ++kw) {
          const float* source = row + kw;
          for (int64_t t = 0; t < count; ++t) {
            acc[t] = Reduction::combine(acc[t], source[t * stride]);
          }
        }
      }
      if (kAverage) {
        const int64_t divisor = average_divisor(rows, interior_cols, g.count_include_pad);
        for (int64_t t = 0; t < count; ++t) out[chunk0 + t] = finish_average(acc[t], divisor);
      } else {
        std::copy(acc, acc + count, out + chunk0);
      }
    }
  }
}

template <class Reduction, bool kAverage>
void pool_forward(const float* x, float* y, int64_t batch, const Pool2dGeometry& g) {
  const int64_t planes = batch * g.channels;
  const int64_t in_plane = g.in_height * g.in_width;
  const int64_t out_plane = g.out_height * g.out_width;
  for (int64_t p = 0; p < planes; ++p) {
    const float* plane = x + p * in_plane;
    float* out = y + p * out_plane;
    if (g.stride_width == 1) {
      pool_plane<Reduction, kAverage, 1>(plane, out, g);
    } else if (g.stride_width == 2) {
      pool_plane<Reduction, kAverage, 2>(plane, out, g);
    } else {
      pool_plane<Reduction, kAverage, 0>(plane, out, g);
    }
  }
}

}  // namespace

void max_pool2d_forward(const float* x, float* y, int64_t batch, const Pool2dGeometry& geometry) {
  pool_forward<MaxReduction, false>(x, y, batch, geometry);
}

void avg_pool2d_forward(const float* x, float* y, int64_t batch, const Pool2dGeometry& geometry) {
  pool_forward<SumReduction, true>(x, y, batch, geometry);
}

}  // namespace fusednn::cpu
