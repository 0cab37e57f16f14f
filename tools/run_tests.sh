#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Every test suite: the source layout (tools/check_format.sh, clang-format 14), C++ (GoogleTest
# under CTest, including the public-header Doxygen build, the C99 header check, the export-list
# check and the comment and license-line checks), the same C++ suites cross-built for aarch64 and
# run under qemu-aarch64 (and its arm64 .deb packages checked), the Jetson GPU builds (CUDA 11.8,
# sm_87 and sm_72) checked with cuobjdump and readelf, the samples, the amd64 .deb
# packages (their library with the CUDA backend) installed and used and their GPU code checked
# with cuobjdump (tools/test_amd64_package.sh), the README's snippets, fusednn built
# as a dependency of another project (add_subdirectory and FetchContent), the C++ suite under
# ASan/UBSan, a short pass of every libFuzzer harness (tools/fuzz.sh, on the committed corpus plus
# fresh inputs), and the Python, Rust and C# bindings' tests. GPU tests skip with a message where
# no GPU is present.
set -euo pipefail
cd "$(dirname "$0")/.."

tools/install_dependencies.sh --tests

# Builds and test runs use every processor unless the caller sets these.
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}"
export CTEST_PARALLEL_LEVEL="${CTEST_PARALLEL_LEVEL:-$(nproc)}"

status=0
run() {
  echo
  echo "=== $* ==="
  "$@" || { echo "FAILED: $*"; status=1; }
}

run tools/check_format.sh
run cmake --workflow --preset dev
run tools/run_samples.sh build/dev
# The aarch64 cross build under qemu-aarch64, its library compared with the dev build's.
run tools/test_aarch64.sh build/dev/src/api/libfusednn.so
# The Jetson GPU cross builds (CUDA 11.8 fetched from Debian's non-free packages), built and
# inspected: no Jetson GPU runs them here.
run tools/test_jetson.sh build/dev/src/api/libfusednn.so
# The amd64 .deb packages of a Release library with the CUDA backend (preset package-amd64),
# installed and built against, run on the CPU, and their GPU code checked.
run tools/test_amd64_package.sh
run python3 tests/readme/run_readme_snippets.py build/dev
run tests/consumers/run_consumers.sh build/consumers
run cmake --workflow --preset asan
run tools/fuzz.sh --seconds 10

# The Python tests import the binding from bindings/python/src and load the dev build's library
# (tools/run_samples.sh builds and installs the package itself, in a fresh venv).
library="$PWD/build/dev/src/api/libfusednn.so"
export FUSEDNN_LIBRARY="$library" FUSEDNN_REQUIRE_LIBRARY=1
run python3 -m pytest -q tests/python
run bindings/rust/run_tests.sh "$library"
run bindings/csharp/run_tests.sh "$library"

echo
if ((status)); then echo "SOME TEST SUITES FAILED"; else echo "ALL TEST SUITES PASSED"; fi
exit $status
