#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds the libFuzzer harnesses (CMake preset "fuzz": clang, ASan/UBSan, CPU only; only the fuzz
# targets) and runs each in turn on the committed seed corpus plus fresh inputs, in a corpus folder
# that is not committed. Prints the executions per harness; exits nonzero on a finding, naming
# the reproducer. docs/fuzzing.md says what each harness covers.
#
#   tools/fuzz.sh --seconds 10              # the short pass CI runs (10 s per harness)
#   tools/fuzz.sh --runs 10000000           # the long run: 10 million executions per harness
#   tools/fuzz.sh --seconds 600 fuzz_bundle # one harness
#   tools/fuzz.sh --runs 10000000 --jobs 12 # the long run on a machine with cores to spare
#
# Options:
#   --seconds N       run each harness for N seconds (default 10 when --runs is not given)
#   --runs N          run each harness for N executions (with --seconds too: whichever comes
#                     first)
#   --corpus DIR      keep the new inputs under DIR/<harness> (default: a temporary folder,
#                     removed at the end); never the committed tests/fuzz/corpus
#   --findings DIR    where reproducers go (default build/fuzz/findings)
#   --no-build        use the harnesses already built in build/fuzz
#   --jobs N          run N instances of each harness at once on the same corpus, each with
#                     1/N of --runs; the executions reported are their sum (default 1)
# Reproduce a finding: build/fuzz/tests/fuzz/<harness> <reproducer>
set -euo pipefail
cd "$(dirname "$0")/.."

all_harnesses=(fuzz_spec_parser fuzz_safetensors fuzz_weight_directory fuzz_bundle fuzz_set_weight)
seconds=""
runs=""
corpus_root=""
findings="$PWD/build/fuzz/findings"
build=1
jobs=1
harnesses=()
while (($#)); do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    --corpus) corpus_root="$2"; shift 2 ;;
    --findings) findings="$2"; shift 2 ;;
    --no-build) build=0; shift ;;
    --jobs) jobs="$2"; shift 2 ;;
    -h|--help) awk 'NR > 2 && /^#/ { sub(/^# ?/, ""); print; next } NR > 2 { exit }' "$0"; exit 0 ;;
    fuzz_*) harnesses+=("$1"); shift ;;
    *) echo "fuzz.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
((${#harnesses[@]})) || harnesses=("${all_harnesses[@]}")

if ((build)); then
  start=$SECONDS
  cmake --preset fuzz >/dev/null
  cmake --build --preset fuzz
  echo "fuzz build: $((SECONDS - start)) s"
fi

if [[ -z "$corpus_root" ]]; then
  corpus_root=$(mktemp -d "${TMPDIR:-/tmp}/fusednn_fuzz_corpus.XXXXXX")
  trap 'rm -rf "$corpus_root"' EXIT
fi
mkdir -p "$findings"

# The weight-directory harness writes files for every input: on a memory file system when there
# is one.
scratch="${TMPDIR:-/tmp}"
[[ -d /dev/shm && -w /dev/shm ]] && scratch=/dev/shm

[[ "$jobs" =~ ^[1-9][0-9]*$ ]] || { echo "fuzz.sh: --jobs takes a positive count, not '$jobs'" >&2; exit 2; }
[[ -n "$runs" || -n "$seconds" ]] || seconds=10
limit=()
[[ -n "$runs" ]] && limit+=(-runs="$(((runs + jobs - 1) / jobs))")
[[ -n "$seconds" ]] && limit+=(-max_total_time="$seconds")
budget="${runs:+$runs runs}${runs:+${seconds:+, }}${seconds:+$seconds s}"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

status=0
summary=()
for harness in "${harnesses[@]}"; do
  binary="build/fuzz/tests/fuzz/$harness"
  [[ -x "$binary" ]] || { echo "fuzz.sh: $binary is not built" >&2; exit 2; }
  fresh="$corpus_root/$harness"
  mkdir -p "$fresh"
  start=$SECONDS
  echo "=== $harness ($budget$( ((jobs > 1)) && echo ", $jobs at once")) ==="
  # New inputs go to the first folder ($fresh); the committed seeds are only read. Instance k
  # logs to $harness.k.log (one instance: $harness.log).
  pids=()
  logs=()
  for ((k = 1; k <= jobs; k++)); do
    log="$findings/$harness.log"
    ((jobs == 1)) || log="$findings/$harness.$k.log"
    logs+=("$log")
    TMPDIR="$scratch" "$binary" "$fresh" "tests/fuzz/corpus/$harness" -dict=tests/fuzz/fusednn.dict \
      "${limit[@]}" -timeout=25 -rss_limit_mb=2048 -print_final_stats=1 \
      -artifact_prefix="$findings/$harness-" >"$log" 2>&1 &
    pids+=($!)
  done
  result=0
  for pid in "${pids[@]}"; do
    wait "$pid" || result=$?
  done
  executions=0
  for log in "${logs[@]}"; do
    count=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1 || true)
    [[ -n "$count" ]] || { executions="?"; break; }
    executions=$((executions + count))
  done
  if ((result == 0)); then
    verdict="no finding"
  else
    status=1
    reproducer=$(cat "${logs[@]}" | grep -o "Test unit written to [^ ]*" | tail -1 | sed 's/Test unit written to //')
    verdict="FINDING (exit $result): reproducer ${reproducer:-none written}; logs ${logs[*]}"
    cat "${logs[@]}" | grep -m1 -E "ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error|fusednn fuzz:" || true
  fi
  line="$harness: $executions executions in $((SECONDS - start)) s, $verdict"
  echo "$line"
  summary+=("$line")
done

echo
echo "=== fuzz summary ==="
printf '%s\n' "${summary[@]}"
exit $status
