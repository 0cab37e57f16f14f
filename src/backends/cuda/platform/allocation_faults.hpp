// SPDX-License-Identifier: Apache-2.0
// Allocation failure injection, compiled only into test builds (-DFUSEDNN_FAULT_INJECTION=ON):
// a test makes the nth acquisition of device memory, pinned memory, a host registration or an
// instantiated graph fail as an out-of-memory would (device_memory.cpp), and counts what is
// still held, so it can prove that every failure path reports OUT_OF_MEMORY (or, for a host
// registration, falls back to staging) and releases what it had acquired. A library built
// without the option has none of this.
#pragma once

#include <cstdint>

#ifndef FUSEDNN_FAULT_INJECTION
#error "allocation_faults.hpp is for builds configured with -DFUSEDNN_FAULT_INJECTION=ON"
#endif

namespace fusednn::cuda::allocation_faults {

// From now on, the nth acquisition (1: the next one) fails with cudaErrorMemoryAllocation;
// 0: none fails. Resets attempts() and injected().
void fail_nth(int64_t n);

// Acquisitions attempted since the last fail_nth (the failed one included).
int64_t attempts();

// Failures injected since the last fail_nth (0 or 1).
int64_t injected();

// Device allocations, pinned allocations, host registrations and instantiated graphs acquired
// and not yet released by the whole process so far.
int64_t live();

}  // namespace fusednn::cuda::allocation_faults
