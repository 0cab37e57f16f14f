// SPDX-License-Identifier: Apache-2.0
// The matrix-multiply core that Linear and Conv2d share: C = A * B + bias, then an epilogue, on
// one cache block, with A row-major and B read as panels of kGemmPanelWidth columns; plus the
// instruction-set dispatch that picks the register tile. Internal to the CPU backend.
#pragma once

#include <cstdint>

#include "common/elementwise_op.hpp"

namespace fusednn::cpu {

// Columns of B (and of C) that one register tile covers. B is read as panels this wide: panel p
// holds columns [16 p, 16 p + 16) and the tile loads all 16 floats of each of its rows (callers
// pad past n with zeros or any finite values). Row k of panel p starts at
//   b + p * b_panel_stride + k * b_row_stride          (b_row_offsets null), or
//   b + p * b_panel_stride + b_row_offsets[k]          (otherwise).
// The layouts in use: packed panels (row stride 16, panel stride depth * 16); a row-major matrix
// (row stride = its row length, panel stride 16); rows at arbitrary offsets of one array
// (Conv2d reading shifted windows of its input plane, panel stride 16).
inline constexpr int64_t kGemmPanelWidth = 16;

// Depth (rows of B) per block: with 16 columns, one panel of a block is 16 KiB, half of L1.
inline constexpr int64_t kGemmDepthBlock = 256;
// Columns per block when B is not packed (Conv2d): 256 x 128 floats = 128 KiB, in L2.
inline constexpr int64_t kGemmColumnBlock = 128;

struct GemmBlock {
  const float* a;  // m x depth, row-major with row stride lda
  int64_t lda;
  const float* b;  // depth x n in panels, see kGemmPanelWidth
  int64_t b_row_stride, b_panel_stride;
  const int64_t* b_row_offsets;  // [depth] or null
  float* c;                      // m x n, row-major with row stride ldc
  int64_t ldc;
  int64_t m, n, depth;
  // false (the first depth block): C = bias + A * B. true: C += A * B, C holding the sum over
  // the earlier depth blocks.
  bool accumulate;
  // true on the last depth block: run the epilogue on the finished rows of C.
  bool finish;
  const float* row_bias;     // [m] or null, one value per row of C (Conv2d's output channel)
  const float* column_bias;  // [n] or null, one value per column of C (Linear's output feature)
  const Epilogue* epilogue;  // may be null or empty
};

// Multiplies one block. Every element of C is summed in the same order, starting from its bias
// (or zero) and adding the products k ascending, whatever its row or column position, so results
// do not depend on how callers split the rows.
void gemm_block(const GemmBlock& block);

// Packs a row-major matrix's rows as B's columns: packed[p][k][lane] = source[(16 p + lane) *
// source_stride + k] for k < depth, zero for the lanes past `rows` in the last panel. That is the
// layout with row stride 16 and panel stride depth * 16.
void pack_transposed_panels(const float* source, int64_t source_stride, int64_t rows, int64_t depth,
                            float* packed);

// y[r, o] = epilogue(sum_i x[r, i] * w[o, i] + bias[o]) as one dot product per output, for the
// few-row Linear calls where packing the weight would cost more than the multiply. Rows go two at
// a time through one pass over w.
void linear_dot_rows(const float* x, const float* w, const float* bias, float* y, int64_t rows,
                     int64_t in_features, int64_t out_features, const Epilogue& epilogue);

// Instruction sets the routines above are compiled for. Baseline is what the build targets, on
// generic vectors (SSE2 on x86-64, NEON on AArch64, where the compiler decides whether products
// and sums fuse); Avx2Fma is chosen at run time where an x86-64 CPU has it; Neon (AArch64 builds,
// the default there) is written with NEON intrinsics and fuses every multiply-add
// (gemm_neon.hpp gives its order).
enum class GemmIsa { Baseline, Avx2Fma, Neon };

bool gemm_isa_supported(GemmIsa isa);
// The set the kernels use now: the best supported one unless a test or benchmark forced another.
GemmIsa gemm_isa();
// Forces an instruction set for later calls on every thread (tests and benchmarks compare them).
// Returns false, changing nothing, when the CPU lacks it.
bool force_gemm_isa(GemmIsa isa);
const char* gemm_isa_name(GemmIsa isa);

}  // namespace fusednn::cpu
