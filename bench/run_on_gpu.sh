#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Everything the CUDA backend needs a GPU for, on the GPU machine (STAGES below splits it in two):
#   build (sm_90 only) -> CUDA tests (+ the API and golden suites) -> the precision contract
#   (bench/cuda/check_precision.py) -> benchmark -> compute-sanitizer memcheck and racecheck on
#   the CUDA tests (quick batch sizes).
# Each phase has a time cap and the whole script stays under TOTAL_BUDGET seconds; a phase that
# fails or runs out of time is recorded and the next one still runs. Logs go to $OUT (8 files at
# most: summary.txt first).
#
# Dependencies the GPU machine lacks travel in .carry/ (git-ignored): nlohmann-json's headers and
# CMake config (.carry/include, .carry/share/cmake) and GoogleTest's sources (.carry/googletest),
# built here first. Prepare them on the development machine with:
#   mkdir -p .carry/include .carry/share/cmake && cp -r /usr/include/nlohmann .carry/include/ &&
#   cp -r /usr/share/cmake/nlohmann_json .carry/share/cmake/ && cp -r /usr/src/googletest .carry/
# and pass carry: [".carry"].
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=${OUT:-/tmp/fusednn_gpu_out}
mkdir -p "$OUT"
TOTAL_BUDGET=${TOTAL_BUDGET:-560}
START=$(date +%s)
SUMMARY="$OUT/summary.txt"
: >"$SUMMARY"
JOBS=$(nproc)

note() { echo "== [$(($(date +%s) - START))s] $*" | tee -a "$SUMMARY"; }
left() { echo $((TOTAL_BUDGET - ($(date +%s) - START))); }
# STAGES: a comma-separated subset of build,tests,bench,profile,sanitize (default: all). Everything
# no longer fits one 600 s call, so run it as two on a warm machine (the build stays there):
#   STAGES=build,tests,sanitize   then   STAGES=bench,profile   (the second reuses build-gpu/).
want() { [[ ",${STAGES:-all}," == *",all,"* || ",${STAGES:-all}," == *",$1,"* ]]; }
# phase NAME CAP LOG command...: runs with a cap of min(CAP, time left - 5 s)
phase() {
  local name=$1 cap=$2 log=$3
  shift 3
  local budget
  budget=$(left)
  budget=$((budget - 5))
  ((budget < cap)) && cap=$budget
  if ((cap < 10)); then
    note "$name: SKIPPED (no time left)"
    return 1
  fi
  note "$name: start (cap ${cap}s)"
  timeout --kill-after=5 "$cap" "$@" >>"$log" 2>&1
  local rc=$?
  if ((rc == 124 || rc == 137)); then
    note "$name: TIMED OUT after ${cap}s (see $(basename "$log"))"
  elif ((rc != 0)); then
    note "$name: FAILED rc=$rc (see $(basename "$log"))"
  else
    note "$name: ok"
  fi
  return $rc
}

{
  echo "date: $(date -u +%FT%TZ)"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv
  nvcc --version | tail -2
  g++ --version | head -1
  cmake --version | head -1
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
} >>"$SUMMARY" 2>&1

BUILD_LOG="$OUT/build.log"
DEPS=/tmp/fusednn_deps
# A warm machine keeps build-gpu/ between calls, but each call copies the tree afresh with its
# files' own times, older than the objects built from them: ninja would not rebuild a file that
# changed in between (2026-11-28: a library built from a patched conv_net.cu was tested in place
# of main's). So each file whose content differs from what the last build saw is touched first.
SOURCE_HASHES=build-gpu/source_hashes.txt
hash_sources() {
  find src include tests bench tools cmake CMakeLists.txt CMakePresets.json -type f -print0 \
    2>/dev/null | xargs -0 sha1sum
}
if want build; then
if [[ -f $SOURCE_HASHES ]]; then
  sha1sum --check --quiet "$SOURCE_HASHES" 2>/dev/null | sed -n 's/: FAILED$//p' |
    while IFS= read -r changed; do touch -- "$changed"; done
