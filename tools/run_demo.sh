#!/usr/bin/env bash
# The main job: build libfusednn and classify the bundled digits test slice with the bundled MLP
# and LeNet-5, on the GPU when one is present, else on the CPU.
set -euo pipefail
cd "$(dirname "$0")/.."

tools/install_dependencies.sh
# With a GPU, build the CUDA backend for this GPU only (the release preset alone builds every
# architecture, which takes long on a small machine); without one, the CPU backend alone.
if command -v nvcc >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  preset=release
  export CUDAARCHS=${CUDAARCHS:-native}
else
  preset=cpu-only
fi
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset" --target fusednn fusednn_cli
export FUSEDNN_LIBRARY="$PWD/build/$preset/src/api/libfusednn.so"
export PYTHONPATH="$PWD/bindings/python/src${PYTHONPATH:+:$PYTHONPATH}"
python3 tools/demo_digits.py "$@"
