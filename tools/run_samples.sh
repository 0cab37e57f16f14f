#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds and runs every sample in samples/ against an INSTALLED fusednn, the way a user would:
#
#   1. builds the library in BUILD_DIR if needed (default build/dev, configured by
#      `cmake --preset dev`) and installs it with `cmake --install` into a temporary prefix;
#   2. C and C++ samples: builds them twice, with find_package(fusednn) (samples/CMakeLists.txt)
#      and with a plain compiler call using `pkg-config --cflags --libs fusednn`, and runs both;
#   3. Python: builds a wheel with the installed library bundled in it (FUSEDNN_BUNDLE_LIBRARY),
#      installs it into a fresh venv and runs 02_python_numpy there with no FUSEDNN_LIBRARY and no
#      LD_LIBRARY_PATH; 03_python_torch runs with the system python3 (it skips without torch or
#      a GPU);
#   4. Rust (cargo, offline) and C# (mcs + mono) samples against the same prefix.
#
# Prints one line per sample (PASS, SKIP or FAIL, with the log's tail on a failure) and closes
# with "N passed, N failed, N skipped". Exits 1 when any sample failed, 2 on a usage error.
# A sample skips by printing a line that starts with "SKIP:" and exiting 0.
#
# Usage: tools/run_samples.sh [BUILD_DIR] [--only SAMPLE]...
#   BUILD_DIR  the library's CMake build folder (default: build/dev); built when needed.
#   --only     run only this sample (a folder name in samples/, e.g. 00_hello_c); repeatable.
# Work files (sample builds, the wheel, the venv, logs) go to BUILD_DIR/run_samples/.
# Environment: CC, CXX (compilers for the pkg-config builds), CMAKE_BUILD_PARALLEL_LEVEL
# (default: the number of processors), FUSEDNN_SAMPLE_TIMEOUT (seconds per sample run, default 300).
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"

