// SPDX-License-Identifier: Apache-2.0
// Warpgroup-level asynchronous matrix multiplies (wgmma, sm_90a only): D[64 x N] += A[64 x 16] x
// B[16 x N] with A in registers (each warp 16 rows in mma.m16n8k16's A layout), B in shared
// memory behind a matrix descriptor, fp32 accumulators in mma's C layout, one 8-column tile after
// another. Compiled only where __CUDA_ARCH_FEAT_SM90_ALL is defined (the 90a target).
#pragma once

#include <cstdint>

#include "backends/cuda/device/tensor_core_math.hpp"

namespace fusednn::cuda::wgmma {

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

// A descriptor of B without swizzling: 8 x 8 core matrices of 16-bit values (8 rows of n, 16
// bytes of k each), those adjacent in k 128 bytes apart (the leading byte offset), those adjacent
// in n `n_stride_bytes` apart. Addresses and offsets are in 16-byte units.
__device__ __forceinline__ uint64_t descriptor(uint32_t shared_address, uint32_t n_stride_bytes) {
  return uint64_t{(shared_address & 0x3ffffu) >> 4} | uint64_t{128u >> 4} << 16 |
         uint64_t{n_stride_bytes >> 4} << 32;
}

// Orders register writes before the multiplies that read them (and the accumulators' reads after
// the wait): the asynchronous multiplies see registers as of the fence.
__device__ __forceinline__ void fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void commit() {
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
__device__ __forceinline__ void wait_all() {
  asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
}

// Keeps the compiler from moving reads or writes of `value` across the asynchronous window.
__device__ __forceinline__ void pin(float& value) { asm volatile("" : "+f"(value)::"memory"); }
__device__ __forceinline__ void pin(uint32_t& value) { asm volatile("" : "+r"(value)::"memory"); }

#define FDNN_WGMMA_PREDICATE "{\n.reg .pred p;\nsetp.ne.b32 p, %"
#define FDNN_D8(i)                                                                            \
  "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), \
      "+f"(d[i + 6]), "+f"(d[i + 7])
#define FDNN_A_DESC_ONE "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1)

// One k-step: d += a x B (scale-d true: d holds the starting values, here the bias).
template <TensorCoreMath kMath, int kN>
__device__ __forceinline__ void multiply(float (&d)[kN / 2], const uint32_t (&a)[4], uint64_t b) {
  static_assert(kMath == TensorCoreMath::Fp16 || kMath == TensorCoreMath::Bf16, "16-bit only");
  if constexpr (kN == 16) {
    if constexpr (kMath == TensorCoreMath::Fp16) {
      asm volatile(FDNN_WGMMA_PREDICATE
                   "13, 0;\n"
                   "wgmma.mma_async.sync.aligned.m64n16k16.f32.f16.f16 "
                   "{%0, %1, %2, %3, %4, %5, %6, %7}, {%8, %9, %10, %11}, %12, p, 1, 1, 0;\n}\n"
                   : FDNN_D8(0)
                   : FDNN_A_DESC_ONE);
    } else {
      asm volatile(FDNN_WGMMA_PREDICATE
                   "13, 0;\n"
                   "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 "
                   "{%0, %1, %2, %3, %4, %5, %6, %7}, {%8, %9, %10, %11}, %12, p, 1, 1, 0;\n}\n"
                   : FDNN_D8(0)
                   : FDNN_A_DESC_ONE);
    }
  } else if constexpr (kN == 32) {
#define FDNN_N32                                                                             \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, {%16, %17, %18, " \
  "%19}, %20, p, 1, 1, 0;\n}\n"
    if constexpr (kMath == TensorCoreMath::Fp16) {
      asm volatile(FDNN_WGMMA_PREDICATE
                   "21, 0;\n"
                   "wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16 " FDNN_N32
                   : FDNN_D8(0), FDNN_D8(8)
                   : FDNN_A_DESC_ONE);
    } else {
      asm volatile(FDNN_WGMMA_PREDICATE
                   "21, 0;\n"
                   "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 " FDNN_N32
                   : FDNN_D8(0), FDNN_D8(8)
                   : FDNN_A_DESC_ONE);
    }
#undef FDNN_N32
  } else if constexpr (kN == 64) {
#define FDNN_N64                                                                                \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, " \
  "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36, p, " \
  "1, 1, 0;\n}\n"
    if constexpr (kMath == TensorCoreMath::Fp16) {
      asm volatile(FDNN_WGMMA_PREDICATE
                   "37, 0;\n"
                   "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 " FDNN_N64
                   : FDNN_D8(0), FDNN_D8(8), FDNN_D8(16), FDNN_D8(24)
                   : FDNN_A_DESC_ONE);
    } else {
      asm volatile(FDNN_WGMMA_PREDICATE
                   "37, 0;\n"
                   "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " FDNN_N64
                   : FDNN_D8(0), FDNN_D8(8), FDNN_D8(16), FDNN_D8(24)
                   : FDNN_A_DESC_ONE);
    }
#undef FDNN_N64
  } else {
    static_assert(kN == 128, "N is 16, 32, 64 or 128");
#define FDNN_N128                                                                               \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, " \
  "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, "  \
  "%38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, "  \
  "%56, %57, %58, %59, %60, %61, %62, %63}, {%64, %65, %66, %67}, %68, p, 1, 1, 0;\n}\n"
    if constexpr (kMath == TensorCoreMath::Fp16) {
      asm volatile(FDNN_WGMMA_PREDICATE
                   "69, 0;\n"
                   "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 " FDNN_N128
                   : FDNN_D8(0), FDNN_D8(8), FDNN_D8(16), FDNN_D8(24), FDNN_D8(32), FDNN_D8(40),
                     FDNN_D8(48), FDNN_D8(56)
                   : FDNN_A_DESC_ONE);
    } else {
      asm volatile(FDNN_WGMMA_PREDICATE
                   "69, 0;\n"
                   "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 " FDNN_N128
                   : FDNN_D8(0), FDNN_D8(8), FDNN_D8(16), FDNN_D8(24), FDNN_D8(32), FDNN_D8(40),
                     FDNN_D8(48), FDNN_D8(56)
                   : FDNN_A_DESC_ONE);
    }
#undef FDNN_N128
  }
}

#undef FDNN_A_DESC_ONE
#undef FDNN_D8
#undef FDNN_WGMMA_PREDICATE

#endif  // __CUDA_ARCH_FEAT_SM90_ALL

}  // namespace fusednn::cuda::wgmma
