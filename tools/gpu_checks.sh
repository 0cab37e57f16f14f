#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The GPU side of issue #33, on the GPU machine (docs/gpu-checks.md): the CUDA test suite under
# compute-sanitizer's four tools, the load test, and the allocation-failure and out-of-memory
# tests, in calls of ten minutes at most.
#
# Usage: tools/gpu_checks.sh [--budget S] [--load-seconds S] [--load-threads N] [--shard-cap S]
#                            [--gpus LIST] [--load-gpu K] [--tools LIST] STEP...
# Steps, run in the order given:
#   build         configure and build build-gpu/ (Release, sm_90, -DFUSEDNN_FAULT_INJECTION=ON:
#                 a test build) as bench/run_on_gpu.sh does: ninja, nlohmann-json and googletest
#                 from .carry/ (run_on_gpu.sh says how to prepare it; pass carry: [".carry"])
#   tests         the allocation-failure, out-of-memory and load-test smoke tests, unsanitized
#   suites        the three CUDA suites unsanitized at full batch sizes, as the binaries run by
#                 default and with FUSEDNN_CUDA_TEST_DEFAULT_SELECTION=1 (into tests.log)
#   sanitize      memcheck (with the leak check), racecheck, synccheck and initcheck over every
#                 CUDA test binary, in shards of a few tests each, until the budget is spent (less
#                 a moment for load-collect when it follows); the shards done are kept in
#                 build-gpu/gpu_checks/ (a warm machine keeps it), so the next call goes on where
#                 this one stopped. When a shard times out, the tests it
#                 finished count as done, the test it was running gets a shard of its own and the
#                 rest another; a single test that times out is recorded as such.
#   initcheck-nolt  the tests initcheck reported on, again under initcheck with
#                 FUSEDNN_CUDA_OVERRIDES=cublaslt=0 (cuBLASLt then runs only in tests that pin it)
#   load-start    starts the load test detached (setsid: it outlives the call while the machine
#                 stays warm), for --load-seconds (default 600) with --load-threads (default 8)
#   load-collect  waits for the load test within the budget and reports its summary (or, if it
#                 is still running, how far it got; call again to collect it)
#   status        what is done and what is left
# --racecheck-skip-kernels LIST (comma-separated substrings of kernel names, e.g. nvjet,cublasLt)
# runs the kernels whose names hold one of them unchecked under racecheck
# (--kernel-name-exclude kns=...): cuBLASLt's own kernels, whose shared memory fusednn does not
# touch, take most of racecheck's time in the cuBLASLt tests.
# --skip FILE leaves out of the shards the tests FILE lists as run under each tool: a
# done_tests.tsv an earlier call returned, so that a fresh machine goes on where the last one
# stopped. Its first line is the tree's fingerprint (the library's and the CUDA tests' sources);
# on another tree the list is ignored and every test runs.
# --budget S (default 570) bounds the whole call. --shard-cap S (default 240) bounds one shard.
# --gpus LIST (e.g. 0,1,2; default: the default device) runs one shard at a time on each GPU
# listed (a GPU listed twice gets two workers); --load-gpu K runs the load test on GPU K alone
# (default: the default device). --tools LIST (default memcheck,racecheck,synccheck,initcheck;
# also memcheck-mapped: memcheck with FUSEDNN_CUDA_TEST_HOST_IO=mapped) picks the sanitizer tools
# and the order their shards run in; it applies to the shards a
# machine makes first (build-gpu/gpu_checks/shards_made).
#
# What comes back in $OUT (the device returns 8 files at most): summary.txt (this call's steps
# and the table of every shard so far), shards.tsv (one line a shard), sanitizer_logs.tar.gz (the
# logs of every shard so far, each cut to its last 2 MB), reports.tsv (initcheck's and
# racecheck's reports counted per test and place), done_tests.tsv (the tests run under each tool,
# for --skip), load_test.log, tests.log, build.log.
#
# Two calls on a warm machine, the second within 30 s of the first:
#   tools/gpu_checks.sh --budget 570 build tests load-start sanitize
#   tools/gpu_checks.sh --budget 570 sanitize load-collect
# The load test then runs beside the sanitizer shards: its device-memory check reads its own
# process's memory where nvidia-smi lists it, and otherwise the device's, which then counts the
# shards too (load_test.log says which it read).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
ROOT=$PWD
OUT=${OUT:-/tmp/fusednn_gpu_out}
mkdir -p "$OUT"
START=$(date +%s)
BUDGET=570
LOAD_SECONDS=600
LOAD_THREADS=8
SHARD_CAP=240
GPUS=""
LOAD_GPU=""
TOOL_LIST=memcheck,racecheck,synccheck,initcheck
SKIP_FILE=""
RACECHECK_SKIP_KERNELS=""
STEPS=()
while (($#)); do
  case $1 in
    --budget) BUDGET=$2; shift 2 ;;
    --load-seconds) LOAD_SECONDS=$2; shift 2 ;;
    --load-threads) LOAD_THREADS=$2; shift 2 ;;
    --shard-cap) SHARD_CAP=$2; shift 2 ;;
    --gpus) GPUS=$2; shift 2 ;;
    --load-gpu) LOAD_GPU=$2; shift 2 ;;
    --tools) TOOL_LIST=$2; shift 2 ;;
    --skip) SKIP_FILE=$2; shift 2 ;;
    --racecheck-skip-kernels) RACECHECK_SKIP_KERNELS=$2; shift 2 ;;
    -h|--help) sed -n '3,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    build|tests|suites|sanitize|initcheck-nolt|load-start|load-collect|status)
      STEPS+=("$1"); shift ;;
    *) echo "gpu_checks.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