fi
phase "googletest build" 120 "$BUILD_LOG" bash -c "
  cmake -S .carry/googletest -B /tmp/gtest-build -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_INSTALL_PREFIX=$DEPS -DCMAKE_POSITION_INDEPENDENT_CODE=ON &&
  cmake --build /tmp/gtest-build -j $JOBS && cmake --install /tmp/gtest-build"
phase "configure" 60 "$BUILD_LOG" cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DFUSEDNN_WITH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DFUSEDNN_BUILD_TOOLS=OFF \
  -DFUSEDNN_BUILD_TESTS=ON -DFUSEDNN_FAULT_INJECTION=OFF "-DCMAKE_PREFIX_PATH=$ROOT/.carry;$DEPS"
# The hashes only after a whole build: one cut short may have left a changed file's old object,
# which the next run must still see as changed.
if phase "build" 300 "$BUILD_LOG" cmake --build build-gpu -j "$JOBS" --target fusednn \
  fusednn_cuda_tests fusednn_cuda_internal_tests fusednn_cuda_typed_io_tests fusednn_api_tests \
  fusednn_golden_tests; then
  hash_sources >"$SOURCE_HASHES"
fi
grep -E "error|warning" "$BUILD_LOG" | head -20 >>"$SUMMARY"
fi

BUILD=build-gpu
TESTS=$BUILD/tests/backends/cuda/fusednn_cuda_tests
TEST_LOG="$OUT/tests.log"
if want tests && [[ -x $TESTS ]]; then
  # A failing test is reported and the run goes on: the benchmarks still time every form, and a
  # new form stays behind a knob until its tests pass here.
  if ! phase "CUDA tests" 200 "$TEST_LOG" "$TESTS"; then
    grep -E "^\[  FAILED|Failure|Expected|Which is|error:" "$TEST_LOG" | head -40 >>"$SUMMARY"
  fi
  grep -E "^\[  (PASSED|FAILED|SKIPPED) |tests? ran" "$TEST_LOG" | head -60 >>"$SUMMARY"
  phase "CUDA internal tests" 60 "$TEST_LOG" "$BUILD/tests/backends/cuda/fusednn_cuda_internal_tests"
  grep -E "\[ cuBLASLt \]|^\[  (PASSED|FAILED) " "$TEST_LOG" | tail -20 >>"$SUMMARY"
  # The typed (float16 / bfloat16) I/O tests first ran here on 2026-11-23 (third session).
  # Separate phases: a crash in one suite leaves the others' results.
  phase "typed I/O tests" 60 "$TEST_LOG" "$BUILD/tests/backends/cuda/fusednn_cuda_typed_io_tests"
  phase "API tests" 60 "$TEST_LOG" "$BUILD/tests/api/fusednn_api_tests"
  phase "golden tests" 60 "$TEST_LOG" "$BUILD/tests/golden/fusednn_golden_tests"
  grep -E "^\[  (PASSED|FAILED) " "$TEST_LOG" | tail -8 >>"$SUMMARY"
  # The Python binding's tests, whose torch-on-a-GPU cases skip everywhere else (first run here
  # in the twelfth session). The binding from the tree, not installed: no registry here.
  phase "Python tests" 90 "$TEST_LOG" env PYTHONPATH="$ROOT/bindings/python/src" \
    FUSEDNN_LIBRARY="$ROOT/$BUILD/src/api/libfusednn.so" FUSEDNN_REQUIRE_LIBRARY=1 \
    python3 -m pytest -q -rs tests/python
  grep -E "passed|failed|SKIPPED" "$TEST_LOG" | tail -12 >>"$SUMMARY"
fi

