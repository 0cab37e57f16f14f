// SPDX-License-Identifier: Apache-2.0
// The mbarrier waits, shared-memory addresses and counted remote stores the cluster kernels share
// (the small-batch Linear's and the small-batch MLP's cluster forms, the whole-network conv
// kernel) and the Warpgroup MLP's input ring: sm_90 and newer only.
#pragma once

#include <cstdint>

namespace fusednn::cuda {

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
__device__ __forceinline__ uint32_t shared_address(const void* pointer) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(pointer));
}

// Whose writes a completed phase makes visible to the waiting thread: its own block's (the
// default acquire) or the whole cluster's (stores other blocks counted on this mbarrier).
enum class AcquireScope { Block, Cluster };

#define FDNN_TRY_WAIT_PARITY_ZERO(scope)             \
  "{\n.reg .pred p;\nmbarrier.try_wait.parity" scope \
  ".shared::cta.b64 p, [%1], 0;\n"                   \
  "selp.u32 %0, 1, 0, p;\n}\n"

// Spins until the mbarrier at `barrier` (a shared address) completes its phase 0.
template <AcquireScope kScope>
__device__ __forceinline__ void wait_for_phase_zero(uint32_t barrier) {
  uint32_t done = 0;
  do {
    if constexpr (kScope == AcquireScope::Cluster) {
      asm volatile(FDNN_TRY_WAIT_PARITY_ZERO(".acquire.cluster")
                   : "=r"(done)
                   : "r"(barrier)
                   : "memory");
    } else {
      asm volatile(FDNN_TRY_WAIT_PARITY_ZERO("") : "=r"(done) : "r"(barrier) : "memory");
    }
  } while (done == 0);
}

#undef FDNN_TRY_WAIT_PARITY_ZERO

// Spins until the mbarrier at `barrier` (a shared address) completes the phase of `parity` (a
// ring of buffers reuses each mbarrier, phase after phase; block scope).
__device__ __forceinline__ void wait_for_parity(uint32_t barrier, uint32_t parity) {
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(barrier), "r"(parity)
        : "memory");
  } while (done == 0);
}

// The same shared-memory location in block `rank` of the cluster.
__device__ __forceinline__ uint32_t in_block(uint32_t address, int rank) {
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(address), "r"(rank));
  return remote;
}

// Initialises the mbarrier at `barrier` for one arrival a phase (the thread that sets the bytes it
// expects).
__device__ __forceinline__ void init_single_arrival(uint32_t barrier) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(barrier) : "memory");
}

// Makes this thread's mbarrier initialisations visible to the cluster (and its copies) before
// anything it does after.
__device__ __forceinline__ void publish_mbarrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

// This thread's arrival on the mbarrier at `barrier` (initialised with a count of 1), expecting
// `bytes` of asynchronous copies or counted stores.
__device__ __forceinline__ void expect_bytes(uint32_t barrier, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(barrier), "r"(bytes)
               : "memory");
}

// `bytes` (a multiple of 16, both addresses on 16 bytes) from global memory into this block's
// shared memory, counted on its mbarrier.
__device__ __forceinline__ void bulk_copy(uint32_t destination, const float* source, uint32_t bytes,
                                          uint32_t barrier) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::
          "r"(destination),
      "l"(source), "r"(bytes), "r"(barrier)
      : "memory");
}

// 4 bytes into another block's shared memory, counted on that block's mbarrier.
__device__ __forceinline__ void store_remote(uint32_t address, float value, uint32_t barrier) {
  asm volatile(
      "st.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [%0], %1, [%2];" ::"r"(address),
      "r"(__float_as_uint(value)), "r"(barrier)
      : "memory");
}
#endif

}  // namespace fusednn::cuda