usage() { sed -n '3,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }

all_samples=(00_hello_c 01_cpp_raii 02_python_numpy 03_python_torch 04_rust 05_csharp 06_threads
             07_cuda_stream 08_jetson_camera_loop)
samples=("${all_samples[@]}")
build_dir=""
only=()
while (($#)); do
  case "$1" in
    --only) [[ $# -ge 2 ]] || { echo "run_samples.sh: --only needs a sample name" >&2; exit 2; }
            only+=("$2"); shift 2 ;;
    --only=*) only+=("${1#--only=}"); shift ;;
    -h|--help) usage; exit 0 ;;
    -*) echo "run_samples.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) [[ -z "$build_dir" ]] || { echo "run_samples.sh: one BUILD_DIR only" >&2; exit 2; }
       build_dir="$1"; shift ;;
  esac
done
for name in "${only[@]}"; do
  [[ " ${samples[*]} " == *" $name "* ]] || {
    echo "run_samples.sh: no sample '$name'; the samples are: ${samples[*]}" >&2; exit 2; }
done
((${#only[@]})) && samples=("${only[@]}")

default_build="$root/build/dev"
if [[ -z "$build_dir" ]]; then
  build_dir="$default_build"
else
  mkdir -p "$build_dir" && build_dir="$(cd "$build_dir" && pwd)"
fi
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}"
sample_timeout="${FUSEDNN_SAMPLE_TIMEOUT:-300}"

# Every sample folder must have a runner here, so that a new sample is never silently left out.
for folder in "$root"/samples/[0-9][0-9]_*/; do
  folder="$(basename "$folder")"
  [[ " ${all_samples[*]} " == *" $folder "* ]] || {
    echo "run_samples.sh: samples/$folder has no runner in tools/run_samples.sh" >&2; exit 2; }
done

# ---- the library: build if needed, install into a temporary prefix --------------------------

# The project's installer (apt, pip) runs only when something is missing, so a prepared machine
# without a package index works as well as a fresh one.
if ! command -v cmake >/dev/null || ! command -v pkg-config >/dev/null ||
   ! command -v c++ >/dev/null || ! python3 -c 'import numpy' 2>/dev/null; then
  "$root/tools/install_dependencies.sh" || exit 1
fi
configure_library() {
  if [[ "$build_dir" == "$default_build" ]]; then
    (cd "$root" && cmake --preset dev)
  else
    cmake -S "$root" -B "$build_dir" -DCMAKE_BUILD_TYPE=Release -DFUSEDNN_BUILD_TESTS=OFF
  fi
}
if [[ ! -f "$build_dir/CMakeCache.txt" ]]; then
  if ! configure_library; then
    echo "run_samples.sh: configuring failed; installing the build dependencies and trying again"
    # The dev preset builds the tests too (GoogleTest).
    "$root/tools/install_dependencies.sh" --tests && configure_library || exit 1
  fi
fi

work="$build_dir/run_samples"
mkdir -p "$work"
# One run at a time per build folder: a second waits for the first.
exec 9>"$work/.lock"
flock 9 2>/dev/null || true
rm -rf "$work/logs" "$work/cmake" "$work/pkg-config" "$work/csharp" "$work/python"
mkdir -p "$work/logs"

echo "run_samples.sh: building the library in $build_dir"
cmake --build "$build_dir" >"$work/logs/library-build.log" 2>&1 || {
  tail -n 40 "$work/logs/library-build.log"
  echo "run_samples.sh: the library did not build (log: $work/logs/library-build.log)"
  echo "0 passed, ${#samples[@]} failed, 0 skipped"
  exit 1
}

prefix="$(mktemp -d "${TMPDIR:-/tmp}/fusednn-samples.XXXXXX")"
trap 'rm -rf "$prefix"' EXIT
if ! cmake --install "$build_dir" --prefix "$prefix" >"$work/logs/install.log" 2>&1; then
  cat "$work/logs/install.log"
  echo "run_samples.sh: cmake --install failed"
  echo "0 passed, ${#samples[@]} failed, 0 skipped"
  exit 1
fi
library="$(find "$prefix" -name 'libfusednn.so' | head -n1)"
pc_file="$(find "$prefix" -name 'fusednn.pc' | head -n1)"
if [[ -z "$library" ]]; then
  echo "run_samples.sh: the install put no libfusednn.so under $prefix"
  echo "0 passed, ${#samples[@]} failed, 0 skipped"
  exit 1
fi
lib_dir="$(dirname "$library")"
if readelf -d "$library" 2>/dev/null | grep -Eq 'lib(a|ub|t)san'; then
  echo "run_samples.sh: $build_dir is a sanitizer build; the samples need a plain one (build/dev)" >&2
  exit 2
fi
echo "run_samples.sh: installed into $prefix (temporary)"
# Whatever the caller's environment points at, the samples must use the installed copy.
unset FUSEDNN_LIBRARY FUSEDNN_LIB_DIR FUSEDNN_DIR FUSEDNN_LIBRARY_DIR PYTHONPATH
export LD_LIBRARY_PATH="$lib_dir"

# ---- running and reporting ------------------------------------------------------------------

passed=0 failed=0 skipped=0

# run_step LOG COMMAND...: runs one program, appending its output to LOG. Returns 0 (pass),
# 1 (fail) or 2 (skip: exit 0 and a line starting with "SKIP:").
run_step() {
  local log="$1" start_line
  shift
  start_line=$(($(wc -l <"$log") + 1))
  echo "\$ $*" >>"$log"
  timeout "$sample_timeout" "$@" >>"$log" 2>&1
  local status=$?
  if ((status == 124)); then echo "(timed out after ${sample_timeout} s)" >>"$log"; fi
  if ((status != 0)); then return 1; fi
  if tail -n "+$start_line" "$log" | grep -q '^SKIP:'; then return 2; fi
  return 0
}

# report NAME OUTCOME NOTE: the sample's line; a failure also shows the end of its log.
report() {
  local name="$1" outcome="$2" note="$3" log="$work/logs/$1.log"
  printf '%-4s  %-16s %s\n' "$outcome" "$name" "$note"
  case "$outcome" in
    PASS) passed=$((passed + 1)) ;;
    SKIP) skipped=$((skipped + 1))
          grep -m1 '^SKIP:' "$log" | sed 's/^/      /' ;;
    FAIL) failed=$((failed + 1))
          tail -n 25 "$log" | sed 's/^/      | /'
          echo "      (full log: $log)" ;;
  esac
}

