// SPDX-License-Identifier: Apache-2.0
// Warp-level tensor-core pieces the fused MLP forms share: the mma.sync instructions for each
// TensorCoreMath, the tf32 rounding and the half-pair packing. The device code compiles for
// every target so that nothing goes unreferenced, but tf32 and these mma shapes exist from sm_80
// on; the launchers never run them below that.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstring>

#include "backends/cuda/mlp/fused_mlp_tensor_core.hpp"

namespace fusednn::cuda {

__host__ __device__ constexpr bool is_half(TensorCoreMath math) {
  return math == TensorCoreMath::Fp16 || math == TensorCoreMath::Bf16;
}

__device__ __forceinline__ uint32_t to_tf32(float value) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  uint32_t result;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(result) : "f"(value));
  // The tf32 register layout is implementation defined (PTX ISA, alternate floating-point
  // formats); Tf32x3 reads `result` back as an fp32 value, so keep only sign, exponent and the
  // 10 mantissa bits the tensor core uses.
  return result & 0xffffe000u;
#else
  return __float_as_uint(value);
#endif
}

// The small half of a 3xTF32 split: the tf32 rounding of what `big` (to_tf32(value)) leaves.
__device__ __forceinline__ uint32_t tf32_remainder(float value, uint32_t big) {
  return to_tf32(value - __uint_as_float(big));
}

// A 3xTF32 split of `value` in three instructions: `big`, rounded to nearest (ties away, as
// cvt.rna) by integer arithmetic on the bits, and `small`, the exact rest (value - big, at most
// half a tf32 unit of value), passed on as fp32 bits: the tensor core takes a tf32 operand's
// top 19 bits, so small loses at most ~2^-21 of value (2^-22 after cvt.rna), far inside fp32's
// 1e-5 contract, for two cvt and two masks fewer per value. Inf and NaN make NaN products, as
// with cvt.
__device__ __forceinline__ void split_tf32(float value, uint32_t& big, uint32_t& small) {
  big = (__float_as_uint(value) + 0x1000u) & 0xffffe000u;
  small = __float_as_uint(value - __uint_as_float(big));
}

template <TensorCoreMath kMath>
__device__ __forceinline__ uint32_t pack_pair(float low, float high) {
  uint32_t bits;
  if constexpr (kMath == TensorCoreMath::Fp16) {
    const __half2 pair = __floats2half2_rn(low, high);
    memcpy(&bits, &pair, sizeof bits);
  } else {
    const __nv_bfloat162 pair = __floats2bfloat162_rn(low, high);
    memcpy(&bits, &pair, sizeof bits);
  }
  return bits;
}

// d += a * b for one m16n8k8 (tf32) or m16n8k16 (f16, bf16) tile, fp32 accumulation.
template <TensorCoreMath kMath>
__device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                    uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (kMath == TensorCoreMath::Fp16) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else if constexpr (kMath == TensorCoreMath::Bf16) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
#else
  (void)d, (void)a, (void)b0, (void)b1;
#endif
}

}  // namespace fusednn::cuda