# Registers, spills and the fused kernels' instruction mix (no device time to speak of).
want profile && {
  for name in fused_mlp conv_pool; do
    obj=$(find "$BUILD" -name "$name.cu.o" | head -1)
    if [[ -n $obj ]] && command -v cuobjdump >/dev/null; then
      echo "--- $name.cu.o (sm_90): resource usage and opcode counts over its kernels"
      cuobjdump --dump-resource-usage "$obj" | grep -E "Function|REG|STACK|SHARED|LOCAL" | head -24
      cuobjdump --dump-sass "$obj" | grep -oE '(LDS(\.[0-9A-Z]+)*|FFMA|LDGSTS(\.[A-Z0-9]+)*|LDL|STL)\b' \
        | sort | uniq -c
    fi
  done
} >>"$SUMMARY" 2>&1

LIB=$ROOT/$BUILD/src/api/libfusednn.so
BENCH_LOG="$OUT/bench.log"
if want bench && [[ -f $LIB ]]; then
  # Each precision against the CPU backend in fp32, next to PyTorch in the same precision: one
  # table line per check (about 60, ~15 s), all of it in the summary and the test log.
  : >/tmp/precision_check.txt
  phase "precision check" 40 /tmp/precision_check.txt python3 -u bench/cuda/check_precision.py \
    --library "$LIB"
  cat /tmp/precision_check.txt >>"$TEST_LOG"
  tail -n 80 /tmp/precision_check.txt >>"$SUMMARY"
  phase "latency bench build" 60 "$BENCH_LOG" g++ -std=c++17 -O2 bench/cuda/device_latency.cpp \
    -Iinclude -I/usr/local/cuda/include -L"$BUILD/src/api" -lfusednn -L/usr/local/cuda/lib64 \
    -lcudart -Wl,-rpath,"$ROOT/$BUILD/src/api" -o /tmp/device_latency
  # Cold start by phase, each model first in its own process, with kernels loaded lazily (CUDA's
  # default) and eagerly (with the context, before timing): the difference is module loading.
  : >/tmp/cold_start.jsonl
  phase "cold start build" 60 "$BENCH_LOG" g++ -std=c++17 -O2 bench/cuda/cold_start.cpp \
    -Iinclude -I/usr/local/cuda/include -L"$BUILD/src/api" -lfusednn -L/usr/local/cuda/lib64 \
    -lcudart -Wl,-rpath,"$ROOT/$BUILD/src/api" -o /tmp/cold_start
  if [[ -x /tmp/cold_start ]]; then
    for loading in LAZY EAGER; do
      for model in seed_mlp lenet5; do
        phase "cold start $model $loading" 30 /tmp/cold_start.jsonl env \
          CUDA_MODULE_LOADING=$loading /tmp/cold_start "tests/fixtures/golden/$model/model.safetensors" 3
      done
    done
    cat /tmp/cold_start.jsonl >>"$SUMMARY"
    cat /tmp/cold_start.jsonl >>"$BENCH_LOG"
  fi
  : >/tmp/latency.jsonl
  # SM clock and power once a second while the benchmarks run.
  nvidia-smi dmon -s pc -d 1 >/tmp/dmon.txt 2>&1 &
  DMON=$!
  phase "launch floor" 60 /tmp/latency.jsonl bash -c \
    "nvcc -O2 -arch=sm_90 bench/cuda/launch_floor.cu -o /tmp/launch_floor && /tmp/launch_floor"
  if [[ -x /tmp/device_latency ]]; then
    for args in "seed_mlp 1 1 8" "seed_mlp 1 1 1" "lenet5 1 1 8" "lenet5 1 1 1" "lenet5 1 0 8" \
                "lenet5 8 1 8" "seed_mlp 1024 1 8"; do
      set -- $args
      phase "latency $args" 40 /tmp/latency.jsonl /tmp/device_latency \
        "tests/fixtures/golden/$1/model.safetensors" "$2" "$3" "$4"
    done
    # Each form against the one a knob selects instead (the single-block small-batch MLP, fp32
    # chains on tensor cores, the separate conv and pool kernels, the fused kernel for Linear +
    # GELU); each line says which knob it ran with.
    for args in "SMALL_BATCH_MLP=block seed_mlp 1" "SMALL_BATCH_MLP=block seed_mlp 4" \
                "FP32_TENSOR_CORES=0 seed_mlp 1024" "FP32_TENSOR_CORES=1 seed_mlp 1024" \
                "FP32_TENSOR_CORES=0 seed_mlp 4096" "FP32_TENSOR_CORES=1 seed_mlp 4096" \
                "FP32_TENSOR_CORES=0 seed_mlp 16384" "FP32_TENSOR_CORES=1 seed_mlp 16384" \
                "FP32_TENSOR_CORES=0 seed_mlp 262144" "FP32_TENSOR_CORES=1 seed_mlp 262144" \
                "FUSED_CONV=0 lenet5 1" "FUSED_CONV=0 lenet5 1024" \
                "SINGLE_LAUNCH=0 lenet5 8" "SINGLE_LAUNCH=1 lenet5 1" "SINGLE_LAUNCH=1 lenet5 32" \
                "FUSED_CONV=0 lenet5 16384" "FUSED_CONV=1 lenet5 16384" \
                "CUBLASLT=0 linear_gelu 32" "CUBLASLT=1 linear_gelu 32" \
                "SMALL_BATCH_LINEAR=0 linear_gelu 1" "SMALL_BATCH_LINEAR=1 linear_gelu 1" \
                "SMALL_BATCH_LINEAR=0 linear_gelu 32" "SMALL_BATCH_LINEAR=1 linear_gelu 32" \
                "SINGLE_LAUNCH=0 lenet5 1"; do
      set -- $args
      echo "{\"override\": \"${1,,}\"}" >>/tmp/latency.jsonl
      phase "latency $args" 40 /tmp/latency.jsonl env "FUSEDNN_CUDA_OVERRIDES=${1,,}" /tmp/device_latency \
        "tests/fixtures/golden/$2/model.safetensors" "$3" 1 8
    done
    cat /tmp/latency.jsonl >>"$BENCH_LOG"
    grep '^{' /tmp/latency.jsonl >>"$SUMMARY"
  fi
  # Into the summary and the bench log, not a file of its own: $OUT brings back 8 files at most.
  : >/tmp/elementwise_sweep.jsonl
  phase "elementwise sweep" 60 /tmp/elementwise_sweep.jsonl bash -c \
    "nvcc -O3 -arch=sm_90 bench/cuda/elementwise_sweep.cu -o /tmp/elementwise_sweep && /tmp/elementwise_sweep"
  cat /tmp/elementwise_sweep.jsonl >>"$SUMMARY"
  cat /tmp/elementwise_sweep.jsonl >>"$BENCH_LOG"
  export PYTHONUNBUFFERED=1
  # The cap: the part-1 cases' 230 s and ~70 s for issue #4's (the ceilings, the large batches,
  # the reduced precisions, the knob rows; their only torch.compile is LeNet-5 at batch 1, inside
  # the same 90 s compile budget).
  phase "python bench" 300 "$BENCH_LOG" python3 bench/cuda/bench_cuda.py \
    --library "$LIB" --markdown "$OUT/performance_cuda.md" --json "$OUT/bench_cuda.json" \
    --latency-json /tmp/latency.jsonl --compile-budget 90
  [[ -f $OUT/performance_cuda.md ]] && cat "$OUT/performance_cuda.md" >>"$SUMMARY"
  # What each Python path adds per call (bare ctypes, Context.run_device, BoundRun).
  : >/tmp/python_call_cost.jsonl
  phase "python call cost" 60 /tmp/python_call_cost.jsonl python3 bench/cuda/python_call_cost.py \
    --library "$LIB"
  cat /tmp/python_call_cost.jsonl >>"$SUMMARY"
  kill "$DMON" 2>/dev/null
  { echo "--- nvidia-smi dmon during the benchmarks"; cat /tmp/dmon.txt; } >>"$BENCH_LOG"
