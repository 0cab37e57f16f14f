#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The Python package installed the way a user installs it, each way into a fresh venv:
#   pip install ./bindings/python [PIP_ARGS...]   and   pip install . [PIP_ARGS...]   (the root)
# (scikit-build-core fetches from PyPI, builds libfusednn with the project's CMake and bundles it),
# then, with no FUSEDNN_LIBRARY, no LD_LIBRARY_PATH and from outside the checkout: the package
# must load the library from inside the venv, and samples/02_python_numpy must classify the digits
# test slice exactly as PyTorch did. With --expect-cuda, the bundled library must also see a GPU
# (run it on a machine with nvcc and a GPU to check that the CUDA backend was chosen).
#
# Not part of tools/run_tests.sh: it compiles the library once for each way (minutes on 2 cores).
# Usage: tests/python_package/run_pip_install.sh [--expect-cuda] [--only bindings|root]
#                                                 [PIP_ARGS...]
#   e.g.  tests/python_package/run_pip_install.sh -C cmake.define.FUSEDNN_WITH_CUDA=OFF
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
expect_cuda=0
sources=(bindings root)
while (($#)); do
  case "$1" in
    --expect-cuda) expect_cuda=1; shift ;;
    --only)
      [[ "${2:-}" == bindings || "${2:-}" == root ]] ||
        { echo "run_pip_install.sh: --only takes bindings or root, not '${2:-}'" >&2; exit 2; }
      sources=("$2"); shift 2 ;;
    *) break ;;
  esac
done

work="$(mktemp -d "${TMPDIR:-/tmp}/fusednn-pip.XXXXXX")"
trap 'rm -rf "$work"' EXIT

# Installs the package from $2 into a fresh venv under $work/$1 and checks it there.
install_and_check() {
  local name="$1" source="$2"
  shift 2
  local venv="$work/$name/venv"
  mkdir -p "$work/$name"
  python3 -m venv "$venv"
  local start=$SECONDS
  env -u FUSEDNN_LIBRARY -u FUSEDNN_BUNDLE_LIBRARY "$venv/bin/pip" install -q "$source" "$@"
  echo "run_pip_install.sh: pip install $source took $((SECONDS - start)) s"

  (
    cd "$work/$name"
    env -u FUSEDNN_LIBRARY -u LD_LIBRARY_PATH -u PYTHONPATH PYTHONNOUSERSITE=1 \
      EXPECT_CUDA="$expect_cuda" "$venv/bin/python" - <<'PYTHON'
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
      "$venv/bin/python" "$root/samples/02_python_numpy/classify_digits.py" \
      --digits "$root/models/digits"
  )
}

for source in "${sources[@]}"; do
  case "$source" in
    bindings) install_and_check bindings "$root/bindings/python" "$@" ;;
    root) install_and_check root "$root" "$@" ;;
  esac
done
echo "run_pip_install.sh: passed (${sources[*]})"
