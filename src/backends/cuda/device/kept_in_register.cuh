// SPDX-License-Identifier: Apache-2.0
// Values a kernel reads once and keeps in a register. The compiler treats a special register
// (threadIdx.x, the block's shared window) as free to read again, and reads it again (S2R, tens
// of cycles) where a loop uses it rather than hold it across the loop; a value a volatile asm
// produced cannot be worked out again, so it stays in its register. The whole-network conv
// kernel's layer path, which is latency-bound at batch 1, uses it.
#pragma once

#include <cstdint>

namespace fusednn::cuda {

// threadIdx.x, read once.
__device__ __forceinline__ int thread_index() {
  int tid;
  asm volatile("mov.u32 %0, %%tid.x;" : "=r"(tid));
  return tid;
}

// `value`, kept in a register from here on.
__device__ __forceinline__ uint32_t kept(uint32_t value) {
  uint32_t result;
  asm volatile("mov.b32 %0, %1;" : "=r"(result) : "r"(value));
  return result;
}

}  // namespace fusednn::cuda
