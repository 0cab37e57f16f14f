#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Fills a folder with the CUDA 11.8 toolkit the jetson-orin and jetson-xavier presets build with
# (cmake/toolchains/jetson-cuda-11.8.cmake): Debian bookworm's non-free packages, fetched with apt
# through a private sources list and package cache, and unpacked with dpkg-deb -x. Nothing is
# installed system-wide: the machine's own nvcc stays the default for every other build.
#   amd64: nvidia-cuda-toolkit (nvcc, cicc, ptxas, nvlink, fatbinary, cuobjdump; CUDA 13 no longer
#          targets sm_72) and libnvvm4 (libdevice)
#   arm64: nvidia-cuda-dev (the headers and libcudart_static.a the aarch64 library is built
#          against) and libcudart11.0 (the shared runtime its .so link names)
#   all:   libcu++-dev (from main: the cuda/std headers CUDA 11.8's cooperative_groups.h includes)
# The arm64 nvidia-cuda-dev also holds the static libraries of cuBLAS, cuFFT, NPP and the rest;
# fusednn links none of them (cuBLASLt is loaded at run time), so they are deleted after unpacking.
# Skips everything when the folder already holds these package versions.
# Usage: tools/jetson_cuda_dependencies.sh [PREFIX]   (default: build/jetson-cuda-11.8)
set -euo pipefail
cd "$(dirname "$0")/.."
prefix="$(realpath -m "${1:-build/jetson-cuda-11.8}")"

for tool in apt-get dpkg-deb aarch64-linux-gnu-g++; do
  command -v "$tool" >/dev/null || { echo "$tool not found (a Debian 12 machine with tools/install_dependencies.sh --tests is needed)" >&2; exit 1; }
done
source tools/private_apt.sh

# name:architecture; the CUDA packages are versioned 11.8.x~11.8.0-..., which is checked.
packages=(nvidia-cuda-toolkit:amd64 libnvvm4:amd64 nvidia-cuda-dev:arm64 libcudart11.0:arm64
          libcu++-dev:all)
cuda_version_prefix="11.8."

# A private apt (tools/private_apt.sh): bookworm with contrib and non-free, which the machine's
# own sources need not enable, both architectures.
mkdir -p "$prefix/debs"
use_private_apt "$prefix/apt" "http://deb.debian.org/debian bookworm main contrib non-free" \
  amd64 arm64

stamp="$prefix/packages.txt"
if [[ -f "$stamp" && -x "$prefix/usr/lib/nvidia-cuda-toolkit/bin/nvcc" ]]; then
  echo "CUDA 11.8 for Jetson already in $prefix:"
  cat "$stamp"
  exit 0
fi

apt-get update -qq
: >"$stamp.partial"
for package in "${packages[@]}"; do
  name="${package%%:*}" architecture="${package##*:}"
  [[ "$architecture" == all ]] && package="$name"
  version="$(apt-cache policy "$package" | sed -n 's/^ *Candidate: *//p')"
  if [[ -z "$version" || "$version" == "(none)" ]]; then
    echo "FAIL: bookworm has no $package" >&2
    exit 1
  fi
  if [[ "$architecture" != all && "${version#*~}" != "$cuda_version_prefix"* ]]; then
    echo "FAIL: $package is version $version, not CUDA $cuda_version_prefix*" >&2
    exit 1
  fi
  (cd "$prefix/debs" && apt-get download -qq "$package=$version")
  deb="$(ls "$prefix/debs/${name}_"*"_${architecture}.deb")"
  echo "fetched $package $version ($(du -h "$deb" | cut -f1))"
  dpkg-deb -x "$deb" "$prefix"
  echo "$package $version" >>"$stamp.partial"
done

# Only libcudart_static.a of the static libraries is linked.
find "$prefix/usr/lib/aarch64-linux-gnu" -maxdepth 1 -name '*_static*.a' \
  ! -name libcudart_static.a -delete
rm -rf "$prefix/debs" "$prefix/usr/share/doc"

# Debian's package makes nvcc.profile, which nvcc reads next to itself, a link to
# /etc/nvcc.profile: the link is replaced (never written through) by a file that points at the
# unpacked tree. CMake derives the toolkit's layout from
# TOP and NVVMIR_LIBRARY_DIR (which must end in nvvm/libdevice); INCLUDES reaches the aarch64
# compiler, whose sysroot does not have the CUDA headers.
rm -f "$prefix/usr/lib/nvidia-cuda-toolkit/bin/nvcc.profile"
cat >"$prefix/usr/lib/nvidia-cuda-toolkit/bin/nvcc.profile" <<'EOF'
TOP = $(_HERE_)/../../..
NVVMIR_LIBRARY_DIR = $(TOP)/lib/cuda/nvvm/libdevice
PATH += $(_HERE_):$(TOP)/bin:
INCLUDES += "-I$(TOP)/include" $(_SPACE_)
LIBRARIES =+ $(_SPACE_) "-L$(TOP)/lib/aarch64-linux-gnu/stubs" "-L$(TOP)/lib/aarch64-linux-gnu"
EOF
"$prefix/usr/lib/nvidia-cuda-toolkit/bin/nvcc" --version | tail -n 2
mv "$stamp.partial" "$stamp"
echo "CUDA 11.8 for Jetson in $prefix ($(du -sh "$prefix" | cut -f1))"