((${#STEPS[@]})) || STEPS=(status)

BUILD=build-gpu
STATE=$BUILD/gpu_checks
SHARDS=$STATE/shards
LOGS=$STATE/logs
LOAD=$STATE/load
DONE=$STATE/shards.tsv
CLAIMS=$STATE/claims
mkdir -p "$SHARDS" "$LOGS" "$LOAD"
touch "$DONE"
SUMMARY=$OUT/summary.txt
: >"$SUMMARY"
CUDA_TESTS=$BUILD/tests/backends/cuda
BINARIES=(fusednn_cuda_tests fusednn_cuda_internal_tests fusednn_cuda_typed_io_tests)
IFS=, read -ra TOOLS <<<"$TOOL_LIST"
for tool in "${TOOLS[@]}"; do
  case $tool in
    memcheck|racecheck|synccheck|initcheck|memcheck-mapped) ;;
    *) echo "gpu_checks.sh: unknown tool '$tool' in --tools" >&2; exit 2 ;;
  esac
done
# Tests per shard at the start, per tool (racecheck is the slowest by far).
declare -A SHARD_TESTS=([memcheck]=16 [racecheck]=4 [synccheck]=16 [initcheck]=8
  [memcheck-mapped]=16)
# Left out of the sanitizer runs: the out-of-memory tests allocate the whole device, which the
# tools shadow (they run unsanitized in the tests step).
EXCLUDED='DeviceOutOfMemory.*'

note() { echo "== [$(($(date +%s) - START))s] $*" | tee -a "$SUMMARY"; }
left() { echo $((BUDGET - ($(date +%s) - START))); }
wants() { [[ " ${STEPS[*]} " == *" $1 "* ]]; }

{
  echo "gpu_checks.sh ${STEPS[*]} (budget ${BUDGET}s) on $(date -u +%FT%TZ)"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1
  compute-sanitizer --version 2>&1 | tail -1
} >>"$SUMMARY"

# ------------------------------------------------------------------------------------------
step_build() {
  local log=$OUT/build.log deps=/tmp/fusednn_deps jobs
  jobs=$(nproc)
  # Each call copies the tree afresh with older file times than the objects: touch what changed
  # since the last whole build (bench/run_on_gpu.sh keeps the same record).
  local hashes=$BUILD/source_hashes.txt
  if [[ -f $hashes ]]; then
    sha1sum --check --quiet "$hashes" 2>/dev/null | sed -n 's/: FAILED$//p' |
      while IFS= read -r changed; do touch -- "$changed"; done
  fi
  if [[ -z $(find "$deps" -name GTestConfig.cmake 2>/dev/null | head -1) ]]; then
    note "googletest build"
    { cmake -S .carry/googletest -B /tmp/gtest-build -G Ninja -DCMAKE_BUILD_TYPE=Release \
        -DCMAKE_INSTALL_PREFIX=$deps -DCMAKE_POSITION_INDEPENDENT_CODE=ON &&
      cmake --build /tmp/gtest-build -j "$jobs" && cmake --install /tmp/gtest-build; } >>"$log" 2>&1 ||
      { note "googletest build FAILED (is .carry/ carried? see build.log)"; return 1; }
  fi
  note "configure and build (FUSEDNN_FAULT_INJECTION=ON)"
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFUSEDNN_WITH_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DFUSEDNN_BUILD_TOOLS=OFF -DFUSEDNN_BUILD_TESTS=ON \
    -DFUSEDNN_FAULT_INJECTION=ON "-DCMAKE_PREFIX_PATH=$ROOT/.carry;$deps" >>"$log" 2>&1 ||
    { note "configure FAILED (see build.log)"; return 1; }
  local cap
  cap=$(($(left) - 30))
  ((cap < 60)) && { note "build: too little of the budget left"; return 1; }
  if ! timeout --kill-after=10 "$cap" cmake --build "$BUILD" -j "$jobs" --target fusednn \
      "${BINARIES[@]}" fusednn_cuda_load_test >>"$log" 2>&1; then
    note "build FAILED or out of time (see build.log)"
    grep -E "error|FAILED" "$log" | head -20 >>"$SUMMARY"
    return 1
  fi
  find src include tests bench tools cmake CMakeLists.txt CMakePresets.json -type f -print0 \
    2>/dev/null | xargs -0 sha1sum >"$hashes"
  note "build ok"
}

# ------------------------------------------------------------------------------------------
step_tests() {
  local log=$OUT/tests.log
  note "allocation failure (injected), device out of memory, load test smoke"
  timeout 200 "$CUDA_TESTS/fusednn_cuda_internal_tests" --gtest_filter='AllocationFailure.*' \
    >>"$log" 2>&1
  note "  AllocationFailure rc=$?"
  timeout 200 "$CUDA_TESTS/fusednn_cuda_tests" --gtest_filter='DeviceOutOfMemory.*' >>"$log" 2>&1
  note "  DeviceOutOfMemory rc=$?"
  timeout 60 "$CUDA_TESTS/fusednn_cuda_load_test" --threads 4 --seconds 10 --max-batch 1024 \
    --sample-every 1 --warmup 4 >>"$log" 2>&1
  note "  load test smoke (10 s) rc=$?"
  grep -E "^\[ (faults|memory)|^\[  (PASSED|FAILED|SKIPPED) |^SUMMARY|^RESULT" "$log" >>"$SUMMARY"
}

# The three CUDA suites unsanitized at full batch sizes, two ways: as the test binaries run by
# default (tensor cores from the first rows) and on the library's default selection. The fault
# tests run alone in the tests step: they compare the device's free memory.
step_suites() {
  local log=$OUT/tests.log binary way
  local -A ways=([override]="" [default-selection]="FUSEDNN_CUDA_TEST_DEFAULT_SELECTION=1")
  note "suites unsanitized, as the binaries run by default and on the default selection"
  for way in override default-selection; do
    for binary in "${BINARIES[@]}"; do
      {
        echo "---- $binary ($way)"
        env ${ways[$way]} timeout 300 "$CUDA_TESTS/$binary" \
          --gtest_filter="*-$EXCLUDED:AllocationFailure.*"
        echo "rc=$?"
      } >"$STATE/suite.$way.$binary.log" 2>&1 &
    done
    wait
    for binary in "${BINARIES[@]}"; do
      local f=$STATE/suite.$way.$binary.log
      cat "$f" >>"$log"
      note "  $binary ($way): $(grep -E '^\[  PASSED  \]|^\[  FAILED  \] [0-9]' "$f" | tr '\n' ' ')$(tail -1 "$f")"
      grep -E '^\[  FAILED  \] [A-Za-z]' "$f" | sort -u >>"$SUMMARY"
    done
  done
}

# The tests initcheck reported on, again under initcheck with cuBLASLt switched off
# (FUSEDNN_CUDA_OVERRIDES=cublaslt=0): what remains is not on memory cuBLASLt wrote.
step_initcheck_nolt() {
  local binary tests
  [[ -d $STATE/reports ]] || { note "initcheck-nolt: no initcheck shards yet"; return 1; }
  mkdir -p "$STATE/reports-nolt"
  for binary in "${BINARIES[@]}"; do
    tests=$(cat "$STATE"/reports/*"-initcheck.$binary."*.tsv 2>/dev/null | cut -f2 | sort -u |
      grep -v '^$' | paste -sd:)
    [[ -n $tests ]] || continue
    (($(left) > 60)) || { note "initcheck-nolt: out of budget before $binary"; return 1; }
    note "initcheck-nolt: $binary: $(tr ':' '\n' <<<"$tests" | wc -l) tests"
    FUSEDNN_CUDA_OVERRIDES=cublaslt=0 counted_run initcheck $(($(left) - 30)) \
      "$STATE/reports-nolt/$binary.tsv" "$LOGS/initcheck-nolt.$binary.log" "$binary" "$tests"
    note "  rc=$?: $(grep -h 'ERROR SUMMARY' "$LOGS/initcheck-nolt.$binary.log" | tail -1)"
    grep -E '^\[  FAILED  \] [A-Za-z]' "$LOGS/initcheck-nolt.$binary.log" | sort -u >>"$SUMMARY"
  done
}

# ------------------------------------------------------------------------------------------
# The test names of a binary (Suite.Test, parameterised ones included), less the excluded.
list_tests() {
  "$1" --gtest_list_tests --gtest_filter="*-$EXCLUDED" 2>/dev/null | awk '
    /^[^ ]/ { suite = $1; next }
    /^  /   { print suite $1 }'
}

# The sources whose change makes earlier sanitizer results stale: the library's, the tests' and
# their fixtures. The same text on any machine with the same tree.
tree_fingerprint() {
  find src include cmake tests/backends/cuda tests/fixtures tests/CMakeLists.txt CMakeLists.txt \
    -type f -print0 2>/dev/null | LC_ALL=C sort -z | xargs -0 sha1sum | sha1sum | cut -d' ' -f1
}

# The tests a log shows ended (passed, failed or skipped), one name a line; a parameterised
# test's failure line names its parameter after the name.
finished_tests() {
  sed -n -E 's/^\[ *(OK|FAILED|SKIPPED) *\] ([A-Za-z_][^ ,]*\.[^ ,]+)(, where .*)? \([0-9]+ ms\)$/\2/p' \
    "$1"
}

# The tool of a shard named N-TOOL.BINARY.NNN.
shard_tool() {
  local tool=${1#*-}
  echo "${tool%%.*}"
}

# The name a tool's results go under in done_tests.tsv: racecheck with kernels left unchecked is
# "racecheck!LIST", apart from a racecheck of every kernel.
result_key() {
  if [[ $1 == racecheck && -s $STATE/racecheck_skips ]]; then
    echo "racecheck!$(cat "$STATE/racecheck_skips")"
  else
    echo "$1"
  fi
}

# Keeps --skip's file only where it was written on this tree, and keeps its lines on this
# machine ($STATE/skipped.tsv) for every later call's done_tests.tsv.
check_skip_file() {
  [[ -n $SKIP_FILE ]] || return 0
  if [[ ! -f $SKIP_FILE ]]; then
    note "--skip: no file $SKIP_FILE; every test runs"
    SKIP_FILE=""
  elif [[ $(head -1 "$SKIP_FILE") != "fingerprint $(tree_fingerprint)" ]]; then
    note "--skip: $SKIP_FILE is for another tree; every test runs"
    SKIP_FILE=""
  else
    note "--skip: $(($(wc -l <"$SKIP_FILE") - 1)) tool and test pairs run before on this tree"
    {
      tail -n +2 "$SKIP_FILE"
      if [[ -f $STATE/skipped.tsv ]]; then cat "$STATE/skipped.tsv"; fi
    } | awk '!seen[$0]++' >"$STATE/skipped.tsv.new" && mv "$STATE/skipped.tsv.new" "$STATE/skipped.tsv"
  fi
}

# The tests run before on this tree under `tool` as this machine runs it: racecheck of every
# kernel covers a racecheck that leaves some unchecked, not the other way round.
skipped_tests() {
  [[ -f $STATE/skipped.tsv ]] || return 0
  awk -F'\t' -v key="$(result_key "$1")" -v tool="$1" \
    '$1 == key || $1 == tool { print $2 }' "$STATE/skipped.tsv"
}

make_shards() {
  [[ -f $STATE/shards_made ]] && return 0
  local t tool binary n skipped
  printf '%s' "$RACECHECK_SKIP_KERNELS" >"$STATE/racecheck_skips"
  [[ -n $RACECHECK_SKIP_KERNELS ]] &&
    note "racecheck on this machine leaves unchecked the kernels named with: $RACECHECK_SKIP_KERNELS"
  for t in "${!TOOLS[@]}"; do
    tool=${TOOLS[$t]}
    skipped=$(skipped_tests "$tool")
    for binary in "${BINARIES[@]}"; do
      [[ -x $CUDA_TESTS/$binary ]] || { note "no $binary: build first"; return 1; }
      n=${SHARD_TESTS[$tool]}
      list_tests "$CUDA_TESTS/$binary" | grep -vxF -e "$skipped" |
        split -l "$n" -d -a 3 - "$SHARDS/$((t + 1))-$tool.$binary."
    done
  done
  touch "$STATE/shards_made"
}

# done_tests.tsv, for the next machine's --skip: the tests each tool has run to their end on
# this tree, those --skip named included. Under memcheck only the shards that ended count (its
# leak check runs as the process exits); under the other tools every test that ended does, in a
# shard cut short too.
write_done_tests() {
  local file=$OUT/done_tests.tsv shard tool log status
  {
    echo "fingerprint $(tree_fingerprint)"
    if [[ -f $STATE/skipped.tsv ]]; then cat "$STATE/skipped.tsv"; fi
    for log in "$LOGS"/*.log; do
      [[ -f $log ]] || continue
      shard=${log##*/}
      shard=${shard%.log}
      [[ $shard == [0-9]*-*.*.* ]] || continue
      tool=$(shard_tool "$shard")
      if [[ $tool == memcheck* ]]; then
        status=$(awk -F'\t' -v name="$shard" '$1 == name { s = $5 } END { print s }' "$DONE")
        [[ $status == ok || $status == findings || $status == test-failed ]] || continue
      fi
      finished_tests "$log" | awk -v OFS='\t' -v key="$(result_key "$tool")" '{ print key, $0 }'
    done
  } | awk '!seen[$0]++' >"$file"
}

