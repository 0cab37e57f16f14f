#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The shape sweep (bench/sweep.py) on the GPU machine in one call of at most 600 s: builds
# libfusednn alone (reusing build-gpu/ on a warm machine), then runs the sweep for the time left.
# The sweep's state lives in build-gpu/sweep/ (build-gpu/sweep-quick/ with --quick), which a warm
# machine keeps between calls: call it again to continue where the last call stopped. Each call
# copies sweep.json, sweep.csv, sweep.md and sweep.log into $OUT.
#
#   bash bench/run_sweep_on_gpu.sh            # the full sweep: run it until summary.txt says
#                                             # "complete" (two calls on a warm machine)
#   bash bench/run_sweep_on_gpu.sh --quick    # about 60 points, one call
#
# Extra arguments go to bench/sweep.py. Environment: OUT (default /tmp/fusednn_sweep_out),
# TOTAL_BUDGET (seconds for the whole call, default 570), SWEEP_RESUME (a sweep.json from an
# earlier call, brought back and carried, e.g. .carry/sweep.json, to continue on a fresh machine).
# nlohmann-json comes from .carry/ as for bench/run_on_gpu.sh: pass carry: [".carry"].
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
ROOT=$PWD
OUT=${OUT:-/tmp/fusednn_sweep_out}
mkdir -p "$OUT"
TOTAL_BUDGET=${TOTAL_BUDGET:-570}
START=$(date +%s)
SUMMARY="$OUT/summary.txt"
: >"$SUMMARY"
note() { echo "== [$(($(date +%s) - START))s] $*" | tee -a "$SUMMARY"; }
left() { echo $((TOTAL_BUDGET - ($(date +%s) - START))); }
export PYTHONUNBUFFERED=1

BUILD=build-gpu
LIB=$ROOT/$BUILD/src/api/libfusednn.so
BUILD_LOG="$OUT/sweep.log"
: >"$BUILD_LOG"
# As in run_on_gpu.sh: each call copies the tree with older file times than the objects built
# from it, so a file whose content changed since this script's last build is touched first. Its
# own hash list: run_on_gpu.sh's decides what that script rebuilds.
# Until this script has built once, run_on_gpu.sh's list says what the last build saw.
HASHES=$BUILD/source_hashes_sweep.txt
SEEN=$HASHES
[[ -f $SEEN ]] || SEEN=$BUILD/source_hashes.txt
if [[ -f $SEEN ]]; then
  sha1sum --check --quiet "$SEEN" 2>/dev/null | sed -n 's/: FAILED$//p' |
    while IFS= read -r changed; do touch -- "$changed"; done
fi
if [[ ! -f $BUILD/CMakeCache.txt ]]; then
  note "configure $BUILD (library only; run_on_gpu.sh turns the tests back on)"
  timeout 120 cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFUSEDNN_WITH_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DFUSEDNN_BUILD_TOOLS=OFF -DFUSEDNN_BUILD_TESTS=OFF \
    "-DCMAKE_PREFIX_PATH=$ROOT/.carry" >>"$BUILD_LOG" 2>&1 || note "configure FAILED"
fi
note "build libfusednn"
if timeout 400 cmake --build "$BUILD" -j "$(nproc)" --target fusednn >>"$BUILD_LOG" 2>&1; then
  find src include cmake CMakeLists.txt -type f -print0 2>/dev/null | xargs -0 sha1sum >"$HASHES"
  note "build ok"
else
  note "build FAILED (see sweep.log)"
  grep -E "error" "$BUILD_LOG" | head -20 >>"$SUMMARY"
fi
[[ -f $LIB ]] || { note "no $LIB: nothing to run"; exit 1; }

STATE=$BUILD/sweep
[[ " $* " == *" --quick "* ]] && STATE=$BUILD/sweep-quick
mkdir -p "$STATE"
if [[ ! -f $STATE/sweep.json && -n ${SWEEP_RESUME:-} && -f $SWEEP_RESUME ]]; then
  cp "$SWEEP_RESUME" "$STATE/sweep.json"
  note "continuing from $SWEEP_RESUME"
fi
# The sweep stops starting points 25 s before its budget and writes its outputs. It is run
# again at once if the CUDA context broke (exit 3) or the process died of a signal (a crash):
# the point it was on is recorded as failed, so each restart gets further.
rc=3
while ((rc == 3 || (rc > 128 && rc != 137))) && (($(left) > 90)); do
  budget=$(($(left) - 25))
  note "sweep (time budget ${budget}s, state $STATE)"
  timeout --kill-after=10 $((budget + 15)) python3 -u bench/sweep.py --library "$LIB" \
    --out "$STATE" --time-budget "$budget" "$@" 2>&1 | tee -a "$BUILD_LOG" |
    grep -vE "^\[[0-9]+/" >>"$SUMMARY"
  rc=${PIPESTATUS[0]}
  note "sweep exit status $rc"
done
case $rc in
  0) note "complete: every point of this selection is recorded" ;;
  2 | 124 | 137) note "incomplete: run this script again (same machine, or SWEEP_RESUME) to continue" ;;
  *) note "sweep failed (exit $rc): see sweep.log" ;;
esac
for file in sweep.json sweep.csv sweep.md; do
  [[ -f $STATE/$file ]] && cp "$STATE/$file" "$OUT/"
done
[[ -f $STATE/sweep.md ]] && head -c 6000 "$STATE/sweep.md" && echo
tail -c 3000 "$SUMMARY"
