#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds fusednn as a dependency of a parent project, twice: through add_subdirectory and through
# FetchContent (tests/consumers/*/CMakeLists.txt), CPU-only and Release, each with the C sample
# (samples/00_hello_c) linked against fusednn::fusednn. For each it checks, besides what the
# parent's configure checks (parent_settings.cmake), that the build made only the library and the
# sample (no test, benchmark or tool executable), that fusednn's objects were compiled without
# warning flags, and that the sample runs and passes its own checks.
#
# Usage: tests/consumers/run_consumers.sh [WORK_DIR]   (default: build/consumers)
# Environment: CMAKE_BUILD_PARALLEL_LEVEL (default: the number of processors).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
work="${1:-$root/build/consumers}"
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc 2>/dev/null || echo 2)}"

failures=0
fail() { echo "FAIL ($1): $2"; failures=$((failures + 1)); }

for consumer in add_subdirectory fetch_content; do
  build="$work/$consumer"
  log="$work/$consumer.log"
  rm -rf "$build"
  mkdir -p "$build"
  start=$SECONDS
  if ! cmake -S "$root/tests/consumers/$consumer" -B "$build" -DCMAKE_BUILD_TYPE=Release \
         -DFUSEDNN_SOURCE_DIR="$root" -DFUSEDNN_WITH_CUDA=OFF >"$log" 2>&1; then
    tail -n 30 "$log"
    fail "$consumer" "the parent project did not configure (log: $log)"
    continue
  fi
  if ! cmake --build "$build" >>"$log" 2>&1; then
    tail -n 30 "$log"
    fail "$consumer" "the parent project did not build (log: $log)"
    continue
  fi
  # fusednn's binary folder inside the parent's: add_subdirectory(... fusednn) or FetchContent's.
  fusednn_build="$build/fusednn"
  [[ "$consumer" == fetch_content ]] && fusednn_build="$build/_deps/fusednn-build"
  [[ -d "$fusednn_build/src" ]] || fail "$consumer" "no fusednn build in $fusednn_build"
  for folder in tests bench samples tools; do
    [[ ! -e "$fusednn_build/$folder" ]] || fail "$consumer" "fusednn built its $folder/ folder"
  done
  extra="$(find "$build" -type f -executable \( -name 'fusednn_*' -o -name 'fusednn' \) \
             ! -name '*.so*' -print)"
  [[ -z "$extra" ]] || fail "$consumer" "executables besides the sample: $extra"
  warned="$(find "$fusednn_build" -name flags.make -exec \
              grep -l -E -- '(^| )-W(all|extra|error|pedantic|shadow)' {} + || true)"
  [[ -z "$warned" ]] || fail "$consumer" "fusednn compiled with warning flags in: $warned"
  if "$build/sample/hello_c" >>"$log" 2>&1; then
    echo "PASS ($consumer): library and sample built and run in $((SECONDS - start)) s"
  else
    tail -n 20 "$log"
    fail "$consumer" "the sample failed (log: $log)"
  fi
done
((failures == 0))