shard_done() { grep -q "^$1	" "$DONE"; }

# The next shard neither done nor taken by another worker of this call; it is claimed for the
# caller (mkdir is atomic).
next_shard() {
  local name
  for name in $(ls "$SHARDS" | sort); do
    shard_done "$name" && continue
    mkdir "$CLAIMS/$name" 2>/dev/null && { echo "$name"; return 0; }
  done
  return 1
}

# Filters a sanitizer's output: passes it on with only the first 200 reports (and every summary
# and dropped-records line), and writes to $1 one line per test, report kind and place (what
# follows " at " on the report's first line that has it, offsets cut: the reading kernel, or
# racecheck's first thread's): count, test, report, place. Tests are told apart by GoogleTest's
# "[ RUN ]" lines; a report the tool prints after the next test has started counts for that one.
count_reports() {
  awk -v table="$1" '
    function settle(place) {
      if (!pending) return
      count[test "\t" kind "\t" place]++
      pending = 0
    }
    /^\[ RUN      \] / { settle("-"); test = $4; print; next }
    /^========= .*(ERROR SUMMARY|RACECHECK SUMMARY|COMPUTE-SANITIZER|LEAK SUMMARY|buffer overflow|were skipped|Target application returned)/ {
      settle("-")
      print
      next
    }
    /^========= [^ ]/ {
      settle("-")
      reports++
      kind = substr($0, 11)
      gsub(/0x[0-9a-fA-F]+/, "#", kind); gsub(/[0-9]+/, "N", kind)
      pending = 1
      if (reports <= 200) print
      next
    }
    /^=========     / && / at / && pending {
      place = substr($0, index($0, " at ") + 4)
      if (place ~ /^0x[0-9a-fA-F]+ in /) sub(/^0x[0-9a-fA-F]+ in /, "", place)
      else sub(/\+0x[0-9a-fA-F]+.*/, "", place)
      gsub(/0x[0-9a-fA-F]+/, "#", place)
      settle(substr(place, 1, 160))
      if (reports <= 200) print
      next
    }
    /^=========/ { if (reports <= 200) print; next }
    { print }
    END {
      settle("-")
      for (key in count) print count[key] "\t" key > table
      if (reports > 200) print "count_reports: " reports " reports printed by the tool, 200 kept here; all counted in " table
    }'
}