# combine OUTCOME...: FAIL if any failed, else PASS if any passed, else SKIP.
combine() {
  local outcome="SKIP"
  for part in "$@"; do
    case "$part" in
      1) echo FAIL; return ;;
      0) outcome="PASS" ;;
    esac
  done
  echo "$outcome"
}
word() { case "$1" in 0) echo pass ;; 1) echo FAIL ;; 2) echo skip ;; esac; }

# ---- C and C++: find_package and pkg-config ---------------------------------------------------

declare -A program=([00_hello_c]=hello_c [01_cpp_raii]=cpp_raii [06_threads]=threads
                    [07_cuda_stream]=cuda_stream [08_jetson_camera_loop]=camera_loop)
declare -A source=([00_hello_c]=hello.c [01_cpp_raii]=raii.cpp [06_threads]=threads.cpp
                   [07_cuda_stream]=cuda_stream.cpp [08_jetson_camera_loop]=camera_loop.cpp)
cmake_configured=""

configure_cmake_samples() {
  [[ -n "$cmake_configured" ]] && return "$cmake_configured"
  local log="$work/logs/cmake-configure.log"
  cmake -S "$root/samples" -B "$work/cmake" -DCMAKE_PREFIX_PATH="$prefix" \
        -DCMAKE_BUILD_TYPE=Release >"$log" 2>&1
  cmake_configured=$?
  # find_package must have taken the package just installed, not another copy on the machine.
  if ((cmake_configured == 0)) &&
     ! grep -q "^fusednn_DIR:PATH=$prefix/" "$work/cmake/CMakeCache.txt"; then
    echo "find_package(fusednn) found $(grep '^fusednn_DIR' "$work/cmake/CMakeCache.txt"), not $prefix" >>"$log"
    cmake_configured=1
  fi
  return "$cmake_configured"
}

# The CUDA toolkit for 07_cuda_stream's and 08_jetson_camera_loop's pkg-config builds: its include/ and lib folders, if any.
cuda_flags=()
find_cuda_runtime() {
  local nvcc candidates=("${CUDA_PATH:-}" "${CUDA_HOME:-}")
  nvcc="$(command -v nvcc 2>/dev/null)" && candidates+=("$(dirname "$(dirname "$(readlink -f "$nvcc")")")")
  candidates+=(/usr/local/cuda)
  for cuda in "${candidates[@]}"; do
    [[ -n "$cuda" && -f "$cuda/include/cuda_runtime.h" ]] || continue
    for lib in "$cuda/lib64" "$cuda/lib" "$cuda/targets/x86_64-linux/lib"; do
      if [[ -e "$lib/libcudart.so" ]]; then
        cuda_flags=(-DFUSEDNN_SAMPLE_WITH_CUDA_RUNTIME "-I$cuda/include" "-L$lib" -lcudart
                    "-Wl,-rpath,$lib")
        return
      fi
    done
  done
}
find_cuda_runtime