fi
# Hardware counters of the fused kernel (batch 1 and 262144) and LeNet-5's kernels.
if want profile && [[ -f $LIB ]]; then
  [[ -x /tmp/device_latency ]] || g++ -std=c++17 -O2 bench/cuda/device_latency.cpp -Iinclude \
    -I/usr/local/cuda/include -L"$BUILD/src/api" -lfusednn -L/usr/local/cuda/lib64 -lcudart \
    -Wl,-rpath,"$ROOT/$BUILD/src/api" -o /tmp/device_latency >>"$BENCH_LOG" 2>&1
  if command -v ncu >/dev/null && [[ -x /tmp/device_latency ]]; then
    NCU="ncu --clock-control none --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats"
    phase "ncu seed b1" 60 "$BENCH_LOG" $NCU -k regex:fused_mlp -c 1 /tmp/device_latency \
      tests/fixtures/golden/seed_mlp/model.safetensors 1 1 1
    phase "ncu seed b262144" 60 "$BENCH_LOG" $NCU -k regex:fused_mlp -c 1 /tmp/device_latency \
      tests/fixtures/golden/seed_mlp/model.safetensors 262144 1 1
    phase "ncu lenet b1024" 60 "$BENCH_LOG" $NCU -c 5 /tmp/device_latency \
      tests/fixtures/golden/lenet5/model.safetensors 1024 0 1
    phase "ncu lenet fused b16384" 60 "$BENCH_LOG" env FUSEDNN_CUDA_OVERRIDES=fused_conv=1 $NCU \
      --section MemoryWorkloadAnalysis -k regex:conv_pool -c 2 /tmp/device_latency \
      tests/fixtures/golden/lenet5/model.safetensors 16384 0 1
    grep -E "^  [a-z_]+.*\(|Duration|SM Frequency|Compute \(SM\) Throughput|Memory Throughput|Achieved Occupancy|Registers Per|Block Limit" \
      "$BENCH_LOG" | tail -60 >>"$SUMMARY"
  fi