# counted_run TOOL CAP TABLE LOG BINARY FILTER: BINARY's tests FILTER (quick batch sizes) under
# compute-sanitizer's initcheck or racecheck for at most CAP seconds, every report printed (no
# host backtraces) through count_reports, which counts them into TABLE and keeps the first 200 in
# LOG; returns the tool's status. The caller's environment reaches the tests.
counted_run() {
  local tool=$1 cap=$2 table=$3 log=$4 binary=$5 filter=$6
  local options=(--tool "$tool" --error-exitcode 3 --print-limit 1000000000 --show-backtrace no)
  local skipped names=()
  if [[ $tool == racecheck ]]; then
    options+=(--racecheck-report all)
    IFS=, read -ra names <<<"$(cat "$STATE/racecheck_skips" 2>/dev/null)"
    for skipped in "${names[@]}"; do
      [[ -n $skipped ]] && options+=(--kernel-name-exclude "kns=$skipped")
    done
  fi
  FUSEDNN_CUDA_TEST_QUICK=1 timeout --kill-after=10 "$cap" compute-sanitizer "${options[@]}" \
    "$CUDA_TESTS/$binary" --gtest_filter="$filter" 2>&1 | count_reports "$table" >"$log"
  return "${PIPESTATUS[0]}"
}

# One sanitizer run over one shard; records a line in shards.tsv unless the budget cut it short.
run_shard() {
  local name=$1 cap=$2
  local tool binary log filter tests begin rc seconds errors hazards failed status
  tool=$(shard_tool "$name")
  binary=${name#*.}
  binary=${binary%%.*}
  log=$LOGS/$name.log
  filter=$(paste -sd: "$SHARDS/$name")
  tests=$(wc -l <"$SHARDS/$name")
  # memcheck-mapped: memcheck with every model that does not choose its own host path created
  # on the mapped one (FUSEDNN_CUDA_TEST_HOST_IO=mapped).
  local sanitizer=${tool%-mapped} host_io=auto
  [[ $tool == *-mapped ]] && host_io=mapped
  begin=$(date +%s)
  if [[ $tool == initcheck || $tool == racecheck ]]; then
    mkdir -p "$STATE/reports"
    counted_run "$tool" "$cap" "$STATE/reports/$name.tsv" "$log" "$binary" "$filter"
    rc=$?
  else
    local options=(--tool "$sanitizer" --error-exitcode 3 --print-limit 200)
    [[ $sanitizer == memcheck ]] && options+=(--leak-check full)
    FUSEDNN_CUDA_TEST_QUICK=1 FUSEDNN_CUDA_TEST_HOST_IO=$host_io timeout --kill-after=10 "$cap" \
      compute-sanitizer "${options[@]}" "$CUDA_TESTS/$binary" --gtest_filter="$filter" >"$log" 2>&1
    rc=$?
  fi
  seconds=$(($(date +%s) - begin))
  errors=$(sed -n 's/.*ERROR SUMMARY: \([0-9]*\) error.*/\1/p' "$log" | tail -1)
  hazards=$(sed -n 's/.*RACECHECK SUMMARY: \([0-9]*\) hazard.*/\1/p' "$log" | tail -1)
  failed=$(sed -n 's/^\[  FAILED  \] \([0-9]*\) tests\{0,1\}, listed below.*/\1/p' "$log" | tail -1)
  if grep -q "Device not supported\|Unable to find injection library" "$log"; then
    note "compute-sanitizer cannot run on this machine ($(grep -m1 -o 'Device not supported\|Unable to find injection library' "$log")); sanitize stops"
    return 2
  fi
  if ((rc == 124 || rc == 137)); then
    if ((cap < SHARD_CAP)); then
      note "  $name: cut at ${cap}s by the budget; it runs again next call"
      return 1
    fi
    # The tests that finished are done; the one that was running gets a shard of its own (a
    # full cap), the rest another.
    local running finished
    running=$(sed -n 's/^\[ RUN      \] \([^ ]*\).*/\1/p' "$log" | tail -1)
    finished=$(finished_tests "$log")
    if [[ -n $running ]] && grep -qxF "$running" <<<"$finished"; then
      status=timeout-after-tests  # every test finished; the tool did not end in time
      tests=$(grep -c . <<<"$finished")
    elif ((tests == 1)) || [[ -z $running ]]; then
      status=timeout
    else
      grep -vxF -f <(printf '%s\n' "$finished" "$running") "$SHARDS/$name" >"$SHARDS/$name.s"
      [[ -s $SHARDS/$name.s ]] || rm -f "$SHARDS/$name.s"
      echo "$running" >"$SHARDS/$name.r"
      tests=$(grep -c . <<<"$finished")
      status=partial
    fi
  elif ((rc == 0)); then
    status=ok
  elif ((rc == 3)) || [[ ${errors:-0} != 0 || ${hazards:-0} != 0 ]]; then
    status=findings
  elif [[ -n $failed && $failed != 0 ]]; then
    status=test-failed
  else
    status=crashed-rc$rc
  fi
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$tool" "$binary" "$tests" "$status" \
    "${errors:--}" "${hazards:--}" "$seconds" >>"$DONE"
  note "  $name: $status, $tests tests, errors ${errors:--}, hazards ${hazards:--}, ${seconds}s"
}

# One worker: shards one after another on the GPU it was given ("" for the default device).
sanitize_worker() {
  local gpu=$1 reserve=$2 name cap
  # A worker with a GPU runs in a subshell of its own (step_sanitize starts it with &).
  [[ -n $gpu ]] && export CUDA_VISIBLE_DEVICES=$gpu
  while name=$(next_shard); do
    cap=$(($(left) - reserve))
    ((cap > SHARD_CAP)) && cap=$SHARD_CAP
    if ((cap < (SHARD_CAP < 45 ? SHARD_CAP : 45))); then
      rmdir "$CLAIMS/$name"
      note "sanitize${gpu:+ (GPU $gpu)}: out of budget; the next call goes on from $name"
      break
    fi
    run_shard "$name" "$cap"
    case $? in
      2) break ;;
      1) rmdir "$CLAIMS/$name" 2>/dev/null ;;  # cut by the budget: the next call runs it
    esac
  done
}

