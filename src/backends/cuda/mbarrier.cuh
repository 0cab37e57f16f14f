// The mbarrier waits and shared-memory addresses the cluster kernels share (the small-batch
// Linear's cluster form, the small-batch MLP's cluster form): sm_90 and newer only.
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

#define FDNN_TRY_WAIT_PARITY_ZERO(scope)                                               \
  "{\n.reg .pred p;\nmbarrier.try_wait.parity" scope ".shared::cta.b64 p, [%1], 0;\n" \
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
#endif

}  // namespace fusednn::cuda
