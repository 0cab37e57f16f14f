#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The Jetson GPU builds, checked without a Jetson: fetches CUDA 11.8 into build/jetson-cuda-11.8
# (tools/jetson_cuda_dependencies.sh) and nlohmann-json's aarch64 package into build/aarch64-deps
# (tools/aarch64_dependencies.sh), builds each preset (CUDA backend included: jetson-orin and
# jetson-xavier the library and the CLI, jetson the library alone), and checks each library with
# tools/check_jetson_library.sh: an AArch64 ELF exporting what the x86-64 build exports, machine
# code for its GPUs and for every kernel it registers. Then it cross-builds
# samples/08_jetson_camera_loop against each preset's library and the arm64 CUDA runtime, and runs
# it under qemu-aarch64, where it finds no GPU and runs its loop on the CPU backend of the Jetson
# library. No GPU code is run: there is no Jetson GPU here.
# The jetson preset's library (sm_72 and sm_87) is the one the arm64 .deb packages hold: they are
# made and checked by tests/package/test_deb.sh, and the packaged library checked again for both
# GPUs, with the Recommends line.
# Usage: tools/test_jetson.sh X86_64_LIBRARY [PRESET...]
#   (default: jetson-orin jetson-xavier jetson)
set -euo pipefail
cd "$(dirname "$0")/.."
if (($# < 1)); then
  echo "usage: $0 X86_64_LIBRARY [PRESET...]" >&2
  exit 2
fi
x86_library="$1"
shift
presets=("$@")
((${#presets[@]})) || presets=(jetson-orin jetson-xavier jetson)

tools/jetson_cuda_dependencies.sh build/jetson-cuda-11.8
tools/aarch64_dependencies.sh build/aarch64-deps
for preset in "${presets[@]}"; do
  case "$preset" in
    jetson-orin) arch=87 ;;
    jetson-xavier) arch=72 ;;
    jetson) arch=72,87 ;;
    *) echo "unknown preset $preset (jetson-orin, jetson-xavier or jetson)" >&2; exit 2 ;;
  esac
  cmake --preset "$preset"
  start=$SECONDS
  cmake --build --preset "$preset"
  echo "$preset built in $((SECONDS - start)) s"
  FUSEDNN_JETSON_CUDA_PREFIX=build/jetson-cuda-11.8 \
    tools/check_jetson_library.sh "build/$preset/src/api/libfusednn.so" "$arch" "$x86_library"
  cuda_runtime=build/jetson-cuda-11.8/usr
  aarch64-linux-gnu-g++ -std=c++17 -O2 -Wall -Wextra -Wpedantic -Werror -Iinclude \
    samples/08_jetson_camera_loop/camera_loop.cpp -L"build/$preset/src/api" -lfusednn \
    -DFUSEDNN_SAMPLE_WITH_CUDA_RUNTIME -isystem "$cuda_runtime/include" \
    -L"$cuda_runtime/lib/aarch64-linux-gnu" -lcudart -pthread \
    -DFUSEDNN_SAMPLE_MODELS_DIR='"models/digits"' -o "build/$preset/camera_loop"
  qemu-aarch64 -L /usr/aarch64-linux-gnu \
    -E LD_LIBRARY_PATH="build/$preset/src/api:$cuda_runtime/lib/aarch64-linux-gnu" \
    "build/$preset/camera_loop" --frames 10 --fps 100
  echo "$preset: samples/08_jetson_camera_loop built and ran under qemu"
done
# The arm64 .deb packages of the jetson build (GPU code for Xavier and Orin inside): the package
# checks, then the packaged library's GPU code and the driver it recommends.
if [[ " ${presets[*]} " == *" jetson "* ]]; then
  start=$SECONDS
  tests/package/test_deb.sh --arch arm64 build/jetson
  package=$(ls build/jetson/packages/libfusednn0_*_arm64.deb | head -1)
  unpacked=$(mktemp -d)
  trap 'rm -rf "$unpacked"' EXIT
  dpkg-deb -x "$package" "$unpacked"
  FUSEDNN_JETSON_CUDA_PREFIX=build/jetson-cuda-11.8 tools/check_jetson_library.sh \
    "$(ls "$unpacked"/usr/lib/aarch64-linux-gnu/libfusednn.so.0.* | head -1)" 72,87 "$x86_library"
  recommends=$(dpkg-deb -f "$package" Recommends)
  [[ $recommends == *nvidia-l4t-cuda* ]] ||
    { echo "test_jetson.sh: $package recommends '$recommends', not nvidia-l4t-cuda" >&2; exit 1; }
  echo "jetson: the arm64 packages hold the GPU library for sm_72 and sm_87 and recommend" \
    "nvidia-l4t-cuda (packaged and checked in $((SECONDS - start)) s)"
fi