step_sanitize() {
  command -v compute-sanitizer >/dev/null || { note "no compute-sanitizer here"; return 1; }
  # A compute-sanitizer that does not know the kernel filter would fail every racecheck shard
  # (checked only where this machine makes its shards, which records the filter).
  if [[ -n $RACECHECK_SKIP_KERNELS && ! -f $STATE/shards_made ]] &&
    ! compute-sanitizer --tool racecheck --kernel-name-exclude kns=fusednn_none_a \
      --kernel-name-exclude kns=fusednn_none_b true >"$STATE/kernel_filter_check.log" 2>&1; then
    note "--racecheck-skip-kernels: compute-sanitizer refused --kernel-name-exclude ($(head -c 200 "$STATE/kernel_filter_check.log")); every kernel is checked"
    RACECHECK_SKIP_KERNELS=""
  fi
  make_shards || return 1
  # Claims last one call: the workers of an earlier call are gone.
  rm -rf "$CLAIMS" && mkdir -p "$CLAIMS"
  # The shards run while the load test does; load-collect after them needs only a moment (it
  # waits for whatever of the load test is left, within the budget).
  local reserve=20 gpu pids=()
  wants load-collect && reserve=40
  note "sanitize: $(ls "$SHARDS" | wc -l) shards, $(wc -l <"$DONE") done; reserving ${reserve}s${GPUS:+; GPUs $GPUS}"
  if [[ -z $GPUS ]]; then
    sanitize_worker "" "$reserve"
  else
    for gpu in ${GPUS//,/ }; do
      sanitize_worker "$gpu" "$reserve" &
      pids+=($!)
    done
    wait "${pids[@]}"
  fi
  # Whatever is still claimed was cut short; none is left claimed for the next call.
  rm -rf "$CLAIMS" && mkdir -p "$CLAIMS"
  local left_over=0 name
  for name in "$SHARDS"/*; do shard_done "${name##*/}" || left_over=$((left_over + 1)); done
  ((left_over)) || note "sanitize: every shard done"
}

