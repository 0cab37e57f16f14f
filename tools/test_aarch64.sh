#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The aarch64 (Jetson CPU) checks: cross-builds fusednn with the CPU backend (preset aarch64-cpu,
# Debian's g++-aarch64-linux-gnu), runs its CTest suites under qemu-aarch64 with the aarch64
# sysroot (the test preset leaves out the checks that only read sources and the exhaustive float
# sweeps), and, given an x86-64 libfusednn.so, checks the aarch64 library's ELF header, soname and
# exported symbols against it (tools/check_aarch64_library.sh). Then it packages the build as arm64
# .deb packages and checks them (tests/package/test_deb.sh --arch arm64: fields, files, AArch64
# library, lintian, and golden_check.c cross-built against them and run under qemu-aarch64), and
# builds the aarch64 Python wheel and checks it (tests/package/test_aarch64_wheel.sh: its
# manylinux_2_28 tag, auditwheel, pip, the same exports as this build's library, golden_check
# under qemu). The wheel's library is a build of its own (preset aarch64-wheel: the library
# target alone, against glibc 2.28 with the C++ runtime linked in): the test programs here need
# GCC 12's shared libstdc++, which needs a newer glibc than 2.28.
# Usage: tools/test_aarch64.sh [X86_64_LIBRARY]
set -euo pipefail
cd "$(dirname "$0")/.."

for tool in aarch64-linux-gnu-g++ qemu-aarch64 readelf; do
  command -v "$tool" >/dev/null || {
    echo "$tool not found: run tools/install_dependencies.sh --tests" >&2
    exit 1
  }
done

tools/aarch64_dependencies.sh build/aarch64-deps
cmake --preset aarch64-cpu
cmake --build --preset aarch64-cpu
ctest --preset aarch64-cpu

library=build/aarch64-cpu/src/api/libfusednn.so
if (($# >= 1)); then
  tools/check_aarch64_library.sh "$library" "$1"
else
  echo "no x86-64 library given: the export comparison is skipped"
fi

tests/package/test_deb.sh --arch arm64 build/aarch64-cpu
tests/package/test_aarch64_wheel.sh build/aarch64-wheel build/aarch64-cpu
