// SPDX-License-Identifier: Apache-2.0
// Register-tiled matrix multiply and the few-row dot-product path on GCC/Clang generic vectors,
// compiled once for the baseline instruction set and once for AVX2 + FMA from one template body;
// plus the instruction-set dispatch. The way a block is covered with tiles is gemm_tiling.hpp's;
// AArch64's NEON kernel is gemm_neon.cpp's.
//
// Register tile: kRows rows of C by kGemmPanelWidth (16) columns live in vector registers for the
// whole depth loop; each step loads 16 floats of B, broadcasts kRows values of A and does
// kRows * 16 multiply-adds. With AVX2 + FMA (8 lanes, 16 ymm registers) the tile is 6 x 16:
// 12 accumulators + 2 B vectors + 1 broadcast, 12 FMAs per 2 loads + 6 broadcasts, the shape
// that keeps both FMA pipes busy. With SSE2 (4 lanes, 16 xmm registers, no FMA) it is 2 x 16
// (3 x 16 spills), with NEON (4 lanes, 32 registers) 6 x 16. The rows left over after the full
// tiles get a tile of exactly their count, so no work is wasted on rows that do not exist.
//
// The vectors are GCC/Clang generic vectors (__attribute__((vector_size))), which the compiler
// lowers to whatever the target has; GCC does not keep a plain float[6][16] accumulator array in
// registers, so the tile is written with them. Other compilers get the same code on a small
// struct of floats (FUSEDNN_CPU_PORTABLE_VECTORS selects that path anywhere, to test it).
#include "backends/cpu/gemm.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>

#include "backends/cpu/epilogue.hpp"
#include "backends/cpu/gemm_neon.hpp"
#include "backends/cpu/gemm_tiling.hpp"

#if defined(__GNUC__) || defined(__clang__)
#define FUSEDNN_CPU_ALWAYS_INLINE inline __attribute__((always_inline))
#if !defined(FUSEDNN_CPU_PORTABLE_VECTORS)
#define FUSEDNN_CPU_VECTOR_EXTENSION 1
#endif
#else
#define FUSEDNN_CPU_ALWAYS_INLINE inline
#endif

#if defined(FUSEDNN_CPU_VECTOR_EXTENSION) && (defined(__x86_64__) || defined(__i386__))
#define FUSEDNN_CPU_X86_DISPATCH 1
#endif