# ------------------------------------------------------------------------------------------
load_running() { [[ -f $LOAD/pid ]] && kill -0 "$(cat "$LOAD/pid")" 2>/dev/null && [[ ! -f $LOAD/rc ]]; }

step_load_start() {
  local binary=$CUDA_TESTS/fusednn_cuda_load_test
  [[ -x $binary ]] || { note "no load test binary: build first"; return 1; }
  if load_running; then
    note "load test already running (pid $(cat "$LOAD/pid"))"
    return 0
  fi
  rm -f "$LOAD/rc" "$LOAD/pid" "$LOAD/load_test.log"
  echo "$LOAD_SECONDS" >"$LOAD/seconds"
  date +%s >"$LOAD/started"
  local visible=${LOAD_GPU:-${CUDA_VISIBLE_DEVICES:-}}
  CUDA_VISIBLE_DEVICES=$visible setsid nohup bash -c '[[ -n $CUDA_VISIBLE_DEVICES ]] ||
    unset CUDA_VISIBLE_DEVICES; echo $$ >"$1/pid"
    "$2" --threads "$3" --seconds "$4" >"$1/load_test.log" 2>&1
    echo $? >"$1/rc"' _ "$LOAD" "$ROOT/$binary" "$LOAD_THREADS" "$LOAD_SECONDS" \
    </dev/null >/dev/null 2>&1 &
  sleep 2
  note "load test started: $LOAD_THREADS threads for ${LOAD_SECONDS}s${LOAD_GPU:+ on GPU $LOAD_GPU} (pid $(cat "$LOAD/pid" 2>/dev/null))"
}

