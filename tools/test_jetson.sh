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
# GPUs, with the Recommends line. That preset builds against Debian 11's glibc 2.31
# (tools/aarch64_glibc_2.31_sysroot.sh) with the C++ runtime linked in, for JetPack 5 (Ubuntu
# 20.04): the packaged library must need no symbol version above GLIBC_2.31, GLIBCXX_3.4.28 and
# CXXABI_1.3.12 (tools/check_symbol_versions.sh, which must refuse the jetson-orin library, built
# against Debian 12, where that preset is built too), its Depends must say so, and the golden check
# and the camera-loop sample, built against the unpacked packages with the same toolchain, must
# run under qemu-aarch64 with glibc 2.31 as the whole C library.
# First, tools/check_cublaslt_cuda12.sh re-checks what lets the CUDA 11.8 library load JetPack 6's
# libcublasLt.so.12: the audit of the cuBLASLt declarations and values fusednn uses (11.8 against
# cuBLAS 12.2, 12.6 and 12.9, from PyPI's wheels), the descriptor probe and the loader itself.
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
tools/check_cublaslt_cuda12.sh build/jetson-cuda-11.8 build/cublas-cu12
tools/aarch64_dependencies.sh build/aarch64-deps
glibc_2_31=build/aarch64-glibc-2.31
if [[ " ${presets[*]} " == *" jetson "* ]]; then
  tools/aarch64_glibc_2.31_sysroot.sh "$glibc_2_31"
fi
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
  if [[ $preset == jetson-orin ]]; then
    # The check below can fail: a library built against Debian 12 needs glibc 2.34 and more.
    if tools/check_symbol_versions.sh "build/$preset/src/api/libfusednn.so" 2.31 3.4.28 1.3.12 \
         >/dev/null 2>&1; then
      echo "test_jetson.sh: check_symbol_versions.sh passed the jetson-orin library, built" \
        "against glibc 2.36" >&2
      exit 1
    fi
    echo "jetson-orin: check_symbol_versions.sh refuses its library (glibc 2.36), as it must"
  fi
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
  dpkg-deb -x "$(ls build/jetson/packages/libfusednn-dev_*_arm64.deb | head -1)" "$unpacked"
  packaged_library="$(ls "$unpacked"/usr/lib/aarch64-linux-gnu/libfusednn.so.0.* | head -1)"
  FUSEDNN_JETSON_CUDA_PREFIX=build/jetson-cuda-11.8 tools/check_jetson_library.sh \
    "$packaged_library" 72,87 "$x86_library"
  recommends=$(dpkg-deb -f "$package" Recommends)
  [[ $recommends == *nvidia-l4t-cuda* ]] ||
    { echo "test_jetson.sh: $package recommends '$recommends', not nvidia-l4t-cuda" >&2; exit 1; }
  echo "jetson: the arm64 packages hold the GPU library for sm_72 and sm_87 and recommend" \
    "nvidia-l4t-cuda (packaged and checked in $((SECONDS - start)) s)"

  # JetPack 5 (Ubuntu 20.04: glibc 2.31, GCC 10's libstdc++): what the library needs, read from
  # the library, then what the package asks apt for.
  start=$SECONDS
  tools/check_symbol_versions.sh "$packaged_library" 2.31 3.4.28 1.3.12
  depends=$(dpkg-deb -f "$package" Depends)
  libc6_version=$(sed -n 's/.*libc6 (>= \([0-9.]*\)).*/\1/p' <<<"$depends")
  [[ -n $libc6_version &&
     "$(printf '%s\n2.31\n' "$libc6_version" | sort -V | tail -n1)" == 2.31 ]] ||
    { echo "test_jetson.sh: $package Depends '$depends': not libc6 (>= 2.31 or older)" >&2; exit 1; }
  stdcxx_version=$(sed -n 's/.*libstdc++6 (>= \([0-9.]*\)).*/\1/p' <<<"$depends")
  if [[ $depends == *libstdc++6* ]] &&
     [[ -z $stdcxx_version ||
        "$(printf '%s\n10\n' "$stdcxx_version" | sort -V | tail -n1)" != 10 ]]; then
    echo "test_jetson.sh: $package Depends '$depends': libstdc++6 newer than GCC 10's" >&2
    exit 1
  fi
  echo "jetson: $package Depends: $depends (Ubuntu 20.04 has libc6 2.31)"
  # Consumers of the unpacked packages, built with the jetson toolchain (glibc 2.31, the C++
  # runtime linked in) and run under qemu-aarch64 with Debian 11's C library alone, whose loader
  # refuses any symbol version that glibc 2.31 lacks: the golden check (LeNet-5 at batch 3
  # against PyTorch's output, then a file that is no model, which must fail with the library's
  # message) and the camera loop, both on the CPU backend.
  consumer_flags=(-DCMAKE_BUILD_TYPE=Release
    -DCMAKE_TOOLCHAIN_FILE="$PWD/cmake/toolchains/jetson-cuda-11.8-glibc-2.31.cmake"
    -DFUSEDNN_JETSON_CUDA_PREFIX="$PWD/build/jetson-cuda-11.8"
    -DFUSEDNN_GLIBC_2_31_PREFIX="$PWD/$glibc_2_31" -DFUSEDNN_AARCH64_PREFIX="$unpacked/usr"
    -DCMAKE_PREFIX_PATH="$unpacked/usr")
  library_path="$unpacked/usr/lib/aarch64-linux-gnu:$PWD/build/jetson-cuda-11.8/usr/lib/aarch64-linux-gnu"
  on_glibc_2_31=(qemu-aarch64 -L "$glibc_2_31/sysroot" -E LD_LIBRARY_PATH="$library_path")
  build_consumer() {  # build_consumer SOURCE_DIR BUILD_DIR (its log shown on failure)
    { cmake -S "$1" -B "$2" "${consumer_flags[@]}" && cmake --build "$2"; } >"$2.log" 2>&1 ||
      { tail -n 30 "$2.log"; echo "test_jetson.sh: $1 did not build against the packages" >&2; exit 1; }
  }
  "${on_glibc_2_31[@]}" "$glibc_2_31/sysroot/lib/aarch64-linux-gnu/libc.so.6" | head -n 1
  build_consumer tests/package "$unpacked/golden"
  fixture=tests/fixtures/golden/lenet5
  python3 tests/package/write_golden_io.py "$fixture/io.safetensors" 3 "$unpacked"
  "${on_glibc_2_31[@]}" "$unpacked/golden/golden_check" "$fixture/model.safetensors" \
    "$unpacked/input.f32" "$unpacked/expected.f32" 3
  if "${on_glibc_2_31[@]}" "$unpacked/golden/golden_check" "$fixture/io.safetensors" \
       "$unpacked/input.f32" "$unpacked/expected.f32" 3 >"$unpacked/bad.log" 2>&1 ||
     ! grep -q "returned FDNN_STATUS_INVALID_MODEL: .*io\.safetensors" "$unpacked/bad.log"; then
    cat "$unpacked/bad.log"
    echo "test_jetson.sh: golden_check did not fail with the library's message on a file that" \
      "is no model" >&2
    exit 1
  fi
  echo "golden_check refused $fixture/io.safetensors with the library's message"
  build_consumer samples/08_jetson_camera_loop "$unpacked/camera"
  "${on_glibc_2_31[@]}" "$unpacked/camera/camera_loop" --frames 10 --fps 100
  echo "jetson: the packaged library needs at most glibc 2.31 and no libstdc++, and the golden" \
    "check and the camera loop ran on it with glibc 2.31 under qemu ($((SECONDS - start)) s)"
fi