run_c_sample() {
  local name="$1" log="$work/logs/$1.log" by_cmake by_pkg note
  : >"$log"
  # 1. find_package(fusednn 0.4) and fusednn::fusednn.
  if configure_cmake_samples; then
    by_cmake=1
    if run_step "$log" cmake --build "$work/cmake" --target "${program[$name]}"; then
      run_step "$log" "$work/cmake/$name/${program[$name]}"
      by_cmake=$?
    fi
  else
    cat "$work/logs/cmake-configure.log" >>"$log"
    by_cmake=1
  fi

  # 2. A plain compiler call with pkg-config's flags.
  local flags libdir binary="$work/pkg-config/${program[$name]}" compiler std extra=()
  mkdir -p "$work/pkg-config"
  [[ -n "$pc_file" ]] && PKG_CONFIG_PATH="$(dirname "$pc_file")" && export PKG_CONFIG_PATH
  if [[ -z "$pc_file" ]] || ! pkg-config --atleast-version=0.3 fusednn >>"$log" 2>&1; then
    echo "pkg-config cannot find fusednn 0.3 in $prefix" >>"$log"
    by_pkg=1
  else
    read -ra flags <<<"$(pkg-config --cflags --libs fusednn)"
    libdir="$(pkg-config --variable=libdir fusednn)"
    case "$name" in
      00_hello_c) compiler="${CC:-cc}" std=-std=c99
                  extra=("-DFUSEDNN_SAMPLE_DIR=\"$root/samples/$name\"" -lm) ;;
      06_threads) compiler="${CXX:-c++}" std=-std=c++17 extra=(-pthread) ;;
      07_cuda_stream) compiler="${CXX:-c++}" std=-std=c++17 extra=("${cuda_flags[@]}") ;;
      08_jetson_camera_loop) compiler="${CXX:-c++}" std=-std=c++17
                             extra=("-DFUSEDNN_SAMPLE_MODELS_DIR=\"$root/models/digits\"" -pthread
                                    "${cuda_flags[@]}") ;;
      *) compiler="${CXX:-c++}" std=-std=c++17 ;;
    esac
    by_pkg=1
    if run_step "$log" "$compiler" "$std" -O2 -Wall -Wextra -Wpedantic \
         -o "$binary" "$root/samples/$name/${source[$name]}" "${flags[@]}" \
         "-Wl,-rpath,$libdir" "${extra[@]}"; then
      run_step "$log" "$binary"
      by_pkg=$?
    fi
  fi
  note="(find_package: $(word $by_cmake), pkg-config: $(word $by_pkg))"
  report "$name" "$(combine $by_cmake $by_pkg)" "$note"
}

# ---- Python ------------------------------------------------------------------------------------

