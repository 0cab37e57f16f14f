#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Fills a folder with aarch64 builds of what fusednn's cross build needs beyond the aarch64
# sysroot: GoogleTest, built from Debian's googletest sources with the aarch64 toolchain, and
# nlohmann-json, whose headers and CMake package are the same on every machine. The presets and
# tools/test_aarch64.sh pass the folder to cmake/toolchains/aarch64-linux-gnu.cmake as
# FUSEDNN_AARCH64_PREFIX. Skips whatever is already there.
# Usage: tools/aarch64_dependencies.sh [PREFIX]   (default: build/aarch64-deps)
set -euo pipefail
cd "$(dirname "$0")/.."
prefix="$(realpath -m "${1:-build/aarch64-deps}")"
toolchain="$PWD/cmake/toolchains/aarch64-linux-gnu.cmake"

for tool in aarch64-linux-gnu-g++ cmake; do
  command -v "$tool" >/dev/null || { echo "$tool not found: run tools/install_dependencies.sh --tests" >&2; exit 1; }
done

if [[ ! -f "$prefix/share/cmake/nlohmann_json/nlohmann_jsonConfig.cmake" ]]; then
  json_config="$(dpkg -L nlohmann-json3-dev | grep '/nlohmann_jsonConfig.cmake$' | head -n 1)"
  [[ -n "$json_config" ]] || { echo "nlohmann-json3-dev is not installed" >&2; exit 1; }
  mkdir -p "$prefix/include" "$prefix/share/cmake"
  cp -r /usr/include/nlohmann "$prefix/include/"
  # The package's targets file finds the headers relative to its own folder (prefix/share/cmake).
  cp -r "$(dirname "$json_config")" "$prefix/share/cmake/"
fi

if [[ ! -f "$prefix/lib/cmake/GTest/GTestConfig.cmake" ]]; then
  [[ -d /usr/src/googletest ]] || { echo "googletest sources not found: apt-get install googletest" >&2; exit 1; }
  cmake -S /usr/src/googletest -B "$prefix/googletest-build" -G "Unix Makefiles" \
    -DCMAKE_TOOLCHAIN_FILE="$toolchain" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_INSTALL_PREFIX="$prefix" -DBUILD_GMOCK=OFF -DINSTALL_GTEST=ON >/dev/null
  cmake --build "$prefix/googletest-build" -j"${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}" >/dev/null
  cmake --install "$prefix/googletest-build" >/dev/null
  rm -rf "$prefix/googletest-build"
fi
echo "aarch64 dependencies in $prefix"
