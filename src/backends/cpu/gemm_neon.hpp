// SPDX-License-Identifier: Apache-2.0
// The matrix-multiply core's AArch64 NEON entry points (gemm_neon.cpp), which gemm.cpp's dispatch
// calls when GemmIsa::Neon is in use. Internal to the CPU backend.
//
// Every sum is a chain of fused multiply-adds (one rounding each) in a fixed order, so the
// results equal those of std::fma in the same order bit for bit, on any AArch64 CPU and at any
// optimisation level:
//   gemm_block_neon:      C[i][j] = fma(A[i][k], B[k][j], C[i][j]) for k ascending, starting from
//                         the bias (or zero, or C when accumulating), as gemm.hpp describes.
//   linear_dot_rows_neon: four partial sums, lane l taking k = l, l + 4, l + 8, ... below
//                         depth - depth % 4 by fma; their sum (((l0 + l1) + l2) + l3); then
//                         fma(x[k], w[k], sum) for the leftover k ascending; then + bias.
#pragma once

#include <cstdint>

#include "backends/cpu/gemm.hpp"

#if defined(__aarch64__) && defined(__ARM_NEON)
// Advanced SIMD is part of every AArch64 CPU that runs Linux, so the NEON path is compiled into
// every AArch64 build and needs no run-time check.
#define FUSEDNN_CPU_NEON_GEMM 1
#endif

namespace fusednn::cpu {

#if defined(FUSEDNN_CPU_NEON_GEMM)
void gemm_block_neon(const GemmBlock& block);
void linear_dot_rows_neon(const float* x, const float* w, const float* bias, float* y, int64_t rows,
                          int64_t in_features, int64_t out_features, const Epilogue& epilogue);
#endif

}  // namespace fusednn::cpu