# Builds the wheel with the library bundled and installs it into a fresh venv; prints how.
prepare_wheel_venv() {
  local log="$1" python_src="$root/bindings/python" wheel_dir="$work/python/wheel"
  local venv="$work/python/venv"
  mkdir -p "$work/python"
  # scikit-build-core configures the project from the checkout (cmake.source-dir) in a build
  # folder of its own; FUSEDNN_BUNDLE_LIBRARY makes it bundle the installed library, compiling
  # nothing.
  if ! run_step "$log" env FUSEDNN_BUNDLE_LIBRARY="$library" python3 -m pip wheel -q --no-deps \
         -w "$wheel_dir" "$python_src"; then
    echo "(retrying without build isolation, with the scikit-build-core installed here)" >>"$log"
    run_step "$log" env FUSEDNN_BUNDLE_LIBRARY="$library" python3 -m pip wheel -q --no-deps \
      --no-build-isolation -w "$wheel_dir" "$python_src" || return 1
  fi
  local wheel
  wheel="$(find "$wheel_dir" -name 'fusednn-*.whl' | head -n1)"
  [[ -n "$wheel" ]] || { echo "no wheel was written" >>"$log"; return 1; }
  local listing
  listing="$(python3 -m zipfile -l "$wheel")"
  echo "$listing" >>"$log"
  [[ "$listing" == *fusednn/lib/libfusednn* ]] || {
    echo "$wheel holds no fusednn/lib/libfusednn*" >>"$log"; return 1; }
  run_step "$log" python3 -m venv "$venv" || return 1
  # numpy (the one dependency) comes from the package index. Offline, the venv is given the
  # folder holding python3's own numpy, after its own site-packages (python3 may itself be a
  # venv, whose packages --system-site-packages would not show).
  if ! run_step "$log" "$venv/bin/python" -m pip install -q --retries 1 "$wheel"; then
    local numpy_site
    numpy_site="$(python3 -c 'import numpy, os; print(os.path.dirname(os.path.dirname(numpy.__file__)))')" ||
      return 1
    echo "(no package index: numpy from $numpy_site)" >>"$log"
    "$venv/bin/python" -c 'import site, sys; print(site.getsitepackages()[0])' >"$work/python/site" &&
      echo "$numpy_site" >"$(cat "$work/python/site")/system-numpy.pth" || return 1
    run_step "$log" "$venv/bin/python" -m pip install -q --no-deps --no-index "$wheel" || return 1
  fi
  # The installed package must load the library inside it and report its version.
  (cd "$work" && run_step "$log" env -u LD_LIBRARY_PATH PYTHONNOUSERSITE=1 "$venv/bin/python" -c '
import sys, fusednn
path = fusednn.library_path()
print(f"fusednn {fusednn.__version__} (library {path})")
sys.exit(0 if path.startswith(sys.prefix) else f"the library came from outside the venv: {path}")
')
}

run_python_numpy() {
  local name=02_python_numpy log="$work/logs/02_python_numpy.log" outcome
  : >"$log"
  if prepare_wheel_venv "$log"; then
    (cd "$work" && run_step "$log" env -u LD_LIBRARY_PATH PYTHONNOUSERSITE=1 \
      "$work/python/venv/bin/python" "$root/samples/$name/classify_digits.py" \
      --digits "$root/models/digits")
    outcome=$?
  else
    echo "the bundled wheel could not be built or installed" >>"$log"
    outcome=1
  fi
  report "$name" "$(combine $outcome)" "(bundled wheel in a fresh venv, no FUSEDNN_LIBRARY)"
}

run_python_torch() {
  local name=03_python_torch log="$work/logs/03_python_torch.log"
  : >"$log"
  run_step "$log" env FUSEDNN_LIBRARY="$library" PYTHONPATH="$root/bindings/python/src" \
    python3 "$root/samples/$name/torch_device_tensors.py" --digits "$root/models/digits"
  report "$name" "$(combine $?)" "(system python3, FUSEDNN_LIBRARY=<prefix>)"
}

# ---- Rust and C# -------------------------------------------------------------------------------

run_rust() {
  local name=04_rust log="$work/logs/04_rust.log" outcome
  : >"$log"
  if ! command -v cargo >/dev/null; then
    echo "cargo is not installed (install a Rust toolchain, 1.77 or newer)" >>"$log"
    outcome=1
  else
    # FUSEDNN_DIR: fusednn-sys links the installed library; --locked keeps Cargo.lock as it is.
    run_step "$log" env FUSEDNN_DIR="$prefix" CARGO_TARGET_DIR="$work/cargo-target" \
      CARGO_NET_OFFLINE=true cargo run --quiet --offline --locked \
      --manifest-path "$root/samples/$name/Cargo.toml"
    outcome=$?
  fi
  report "$name" "$(combine $outcome)" "(cargo, FUSEDNN_DIR=<prefix>)"
}

run_csharp() {
  local name=05_csharp log="$work/logs/05_csharp.log" out="$work/csharp" outcome=1
  : >"$log"
  if ! command -v mcs >/dev/null || ! command -v mono >/dev/null; then
    echo "run_samples.sh: installing Mono (mono-complete) from Debian; this takes a few minutes"
    local sudo=""
    [[ $(id -u) -ne 0 ]] && sudo="sudo"
    { $sudo apt-get update -q && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q \
        mono-complete; } >>"$log" 2>&1
  fi
  mkdir -p "$out"
  # The binding's sources as bindings/csharp/run_tests.sh builds them, then the sample.
  if run_step "$log" mcs -target:library -unsafe -optimize+ -warn:4 -warnaserror \
       -out:"$out/FusedNN.dll" "$root"/bindings/csharp/FusedNN/*.cs &&
     run_step "$log" mcs -target:exe -warn:4 -warnaserror -r:"$out/FusedNN.dll" \
       -r:System.Core.dll -out:"$out/Sample.exe" "$root/samples/$name/Program.cs"; then
    run_step "$log" mono --debug "$out/Sample.exe"
    outcome=$?
  fi
  report "$name" "$(combine $outcome)" "(mcs + mono, LD_LIBRARY_PATH=<prefix>/lib)"
}

# ---- all of them -------------------------------------------------------------------------------

echo
for name in "${samples[@]}"; do
  case "$name" in
    00_hello_c|01_cpp_raii|06_threads|07_cuda_stream|08_jetson_camera_loop) run_c_sample "$name" ;;
    02_python_numpy) run_python_numpy ;;
    03_python_torch) run_python_torch ;;
    04_rust) run_rust ;;
    05_csharp) run_csharp ;;
  esac
done
echo
echo "logs: $work/logs"
echo "$passed passed, $failed failed, $skipped skipped"
((failed == 0))
