#!/usr/bin/env bash
# The main job: build libfusednn (release) and classify the bundled digits test slice with the
# bundled MLP and LeNet-5, on the GPU when one is present, else on the CPU.
set -euo pipefail
cd "$(dirname "$0")/.."

tools/install_dependencies.sh
cmake --preset release >/dev/null
cmake --build --preset release --target fusednn fusednn_cli
export FUSEDNN_LIBRARY="$PWD/build/release/src/api/libfusednn.so"
export PYTHONPATH="$PWD/bindings/python/src${PYTHONPATH:+:$PYTHONPATH}"
python3 tools/demo_digits.py "$@"