step_load_collect() {
  [[ -f $LOAD/started ]] || { note "no load test was started"; return 1; }
  while load_running && (($(left) > 15)); do sleep 5; done
  cp "$LOAD/load_test.log" "$OUT/load_test.log" 2>/dev/null
  if [[ -f $LOAD/rc ]]; then
    note "load test finished: rc=$(cat "$LOAD/rc") (0 pass, 1 fail, 77 no GPU)"
    grep -E "^load test|^model|^SUMMARY|^RESULT|^MISMATCH" "$LOAD/load_test.log" >>"$SUMMARY"
  else
    note "load test still running after $(($(date +%s) - $(cat "$LOAD/started")))s; collect again"
    tail -n 3 "$LOAD/load_test.log" >>"$SUMMARY" 2>/dev/null
  fi
}

# ------------------------------------------------------------------------------------------
report() {
  {
    echo
    echo "sanitizer shards: $(wc -l <"$DONE") run of $(ls "$SHARDS" | wc -l) made"
    echo "tool       binary                        shards tests status(ok/findings/failed/timed-out/other) errors hazards seconds"
    awk -F'\t' '
      {
        key = $2 " " $3
        shards[key]++; tests[key] += $4; seconds[key] += $8
        if ($5 == "ok") ok[key]++; else if ($5 == "findings") found[key]++;
        else if ($5 == "test-failed") failed[key]++; else if ($5 ~ /^timeout/ || $5 == "partial") slow[key]++;
        else other[key]++
        if ($6 != "-") errors[key] += $6; if ($7 != "-") hazards[key] += $7
      }
      END {
        for (key in shards) {
          split(key, part, " ")
          printf "%-10s %-29s %6d %5d %d/%d/%d/%d/%d %6d %7d %7d\n", part[1], part[2], shards[key],
            tests[key], ok[key], found[key], failed[key], slow[key], other[key], errors[key],
            hazards[key], seconds[key]
        }
      }' "$DONE" | sort
    echo "left to run: $(($(ls "$SHARDS" | wc -l) - $(wc -l <"$DONE"))) shards"
    awk -F'\t' '$5 != "ok" { print "  see " $1 ".log: " $5 }' "$DONE"
    echo "(timed-out counts partial shards, whose finished tests count as run and whose log holds"
    echo " what the tool reported before it was stopped, and single tests that never finished)"
  } >>"$SUMMARY"
  cp "$DONE" "$OUT/shards.tsv"
  write_done_tests
  # initcheck's and racecheck's reports per test and place; "cublaslt=0" marks initcheck-nolt's.
  local table=$OUT/reports.tsv file shard
  printf 'count\ttool\ttest\treport\tplace\trun\n' >"$table"
  {
    for file in "$STATE"/reports/*.tsv "$STATE"/reports-nolt/*.tsv; do
      [[ -f $file ]] || continue
      shard=${file##*/}
      if [[ $file == */reports-nolt/* ]]; then
        awk -F'\t' -v OFS='\t' '{ print $1, "initcheck", $2, $3, $4, "cublaslt=0" }' "$file"
      else
        shard=${shard#*-}
        awk -F'\t' -v OFS='\t' -v tool="${shard%%.*}" '{ print $1, tool, $2, $3, $4, "as is" }' "$file"
      fi
    done
  } | sort -t$'\t' -k1,1nr >>"$table"
  awk -F'\t' 'NR > 1 { key = $2 " (" $6 ")"; total[key] += $1; tests[key FS $3] = 1 }
    END { for (k in tests) { split(k, p, FS); n[p[1]]++ }
          for (k in total) printf "%s: %d reports counted in %d tests\n", k, total[k], n[k] }' \
    "$table" >>"$SUMMARY"
  # Each log cut to its last 2 MB, all in one archive.
  local staged=/tmp/gpu_checks_logs
  rm -rf "$staged" && mkdir -p "$staged"
  for log in "$LOGS"/*.log; do
    [[ -f $log ]] && tail -c 2000000 "$log" >"$staged/$(basename "$log")"
  done
  tar -czf "$OUT/sanitizer_logs.tar.gz" -C "$staged" . 2>/dev/null
}

check_skip_file
for step in "${STEPS[@]}"; do
  case $step in
    build) step_build ;;
    tests) step_tests ;;
    suites) step_suites ;;
    initcheck-nolt) step_initcheck_nolt ;;
    sanitize) step_sanitize ;;
    load-start) step_load_start ;;
    load-collect) step_load_collect ;;
    status) load_running && note "load test running (pid $(cat "$LOAD/pid"))" ;;
  esac
done
report
note "done"
cat "$SUMMARY"