namespace fusednn::cpu {
namespace {

#if defined(FUSEDNN_CPU_VECTOR_EXTENSION)
template <int kLanes>
struct FloatVector {
  typedef float type __attribute__((vector_size(kLanes * sizeof(float))));
};
template <int kLanes>
using Vec = typename FloatVector<kLanes>::type;
#else
// The operations the kernels use, lane by lane.
template <int kLanes>
struct Vec {
  float lane[kLanes];
  Vec& operator+=(const Vec& other) {
    for (int i = 0; i < kLanes; ++i) lane[i] += other.lane[i];
    return *this;
  }
  friend Vec operator*(float scalar, const Vec& v) {
    Vec product;
    for (int i = 0; i < kLanes; ++i) product.lane[i] = scalar * v.lane[i];
    return product;
  }
  friend Vec operator*(const Vec& a, const Vec& b) {
    Vec product;
    for (int i = 0; i < kLanes; ++i) product.lane[i] = a.lane[i] * b.lane[i];
    return product;
  }
};
#endif

// Vectors go in and out through references: a vector passed or returned by value in a function
// compiled without AVX would have a different ABI (these are always inlined, but GCC warns).
template <int kLanes>
FUSEDNN_CPU_ALWAYS_INLINE void load_vec(Vec<kLanes>& v, const float* source) {
  std::memcpy(&v, source, sizeof v);
}

template <int kLanes>
FUSEDNN_CPU_ALWAYS_INLINE void store_vec(float* destination, const Vec<kLanes>& v) {
  std::memcpy(destination, &v, sizeof v);
}

template <int kLanes>
FUSEDNN_CPU_ALWAYS_INLINE void broadcast_vec(Vec<kLanes>& v, float value) {
  float lanes[kLanes];
  for (int i = 0; i < kLanes; ++i) lanes[i] = value;
  load_vec<kLanes>(v, lanes);
}

// Lanes summed left to right: a fixed order for every input. (Through memory: indexing the vector
// itself makes GCC keep every accumulator of the loop before it in memory.)
template <int kLanes>
FUSEDNN_CPU_ALWAYS_INLINE float sum_lanes(const Vec<kLanes>& v) {
  float lanes[kLanes];
  store_vec<kLanes>(lanes, v);
  float sum = lanes[0];
  for (int i = 1; i < kLanes; ++i) sum += lanes[i];
  return sum;
}

// One register tile of C (gemm_tiling.hpp says what it computes).
template <int kRows, int kLanes, bool kRowOffsets>
FUSEDNN_CPU_ALWAYS_INLINE void multiply_tile(int64_t depth, const float* const* a_rows,
                                             const float* b, int64_t b_row_stride,
                                             const int64_t* b_row_offsets, const float* row_bias,
                                             const float* column_bias, float* out,
                                             int64_t out_stride, bool accumulate) {
  constexpr int kVectors = static_cast<int>(kGemmPanelWidth) / kLanes;
  Vec<kLanes> acc[kRows][kVectors];
  for (int i = 0; i < kRows; ++i) {
    for (int v = 0; v < kVectors; ++v) {
      if (accumulate) {
        load_vec<kLanes>(acc[i][v], out + i * out_stride + v * kLanes);
      } else if (row_bias) {
        broadcast_vec<kLanes>(acc[i][v], row_bias[i]);
      } else if (column_bias) {
        load_vec<kLanes>(acc[i][v], column_bias + v * kLanes);
      } else {
        acc[i][v] = Vec<kLanes>{};
      }
    }
  }
  const float* rows[kRows];
  for (int i = 0; i < kRows; ++i) rows[i] = a_rows[i];
  for (int64_t k = 0; k < depth; ++k) {
    const float* b_row = kRowOffsets ? b + b_row_offsets[k] : b + k * b_row_stride;
    Vec<kLanes> b_vectors[kVectors];
    for (int v = 0; v < kVectors; ++v) load_vec<kLanes>(b_vectors[v], b_row + v * kLanes);
    for (int i = 0; i < kRows; ++i) {
      const float a_value = rows[i][k];
      for (int v = 0; v < kVectors; ++v) acc[i][v] += a_value * b_vectors[v];
    }
  }
  for (int i = 0; i < kRows; ++i) {
    for (int v = 0; v < kVectors; ++v)
      store_vec<kLanes>(out + i * out_stride + v * kLanes, acc[i][v]);
  }
}

#if defined(FUSEDNN_CPU_VECTOR_EXTENSION)
// out = (a, b)[i0, i1, i2, i3], indices 4..7 naming b's lanes.
template <int i0, int i1, int i2, int i3>
FUSEDNN_CPU_ALWAYS_INLINE void shuffle_pair(Vec<4>& out, const Vec<4>& a, const Vec<4>& b) {
#if defined(__clang__) || __GNUC__ >= 12
  out = __builtin_shufflevector(a, b, i0, i1, i2, i3);
#else
  typedef int IndexVector __attribute__((vector_size(4 * sizeof(int))));
  out = __builtin_shuffle(a, b, IndexVector{i0, i1, i2, i3});
#endif
}

// Transposes the 4x4 block whose rows start at source, source + stride, ... into destination,
// destination + destination_stride, ... (the unpack / move-halves sequence).
FUSEDNN_CPU_ALWAYS_INLINE void transpose_4x4(const float* source, int64_t stride,
                                             float* destination, int64_t destination_stride) {
  Vec<4> r0, r1, r2, r3, low01, low23, high01, high23, column;
  load_vec<4>(r0, source);
  load_vec<4>(r1, source + stride);
  load_vec<4>(r2, source + 2 * stride);
  load_vec<4>(r3, source + 3 * stride);
  shuffle_pair<0, 4, 1, 5>(low01, r0, r1);   // r0[0] r1[0] r0[1] r1[1]
  shuffle_pair<0, 4, 1, 5>(low23, r2, r3);   // r2[0] r3[0] r2[1] r3[1]
  shuffle_pair<2, 6, 3, 7>(high01, r0, r1);  // r0[2] r1[2] r0[3] r1[3]
  shuffle_pair<2, 6, 3, 7>(high23, r2, r3);  // r2[2] r3[2] r2[3] r3[3]
  shuffle_pair<0, 1, 4, 5>(column, low01, low23);
  store_vec<4>(destination, column);
  shuffle_pair<2, 3, 6, 7>(column, low01, low23);
  store_vec<4>(destination + destination_stride, column);
  shuffle_pair<0, 1, 4, 5>(column, high01, high23);
  store_vec<4>(destination + 2 * destination_stride, column);
  shuffle_pair<2, 3, 6, 7>(column, high01, high23);
  store_vec<4>(destination + 3 * destination_stride, column);
}
#endif

// sums[r][j] = sum_k x_rows[r][k] * w_rows[j][k] for kRows rows of x and kOutputs rows of w:
// each step loads kRows vectors of x and kOutputs of w for kRows * kOutputs multiply-adds
// (independent chains, enough to cover the FMA latency). Every sum has the same order whatever
// the tile shape: kLanes interleaved partial sums, added left to right, then the leftover k.
template <int kLanes, int kRows, int kOutputs>
FUSEDNN_CPU_ALWAYS_INLINE void dot_tile(const float* const* x_rows, const float* const* w_rows,
                                        int64_t depth, float* sums) {
  const int64_t vector_end = depth - depth % kLanes;
  Vec<kLanes> acc[kRows][kOutputs];
  for (int r = 0; r < kRows; ++r) {
    for (int j = 0; j < kOutputs; ++j) acc[r][j] = Vec<kLanes>{};
  }
  for (int64_t k = 0; k < vector_end; k += kLanes) {
    Vec<kLanes> x_vectors[kRows];
    for (int r = 0; r < kRows; ++r) load_vec<kLanes>(x_vectors[r], x_rows[r] + k);
    for (int j = 0; j < kOutputs; ++j) {
      Vec<kLanes> w_vector;
      load_vec<kLanes>(w_vector, w_rows[j] + k);
      for (int r = 0; r < kRows; ++r) acc[r][j] += x_vectors[r] * w_vector;
    }
  }
  for (int r = 0; r < kRows; ++r) {
    for (int j = 0; j < kOutputs; ++j) {
      float sum = sum_lanes<kLanes>(acc[r][j]);
      for (int64_t k = vector_end; k < depth; ++k) sum += x_rows[r][k] * w_rows[j][k];
      sums[r * kOutputs + j] = sum;
    }
  }
}

// The kernel class gemm_tiling.hpp's drivers take: kGemmRowCount x 16 tiles of kLanes-wide
// vectors.
template <int kLanes, int kGemmRowCount>
struct VectorKernel {
  static constexpr int kGemmRows = kGemmRowCount;