fi

if want sanitize && [[ -x $TESTS ]] && command -v compute-sanitizer >/dev/null; then
  export FUSEDNN_CUDA_TEST_QUICK=1
  phase "memcheck" 90 "$OUT/memcheck.log" compute-sanitizer --tool memcheck --leak-check full \
    --error-exitcode 3 "$TESTS" \
    --gtest_filter='*WholeConv*:*Dependent*:*RowOps*:*SeedMlp*:*OffThe*:*LongerThan*:*Convolutions*:*LayerNorm*:*Dags*:*Identity*:*RowsPerSample*:*DevicePath*:*TensorCore*:*SmallBatch*:*Precision*:*Cublas*:*FusedConvPool*:*FusedConvLeNet*:*ImplicitGemm*:*ConvGemm*:*HalfChains*:*WideFirst*:*Tanh*'
  grep -E "ERROR SUMMARY|LEAK SUMMARY|^\[  (PASSED|FAILED) " "$OUT/memcheck.log" | tail -4 >>"$SUMMARY"
  # The kernels that share data through shared memory (the SharedTiles form under racecheck is
  # the slowest part: 90 s was too little on 2026-11-23).
  # RACECHECK_FILTER narrows it (one call cannot racecheck everything since the tensor-core forms).
  phase "racecheck" "${RACECHECK_CAP:-170}" "$OUT/racecheck.log" compute-sanitizer --tool racecheck \
    --error-exitcode 3 "$TESTS" \
    --gtest_filter="${RACECHECK_FILTER:-*Dependent*:*WholeConv*:*RowOps*:*TensorCore*:*SeedMlp*:*SmallBatch*:*FusedConvPool*:*FusedConvLeNet*:*Convolutions*:*LayerNorm*:*Precision*:*RowsPerSample*:*OffThe*:*ImplicitGemm*:*HalfChains*:*WideFirst*}"
  grep -E "RACECHECK SUMMARY|ERROR SUMMARY|^\[  (PASSED|FAILED) " "$OUT/racecheck.log" | tail -4 \
    >>"$SUMMARY"
fi
note "done"
tail -c 11000 "$SUMMARY"
