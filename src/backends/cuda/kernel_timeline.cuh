// Phase stamps for latency probes (bench/cuda/*_timeline.cu): a kernel file compiled with
// FUSEDNN_KERNEL_TIMELINE defined stamps %globaltimer (ns) and the SM's clock at each phase, from
// thread 0 of one chosen block; the probe reads both arrays back (their ratio is the SM clock
// the kernel ran at). In the library the macros are empty. A launch's slot is the count of
// launches that finished stamping, so launches must not overlap: run the probes of dependent
// launches with FUSEDNN_CUDA_DEPENDENT_LAUNCH=0.
#pragma once

namespace fusednn::cuda {

constexpr int kTimelineSlots = 256;  // launches kept, by launch count
constexpr int kTimelinePhases = 48;  // stamps a launch may take

#ifdef FUSEDNN_KERNEL_TIMELINE
__device__ unsigned long long kernel_timeline[kTimelineSlots][kTimelinePhases];
__device__ long long kernel_timeline_clocks[kTimelineSlots][kTimelinePhases];
__device__ unsigned int kernel_timeline_launches;
// Stamps `phase` where `stamping` holds (thread 0 of the chosen block); the stamp of `last_phase`
// closes the launch's slot.
#define FDNN_TIMELINE(stamping, phase, last_phase)                                     \
  do {                                                                                 \
    if (threadIdx.x == 0 && (stamping)) {                                              \
      unsigned long long now;                                                          \
      asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));                          \
      const unsigned int slot = kernel_timeline_launches % kTimelineSlots;             \
      kernel_timeline[slot][phase] = now;                                              \
      kernel_timeline_clocks[slot][phase] = clock64();                                 \
      if ((phase) == (last_phase)) ++kernel_timeline_launches;                         \
    }                                                                                  \
  } while (0)
#else
#define FDNN_TIMELINE(stamping, phase, last_phase) \
  do {                                             \
  } while (0)
#endif

}  // namespace fusednn::cuda
