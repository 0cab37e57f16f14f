#!/usr/bin/env bash
# Every test suite: C++ (GoogleTest under CTest, including the public-header Doxygen build, the
# C99 header check and the export-list check), the same suite under ASan/UBSan, a short pass of
# every libFuzzer harness (10 s each on the committed corpus plus fresh inputs; tools/fuzz.sh), and
# the Python, Rust and C# bindings' tests. GPU tests skip with a message where no GPU is present.
set -euo pipefail
cd "$(dirname "$0")/.."

tools/install_dependencies.sh --tests

status=0
run() {
  echo
  echo "=== $* ==="
  "$@" || { echo "FAILED: $*"; status=1; }
}

run cmake --workflow --preset dev
run tools/run_samples.sh build/dev
run cmake --workflow --preset asan
run tools/fuzz.sh --seconds 10

library="$PWD/build/dev/src/api/libfusednn.so"
export FUSEDNN_LIBRARY="$library" FUSEDNN_REQUIRE_LIBRARY=1
run python3 -m pip install -q ./bindings/python
run python3 -m pytest -q tests/python
run bindings/rust/run_tests.sh "$library"
run bindings/csharp/run_tests.sh "$library"

echo
if ((status)); then echo "SOME TEST SUITES FAILED"; else echo "ALL TEST SUITES PASSED"; fi
exit $status