  template <int kRows, bool kRowOffsets>
  static FUSEDNN_CPU_ALWAYS_INLINE void multiply_tile(int64_t depth, const float* const* a_rows,
                                                      const float* b, int64_t b_row_stride,
                                                      const int64_t* b_row_offsets,
                                                      const float* row_bias,
                                                      const float* column_bias, float* out,
                                                      int64_t out_stride, bool accumulate) {
    cpu::multiply_tile<kRows, kLanes, kRowOffsets>(depth, a_rows, b, b_row_stride, b_row_offsets,
                                                   row_bias, column_bias, out, out_stride,
                                                   accumulate);
  }

  template <int kRows, int kOutputs>
  static FUSEDNN_CPU_ALWAYS_INLINE void dot_tile(const float* const* x_rows,
                                                 const float* const* w_rows, int64_t depth,
                                                 float* sums) {
    cpu::dot_tile<kLanes, kRows, kOutputs>(x_rows, w_rows, depth, sums);
  }
};

// Register tile of the baseline build (see the comment at the top of the file).
#if defined(__AVX__)
using BaselineKernel = VectorKernel<8, 6>;
#elif defined(__aarch64__)
using BaselineKernel = VectorKernel<4, 6>;
#else
using BaselineKernel = VectorKernel<4, 2>;
#endif

void gemm_block_baseline(const GemmBlock& block) { tiling::gemm_block_body<BaselineKernel>(block); }

void linear_dot_rows_baseline(const float* x, const float* w, const float* bias, float* y,
                              int64_t rows, int64_t in_features, int64_t out_features,
                              const Epilogue& epilogue) {
  tiling::linear_dot_rows_body<BaselineKernel>(x, w, bias, y, rows, in_features, out_features,
                                               epilogue);
}

#if defined(FUSEDNN_CPU_X86_DISPATCH)
__attribute__((target("avx2,fma"))) void gemm_block_avx2_fma(const GemmBlock& block) {
  tiling::gemm_block_body<VectorKernel<8, 6>>(block);
}

__attribute__((target("avx2,fma"))) void linear_dot_rows_avx2_fma(const float* x, const float* w,
                                                                  const float* bias, float* y,
                                                                  int64_t rows, int64_t in_features,
                                                                  int64_t out_features,
                                                                  const Epilogue& epilogue) {
  tiling::linear_dot_rows_body<VectorKernel<8, 6>>(x, w, bias, y, rows, in_features, out_features,
                                                   epilogue);
}
#endif

#if defined(FUSEDNN_CPU_NEON_GEMM)
constexpr bool neon_gemm_compiled = true;
#else
constexpr bool neon_gemm_compiled = false;
#endif

bool cpu_has_avx2_fma() {
#if defined(FUSEDNN_CPU_X86_DISPATCH)
  __builtin_cpu_init();
  // The checks include the operating system's support for the ymm register state.
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  return false;
#endif
}

GemmIsa best_supported_isa() {
  static const GemmIsa best = neon_gemm_compiled   ? GemmIsa::Neon
                              : cpu_has_avx2_fma() ? GemmIsa::Avx2Fma
                                                   : GemmIsa::Baseline;
  return best;
}

// -1 while nothing is forced, else the forced GemmIsa's value.
std::atomic<int> forced_isa{-1};

}  // namespace

void pack_transposed_panels(const float* source, int64_t source_stride, int64_t rows, int64_t depth,
                            float* packed) {
  constexpr int64_t kWidth = kGemmPanelWidth;
  for (int64_t panel0 = 0; panel0 < rows; panel0 += kWidth) {
    const float* panel_source = source + panel0 * source_stride;
    float* panel = packed + (panel0 / kWidth) * depth * kWidth;
    const int64_t lanes = std::min(kWidth, rows - panel0);
    int64_t k0 = 0;
#if defined(FUSEDNN_CPU_VECTOR_EXTENSION)
    if (lanes == kWidth) {
      for (; k0 + 4 <= depth; k0 += 4) {
        for (int64_t lane0 = 0; lane0 < kWidth; lane0 += 4) {
          transpose_4x4(panel_source + lane0 * source_stride + k0, source_stride,
                        panel + k0 * kWidth + lane0, kWidth);
        }
      }
    }
#endif
    for (int64_t lane = 0; lane < lanes; ++lane) {
      const float* row = panel_source + lane * source_stride;
      for (int64_t k = k0; k < depth; ++k) panel[k * kWidth + lane] = row[k];
    }
    for (int64_t k = k0; k < depth; ++k) {
      std::fill(panel + k * kWidth + lanes, panel + (k + 1) * kWidth, 0.0f);
    }
  }
}

bool gemm_isa_supported(GemmIsa isa) {
  switch (isa) {
    case GemmIsa::Baseline: return true;
    case GemmIsa::Avx2Fma: return best_supported_isa() == GemmIsa::Avx2Fma;
    case GemmIsa::Neon: return best_supported_isa() == GemmIsa::Neon;
  }
  return false;
}

GemmIsa gemm_isa() {
  const int forced = forced_isa.load(std::memory_order_relaxed);
  return forced < 0 ? best_supported_isa() : static_cast<GemmIsa>(forced);
}

bool force_gemm_isa(GemmIsa isa) {
  if (!gemm_isa_supported(isa)) return false;
  forced_isa.store(static_cast<int>(isa), std::memory_order_relaxed);
  return true;
}

const char* gemm_isa_name(GemmIsa isa) {
  switch (isa) {
    case GemmIsa::Baseline: return "baseline";
    case GemmIsa::Avx2Fma: return "avx2+fma";
    case GemmIsa::Neon: return "neon";
  }
  return "unknown";
}

void gemm_block(const GemmBlock& block) {
  if (block.m <= 0 || block.n <= 0) return;
#if defined(FUSEDNN_CPU_NEON_GEMM)
  if (gemm_isa() == GemmIsa::Neon) {
    gemm_block_neon(block);
    return;
  }
#endif
#if defined(FUSEDNN_CPU_X86_DISPATCH)
  if (gemm_isa() == GemmIsa::Avx2Fma) {
    gemm_block_avx2_fma(block);
    return;
  }
#endif
  gemm_block_baseline(block);
}

void linear_dot_rows(const float* x, const float* w, const float* bias, float* y, int64_t rows,
                     int64_t in_features, int64_t out_features, const Epilogue& epilogue) {
  if (rows <= 0 || out_features <= 0) return;
#if defined(FUSEDNN_CPU_NEON_GEMM)
  if (gemm_isa() == GemmIsa::Neon) {
    linear_dot_rows_neon(x, w, bias, y, rows, in_features, out_features, epilogue);
    return;
  }
#endif
#if defined(FUSEDNN_CPU_X86_DISPATCH)
  if (gemm_isa() == GemmIsa::Avx2Fma) {
    linear_dot_rows_avx2_fma(x, w, bias, y, rows, in_features, out_features, epilogue);
    return;
  }
#endif
  linear_dot_rows_baseline(x, w, bias, y, rows, in_features, out_features, epilogue);
}

}  // namespace fusednn::cpu
