#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The Python package installed the way a user installs it, into a fresh venv:
#   pip install ./bindings/python [PIP_ARGS...]
# (scikit-build-core fetches from PyPI, builds libfusednn with the project's CMake and bundles it),
# then, with no FUSEDNN_LIBRARY, no LD_LIBRARY_PATH and from outside the checkout: the package
# must load the library from inside the venv, and samples/02_python_numpy must classify the digits
# test slice exactly as PyTorch did. With --expect-cuda, the bundled library must also see a GPU
# (run it on a machine with nvcc and a GPU to check that the CUDA backend was chosen).
#
# Not part of tools/run_tests.sh: it compiles the library once more (a few minutes on 2 cores).
# Usage: tests/python_package/run_pip_install.sh [--expect-cuda] [PIP_ARGS...]
#   e.g.  tests/python_package/run_pip_install.sh -C cmake.define.FUSEDNN_WITH_CUDA=OFF
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
expect_cuda=0
if [[ "${1:-}" == "--expect-cuda" ]]; then expect_cuda=1; shift; fi

work="$(mktemp -d "${TMPDIR:-/tmp}/fusednn-pip.XXXXXX")"
trap 'rm -rf "$work"' EXIT
python3 -m venv "$work/venv"
start=$SECONDS
env -u FUSEDNN_LIBRARY -u FUSEDNN_BUNDLE_LIBRARY "$work/venv/bin/pip" install -q \
  "$root/bindings/python" "$@"
echo "run_pip_install.sh: pip install took $((SECONDS - start)) s"

cd "$work"
env -u FUSEDNN_LIBRARY -u LD_LIBRARY_PATH -u PYTHONPATH PYTHONNOUSERSITE=1 \
  EXPECT_CUDA="$expect_cuda" "$work/venv/bin/python" - <<'PYTHON'
import os, sys
import fusednn
path = fusednn.library_path()
print(f"fusednn {fusednn.__version__}, library {path}, GPUs {fusednn.cuda_device_count()}")
if not path.startswith(sys.prefix):
    sys.exit(f"the library came from outside the venv: {path}")
if os.environ["EXPECT_CUDA"] == "1" and fusednn.cuda_device_count() == 0:
    sys.exit("--expect-cuda: the bundled library sees no GPU (built without the CUDA backend?)")
PYTHON
env -u FUSEDNN_LIBRARY -u LD_LIBRARY_PATH -u PYTHONPATH PYTHONNOUSERSITE=1 \
  "$work/venv/bin/python" "$root/samples/02_python_numpy/classify_digits.py" \
  --digits "$root/models/digits"
