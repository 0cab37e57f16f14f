// SPDX-License-Identifier: Apache-2.0
// Phase stamps for the cold-start probe (bench/cuda/cold_start.cpp): a library built with
// FUSEDNN_LOAD_TIMELINE defined prints, at each stamp, the microseconds since the previous one
// to stderr, one JSON object per line, so that a first model's load can be split by phase. In
// the library the macro is empty.
#pragma once

#ifdef FUSEDNN_LOAD_TIMELINE
#include <chrono>
#include <cstdio>

namespace fusednn {

inline void stamp_load_phase(const char* phase) {
  using Clock = std::chrono::steady_clock;
  static Clock::time_point previous = Clock::now();
  const Clock::time_point now = Clock::now();
  std::fprintf(stderr, "{\"load_phase\": \"%s\", \"us_since_previous\": %.1f}\n", phase,
               std::chrono::duration<double, std::micro>(now - previous).count());
  previous = Clock::now();  // the print is not the next phase's
}

}  // namespace fusednn

#define FDNN_LOAD_STAMP(phase) ::fusednn::stamp_load_phase(phase)
#else
#define FDNN_LOAD_STAMP(phase) \
  do {                         \
  } while (0)
#endif
