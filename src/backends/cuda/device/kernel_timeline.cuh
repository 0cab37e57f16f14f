// SPDX-License-Identifier: Apache-2.0
// Phase stamps for latency probes (bench/cuda/*_timeline.cu): a kernel file compiled with
// FUSEDNN_KERNEL_TIMELINE defined stamps %globaltimer (ns) and the SM's clock at each phase, from
// thread 0 of one chosen block; the probe reads both arrays back (their ratio is the SM clock
// the kernel ran at). In the library the macros are empty. A launch's slot is the count of
// launches that finished stamping, so launches must not overlap: such a build makes no dependent
// launches (launch.hpp's kDependentLaunches).
#pragma once

namespace fusednn::cuda {

constexpr int kTimelineSlots = 256;  // launches kept, by launch count
constexpr int kTimelinePhases = 48;  // stamps a launch may take

#ifdef FUSEDNN_KERNEL_TIMELINE
__device__ unsigned long long kernel_timeline[kTimelineSlots][kTimelinePhases];
__device__ long long kernel_timeline_clocks[kTimelineSlots][kTimelinePhases];
__device__ unsigned int kernel_timeline_launches;
// Stamps `phase` where `stamping` holds (thread 0 of the chosen block) in launch `launch`'s slot;
// the stamp of `last_phase` closes the slot. FDNN_TIMELINE reads the launch count at each stamp;
// FDNN_TIMELINE_OF takes it read once at entry (timeline_launch()): after an L1 invalidation
// (every cluster-scope acquire) each read waits on L2, which would distort short phases such as
// conv_net's.
__device__ __forceinline__ unsigned int timeline_launch() { return kernel_timeline_launches; }
#define FDNN_TIMELINE_OF(launch, stamping, phase, last_phase)               \
  do {                                                                      \
    if (threadIdx.x == 0 && (stamping)) {                                   \
      unsigned long long now;                                               \
      asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));               \
      const unsigned int slot = (launch) % kTimelineSlots;                  \
      kernel_timeline[slot][phase] = now;                                   \
      kernel_timeline_clocks[slot][phase] = clock64();                      \
      if ((phase) == (last_phase)) kernel_timeline_launches = (launch) + 1; \
    }                                                                       \
  } while (0)
#define FDNN_TIMELINE(stamping, phase, last_phase) \
  FDNN_TIMELINE_OF(kernel_timeline_launches, stamping, phase, last_phase)
// Per-tile stamps for persistent kernels (warpgroup_mlp_timeline.cu): the calling thread stamps
// %globaltimer for `phase` of its worker's `tile`-th tile (counted from 0 in the worker's own
// order) in this block; FDNN_BLOCK_STAMP stamps block-wide phases (entry, weights ready).
constexpr int kTileTimelineBlocks = 160, kTileTimelineWorkers = 4, kTileTimelineTiles = 64;
constexpr int kTileTimelinePhases = 12, kBlockTimelinePhases = 2;
__device__ unsigned long long tile_timeline[kTileTimelineBlocks][kTileTimelineWorkers]
                                           [kTileTimelineTiles][kTileTimelinePhases];
__device__ unsigned long long block_timeline[kTileTimelineBlocks][kBlockTimelinePhases];
__device__ __forceinline__ unsigned long long timeline_now() {
  unsigned long long now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  return now;
}
#define FDNN_TILE_STAMP(worker, tile, phase)                               \
  do {                                                                     \
    if (blockIdx.x < kTileTimelineBlocks && (tile) < kTileTimelineTiles && \
        (phase) < kTileTimelinePhases) {                                   \
      tile_timeline[blockIdx.x][worker][tile][phase] = timeline_now();     \
    }                                                                      \
  } while (0)
#define FDNN_BLOCK_STAMP(phase)                                 \
  do {                                                          \
    if (threadIdx.x == 0 && blockIdx.x < kTileTimelineBlocks) { \
      block_timeline[blockIdx.x][phase] = timeline_now();       \
    }                                                           \
  } while (0)
#else
#define FDNN_TIMELINE(stamping, phase, last_phase) \
  do {                                             \
  } while (0)
__device__ __forceinline__ unsigned int timeline_launch() { return 0; }
#define FDNN_TIMELINE_OF(launch, stamping, phase, last_phase) \
  do {                                                        \
  } while (0)
#define FDNN_TILE_STAMP(worker, tile, phase) \
  do {                                       \
  } while (0)
#define FDNN_BLOCK_STAMP(phase) \
  do {                          \
  } while (0)
#endif

}  // namespace fusednn::cuda
