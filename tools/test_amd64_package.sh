#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The amd64 .deb packages, whose library has the CUDA backend (preset package-amd64), built and
# checked on a machine without a GPU:
#
#   1. builds the preset: the fusednn target alone, Release, with this machine's nvcc, for the
#      GPUs in the preset's CMAKE_CUDA_ARCHITECTURES (machine code for each, PTX of the newest);
#   2. tests/package/test_deb.sh on that build: the packages' fields, files and lintian, `dpkg -i`
#      (as root), the consumers and the C and C++ samples built against the installed files and
#      run (on the CPU: no GPU here), device=auto running on the CPU and device=cuda refused with
#      the message docs/install.md gives;
#   3. the runtime package's GPU relations: it recommends the driver (libcuda.so.1) of a branch
#      that runs the CUDA 13 runtime and suggests the cuBLAS package holding the libcublasLt soname
#      the library loads; the library needs no CUDA library (readelf: the CUDA runtime is linked
#      in) and names that soname for dlopen;
#   4. the packaged library's GPU code, with tools/check_gpu_code.sh: machine code for every
#      listed architecture in every module and for every kernel, PTX of the newest in every
#      module. cuobjdump comes from PyPI (nvidia-cuda-cuobjdump, pinned) into build/cuobjdump-13:
#      the CUDA toolkit installed here has the compiler but not cuobjdump.
#
# Prints how many seconds each step took. Usage: tools/test_amd64_package.sh
# Exits 0 when every check passes, 1 otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}"
build=build/package-amd64
cuobjdump_version=13.2.51
cuobjdump_prefix=build/cuobjdump-13
cuobjdump="$cuobjdump_prefix/nvidia/cu13/bin/cuobjdump"
# What the package must say for the CUDA major it is built with (cmake/packaging.cmake).
expected_cuda_major=13
expected_recommends="libcuda1 (>= 580) | libcuda.so.1 (>= 580)"

failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
pass() { echo "ok: $*"; }
step_start=$SECONDS
timings=""
step_done() { timings+="  $1: $((SECONDS - step_start)) s"$'\n'; step_start=$SECONDS; }

# ---- 1. the library --------------------------------------------------------------------------

cmake --preset package-amd64 >/dev/null
cmake --build --preset package-amd64
step_done "build (preset package-amd64, the fusednn target)"
cache_value() { sed -n "s/^$1:[A-Z]*=//p" "$build/CMakeCache.txt"; }
cuda_version="$(sed -n 's/^set(CMAKE_CUDA_COMPILER_VERSION "\(.*\)")$/\1/p' \
  "$build"/CMakeFiles/*/CMakeCUDACompiler.cmake | head -n1)"
architectures="$(cache_value CMAKE_CUDA_ARCHITECTURES)"
# "75-real;...;120-real;120-virtual" -> machine code for 75,...,120 and PTX for 120.
real_list="$(tr ';' '\n' <<<"$architectures" | sed -n 's/-real$//p' | paste -sd,)"
ptx_list="$(tr ';' '\n' <<<"$architectures" | sed -n 's/-virtual$//p' | paste -sd,)"
[[ -n "$real_list" && "$ptx_list" =~ ^[0-9]+$ ]] ||
  { echo "test_amd64_package.sh: CMAKE_CUDA_ARCHITECTURES '$architectures' is not a list of" \
         "NN-real targets and one NN-virtual" >&2; exit 1; }
echo "nvcc $cuda_version, architectures $architectures"
[[ "${cuda_version%%.*}" == "$expected_cuda_major" ]] ||
  fail "built with CUDA $cuda_version; this script expects the relations of CUDA $expected_cuda_major"

# ---- 2. the packages, installed and used -----------------------------------------------------

tests/package/test_deb.sh "$build" || fail "tests/package/test_deb.sh $build"
step_done "packages: build, lint, install, consumers and samples (test_deb.sh)"
runtime_deb="$(ls "$build"/packages/libfusednn[0-9]*_amd64.deb)"
dpkg-deb --info "$runtime_deb"

# ---- 3. the CUDA relations -------------------------------------------------------------------

recommends="$(dpkg-deb --field "$runtime_deb" Recommends)"
suggests="$(dpkg-deb --field "$runtime_deb" Suggests)"
expected_suggests="libcublas-$expected_cuda_major-$(cut -d. -f2 <<<"$cuda_version") | libcublaslt$expected_cuda_major"
[[ "$recommends" == "$expected_recommends" ]] && pass "Recommends: $recommends" ||
  fail "Recommends is '$recommends', not '$expected_recommends'"
[[ "$suggests" == "$expected_suggests" ]] && pass "Suggests: $suggests" ||
  fail "Suggests is '$suggests', not '$expected_suggests'"
unpacked="$(mktemp -d "${TMPDIR:-/tmp}/fusednn-amd64.XXXXXX")"
trap 'rm -rf "$unpacked"' EXIT
dpkg-deb -x "$runtime_deb" "$unpacked"
library="$(ls "$unpacked"/usr/lib/x86_64-linux-gnu/libfusednn.so.*.*.*)"
needed="$(readelf -d "$library" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | sort | paste -sd' ')"
[[ "$needed" =~ (cuda|cublas) ]] && fail "the library needs a CUDA library: $needed" ||
  pass "needed libraries (no CUDA one: the runtime is linked in): $needed"
# The soname is a string of its own (NUL-terminated) among the library's constants.
loaded="$(grep -a -o -P 'libcublasLt\.so\.[0-9]+(?=\x00)' "$library" | sort -u | paste -sd' ')"
[[ "$loaded" == "libcublasLt.so.$expected_cuda_major" ]] &&
  pass "cuBLASLt is loaded as $loaded, which the suggested packages hold" ||
  fail "the library names '$loaded' for cuBLASLt, not libcublasLt.so.$expected_cuda_major"
echo "$(basename "$runtime_deb"): $(du -k "$runtime_deb" | cut -f1) KB; the library" \
  "$(du -k "$library" | cut -f1) KB unpacked"
step_done "the CUDA relations"

# ---- 4. the GPU code of the packaged library ---------------------------------------------------

if [[ ! -x "$cuobjdump" ]]; then
  python3 -m pip install -q --disable-pip-version-check --target "$cuobjdump_prefix" \
    "nvidia-cuda-cuobjdump==$cuobjdump_version"
fi
tools/check_gpu_code.sh --cuobjdump "$cuobjdump" --ptx "$ptx_list" "$library" "$real_list" ||
  fail "the packaged library's GPU code (tools/check_gpu_code.sh)"
step_done "GPU code check (cuobjdump)"

echo "seconds per step:"
printf '%s' "$timings"
if ((failures)); then
  echo "test_amd64_package.sh: $failures check(s) FAILED"
  exit 1
fi
echo "test_amd64_package.sh: the amd64 packages with the CUDA backend pass"
