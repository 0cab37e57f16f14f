#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Fills a folder with what the jetson preset's toolchain (cmake/toolchains/jetson-cuda-11.8-
# glibc-2.31.cmake) needs to build a library that JetPack 5 (Ubuntu 20.04: glibc 2.31, GCC 10's
# libstdc++) can load, with Debian 12's cross GCC 12:
#   sysroot/    Debian 11's aarch64 C library, 2.31 as on Ubuntu 20.04: libc6, libc6-dev and
#               linux-libc-dev, fetched with apt through a private sources list and package cache
#               (nothing is installed system-wide) and unpacked with dpkg-deb -x; their absolute
#               symbolic links are made relative so that they resolve inside the folder;
#   unwinder/   libgcc_eh.a of Debian 11's GCC 10 (libgcc-10-dev), the exception unwinder linked
#               into the library: GCC 12's calls _dl_find_object, which glibc 2.31 lacks;
#   compat/     libc_single_threaded.o, compiled from cmake/toolchains/glibc-2.31/, which
#               defines the __libc_single_threaded flag that GCC 12's static libstdc++ reads and
#               glibc 2.31 lacks.
# Skips everything when the folder already holds these package versions.
# Usage: tools/aarch64_glibc_2.31_sysroot.sh [PREFIX]   (default: build/aarch64-glibc-2.31)
set -euo pipefail
cd "$(dirname "$0")/.."
prefix="$(realpath -m "${1:-build/aarch64-glibc-2.31}")"

for tool in apt-get dpkg-deb aarch64-linux-gnu-gcc; do
  command -v "$tool" >/dev/null || { echo "$tool not found (a Debian 12 machine with tools/install_dependencies.sh --tests is needed)" >&2; exit 1; }
done
source tools/private_apt.sh

packages=(libc6 libc6-dev linux-libc-dev libgcc-10-dev)
glibc_version_prefix="2.31-"

stamp="$prefix/packages.txt"
if [[ -f "$stamp" && -f "$prefix/compat/libc_single_threaded.o" ]]; then
  echo "aarch64 glibc 2.31 sysroot already in $prefix:"
  cat "$stamp"
  exit 0
fi
rm -rf "$prefix/sysroot" "$prefix/unwinder" "$prefix/compat"

# A private apt (tools/private_apt.sh): bullseye, arm64 only.
mkdir -p "$prefix/debs" "$prefix/sysroot"
use_private_apt "$prefix/apt" "http://deb.debian.org/debian bullseye main" arm64

apt-get update -qq
: >"$stamp.partial"
for name in "${packages[@]}"; do
  package="$name:arm64"
  version="$(apt-cache policy "$package" | sed -n 's/^ *Candidate: *//p')"
  if [[ -z "$version" || "$version" == "(none)" ]]; then
    echo "FAIL: bullseye has no $package" >&2
    exit 1
  fi
  if [[ "$name" == libc6* && "$version" != "$glibc_version_prefix"* ]]; then
    echo "FAIL: $package is version $version, not glibc $glibc_version_prefix*" >&2
    exit 1
  fi
  (cd "$prefix/debs" && apt-get download -qq "$package=$version")
  deb="$(ls "$prefix/debs/${name}_"*"_arm64.deb")"
  echo "fetched $package $version ($(du -h "$deb" | cut -f1))"
  dpkg-deb -x "$deb" "$prefix/sysroot"
  echo "$package $version" >>"$stamp.partial"
done

# Links such as usr/lib/aarch64-linux-gnu/libm.so -> /lib/aarch64-linux-gnu/libm.so.6 would reach
# outside the folder: each absolute target becomes a relative one inside it.
while IFS= read -r link; do
  target="$(readlink "$link")"
  [[ "$target" == /* ]] || continue
  ln -sfn "$(realpath -m --relative-to="$(dirname "$link")" "$prefix/sysroot$target")" "$link"
done < <(find "$prefix/sysroot" -type l)

# Of GCC 10 only the unwinder is used; the rest of its folder leaves the sysroot, so that nothing
# else of it is found.
gcc10="$prefix/sysroot/usr/lib/gcc/aarch64-linux-gnu/10"
mkdir -p "$prefix/unwinder"
cp "$gcc10/libgcc_eh.a" "$prefix/unwinder/"
rm -rf "$prefix/sysroot/usr/lib/gcc" "$prefix/sysroot/usr/share" "$prefix/debs"

mkdir -p "$prefix/compat"
aarch64-linux-gnu-gcc -std=c11 -O2 -fPIC -Wall -Wextra -Werror -c \
  cmake/toolchains/glibc-2.31/libc_single_threaded.c -o "$prefix/compat/libc_single_threaded.o"

mv "$stamp.partial" "$stamp"
echo "aarch64 glibc 2.31 sysroot in $prefix ($(du -sh "$prefix" | cut -f1))"
