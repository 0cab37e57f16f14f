#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The main job: build libfusednn and classify the bundled digits test slice with the bundled MLP
# and LeNet-5, on the GPU when one is present, else on the CPU.
set -euo pipefail
cd "$(dirname "$0")/.."

tools/install_dependencies.sh
# The release preset's folder (build/release, where the README's CLI commands look), with the
# library and the CLI only. With a GPU, the CUDA backend for this GPU only (the preset alone builds
# every architecture, which takes long on a small machine); without one, the CPU backend alone.
options=(-DFUSEDNN_BUILD_TESTS=OFF)
if command -v nvcc >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  options+=(-DFUSEDNN_WITH_CUDA=ON "-DCMAKE_CUDA_ARCHITECTURES=${CUDAARCHS:-native}")
else
  options+=(-DFUSEDNN_WITH_CUDA=OFF)
fi
preset=release
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}"
cmake --preset "$preset" "${options[@]}" >/dev/null
cmake --build --preset "$preset" --target fusednn fusednn_cli
export FUSEDNN_LIBRARY="$PWD/build/$preset/src/api/libfusednn.so"
export PYTHONPATH="$PWD/bindings/python/src${PYTHONPATH:+:$PYTHONPATH}"
python3 tools/demo_digits.py "$@"
