// SPDX-License-Identifier: Apache-2.0
// The device side of launch_dependent_kernel() (launch.hpp), programmatic dependent launch on
// compute capability 9.0 and newer: such a kernel may start while the kernel before it on its
// stream is still finishing, so it stages only weights and sets up its own shared memory before
// wait_for_previous_grid(). Launched without the attribute, the wait returns at once.
#pragma once

namespace fusednn::cuda {

// Blocks the calling thread until every kernel this launch depends on has completed and its
// memory operations are visible.
__device__ __forceinline__ void wait_for_previous_grid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Lets the next dependent kernel on the stream begin launching (its own wait still waits for
// this kernel to complete).
__device__ __forceinline__ void allow_next_grid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

}  // namespace fusednn::cuda
