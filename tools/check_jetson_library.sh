#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Checks a Jetson build of libfusednn.so (preset jetson-orin, jetson-xavier or jetson) without a
# Jetson:
#  - tools/check_aarch64_library.sh: an AArch64 ELF shared object with the x86-64 build's soname
#    and exported symbols;
#  - tools/check_gpu_code.sh: the embedded GPU code (cuobjdump) is machine code for the ARCHS
#    targets alone, no other target and no PTX to compile at run time, every GPU module carries
#    each of them, and every kernel has machine code for each target, so that no launch can fail
#    with "invalid device function" on those GPUs.
# cuobjdump: FUSEDNN_JETSON_CUDA_PREFIX's (tools/jetson_cuda_dependencies.sh), else the one on PATH.
# Usage: tools/check_jetson_library.sh AARCH64_LIBRARY ARCHS X86_64_LIBRARY
#   ARCHS: the compute capabilities the library must carry, comma-separated: 87, 72 or 72,87
set -euo pipefail
cd "$(dirname "$0")/.."
if (($# != 3)); then
  echo "usage: $0 AARCH64_LIBRARY ARCH X86_64_LIBRARY" >&2
  exit 2
fi
library="$1" arch_list="$2" x86_library="$3"
[[ "$arch_list" =~ ^[0-9]+(,[0-9]+)*$ ]] ||
  { echo "ARCHS must be numbers such as 87 or 72,87, not '$arch_list'" >&2; exit 2; }
prefix="${FUSEDNN_JETSON_CUDA_PREFIX:-build/jetson-cuda-11.8}"
cuobjdump="$prefix/usr/bin/cuobjdump"
[[ -x "$cuobjdump" ]] || cuobjdump="$(command -v cuobjdump)" ||
  { echo "cuobjdump not found: run tools/jetson_cuda_dependencies.sh" >&2; exit 1; }

tools/check_aarch64_library.sh "$library" "$x86_library"

# The GPU code: machine code for the ARCHS targets alone, in every module, for every kernel, and
# no PTX (tools/check_gpu_code.sh).
tools/check_gpu_code.sh --cuobjdump "$cuobjdump" "$library" "$arch_list"
