#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds the aarch64 Python wheel: the fusednn package with an aarch64 CPU library bundled as
# fusednn/lib/libfusednn.so.0, tagged manylinux_2_28_aarch64 when the library fits that platform
# (the library of the aarch64-wheel preset does), for a newer one when auditwheel finds it needs
# more.
#
#   1. the library: the aarch64-wheel preset (cmake/toolchains/aarch64-zig-glibc-2.28.cmake)
#      builds the fusednn target alone with zig's clang against glibc 2.28, libc++ linked in
#      (configured first when BUILD_DIR has no cache, after tools/aarch64_dependencies.sh); a
#      BUILD_DIR other than the preset's must already hold src/api/libfusednn.so;
#   2. the wheel: `pip wheel ./bindings/python` with FUSEDNN_BUNDLE_LIBRARY, so scikit-build-core
#      compiles nothing and only copies the library in; it names the wheel for the build
#      machine, so the platform tag is first set to linux_aarch64 (`wheel tags`);
#   3. the tag: `auditwheel show` reads the library's needed libraries and symbol versions and
#      names the oldest manylinux policy they fit; the wheel is retagged manylinux_2_28_aarch64,
#      or with auditwheel's policy where that is newer.
#
# The build backend (scikit-build-core), wheel, auditwheel and ziglang (the compiler of step 1)
# come from PyPI into a venv of their own (WHEEL_TOOLS, default build/wheel-tools), made once;
# the wheel is built in it without build isolation, so later runs need no package index.
# Usage: tools/build_aarch64_wheel.sh [BUILD_DIR] [OUT_DIR]
#   BUILD_DIR  an aarch64 build folder (default build/aarch64-wheel, the preset's)
#   OUT_DIR    where the wheel goes (default BUILD_DIR/wheel; emptied of fusednn wheels first)
# Prints the wheel's path as its last line.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
build="$(realpath -m "${1:-build/aarch64-wheel}")"
out="$(realpath -m "${2:-$build/wheel}")"
tools_venv="$(realpath -m "${WHEEL_TOOLS:-build/wheel-tools}")"

# ---- tools -----------------------------------------------------------------------------------

# ziglang is pinned: its version fixes the compiler and the libc++ linked into the library.
if ! "$tools_venv/bin/python" -c 'import auditwheel, scikit_build_core, wheel, ziglang' \
     2>/dev/null; then
  python3 -m venv "$tools_venv"
  "$tools_venv/bin/python" -m pip install -q --disable-pip-version-check \
      'scikit-build-core>=0.10' 'wheel>=0.40,<1' 'auditwheel>=6.1,<7' 'ziglang==0.17.1' || {
    echo "build_aarch64_wheel.sh: could not install scikit-build-core, wheel, auditwheel and" \
         "ziglang from PyPI into $tools_venv" >&2
    exit 1
  }
fi

# ---- 1. the library --------------------------------------------------------------------------

library="$build/src/api/libfusednn.so"
if [[ "$build" == "$root/build/aarch64-wheel" ]]; then
  # A cache whose compiler is gone (the tools venv made anew elsewhere) cannot take another one:
  # the folder is configured afresh.
  if [[ -f "$build/CMakeCache.txt" ]]; then
    cached_zig="$(sed -n 's/^FUSEDNN_ZIG:FILEPATH=//p' "$build/CMakeCache.txt")"
    [[ -x "$cached_zig" ]] || rm -rf "$build"
  fi
  if [[ ! -f "$build/CMakeCache.txt" ]]; then
    zig="$("$tools_venv/bin/python" -c \
      'import os, ziglang; print(os.path.join(os.path.dirname(ziglang.__file__), "zig"))')"
    tools/aarch64_dependencies.sh build/aarch64-deps
    cmake --preset aarch64-wheel -DFUSEDNN_ZIG="$zig" >/dev/null
  fi
  echo "building the aarch64 library (preset aarch64-wheel, target fusednn)"
  cmake --build --preset aarch64-wheel
elif [[ ! -e "$library" ]]; then
  echo "build_aarch64_wheel.sh: $library not found (build BUILD_DIR first)" >&2
  exit 1
fi
library="$(realpath "$library")"
readelf -h "$library" | grep -q 'Machine: *AArch64$' || {
  echo "build_aarch64_wheel.sh: $library is not an AArch64 library" >&2; exit 1; }

# ---- 2. the wheel ----------------------------------------------------------------------------

mkdir -p "$out"
rm -f "$out"/fusednn-*.whl
log="$out/pip-wheel.log"
FUSEDNN_BUNDLE_LIBRARY="$library" "$tools_venv/bin/python" -m pip wheel -q --no-deps \
    --no-build-isolation --disable-pip-version-check -w "$out" ./bindings/python >"$log" 2>&1 || {
  tail -n 30 "$log"; echo "build_aarch64_wheel.sh: pip wheel failed (log: $log)" >&2; exit 1; }
built=("$out"/fusednn-*.whl)
[[ ${#built[@]} -eq 1 && -f "${built[0]}" ]] || {
  echo "build_aarch64_wheel.sh: expected one wheel in $out" >&2; exit 1; }

# retag WHEEL PLATFORM_TAG: replaces the wheel's platform tag; prints the new wheel's path.
retag() {
  local name
  name="$("$tools_venv/bin/wheel" tags --remove --platform-tag "$2" "$1" | tail -n 1)"
  echo "$(dirname "$1")/$name"
}
wheel="$(retag "${built[0]}" linux_aarch64)"

# ---- 3. the tag ------------------------------------------------------------------------------

# The wheel is tagged for glibc 2.28, the C library the aarch64-wheel toolchain compiles against,
# unless auditwheel finds the library needs a newer one. auditwheel judges by symbol versions
# alone and may name an older policy, but the headers were 2.28's and nothing older is checked.
oldest_tag=manylinux_2_28_aarch64
report="$("$tools_venv/bin/auditwheel" show "$wheel" 2>&1)" || {
  echo "$report"; echo "build_aarch64_wheel.sh: auditwheel show failed" >&2; exit 1; }
echo "$report" >"$out/auditwheel-show.txt"
found="$(grep -oE 'manylinux_[0-9]+_[0-9]+_aarch64' <<<"$report" | head -n 1)"
[[ -n "$found" ]] || {
  echo "$report"; echo "build_aarch64_wheel.sh: auditwheel names no manylinux tag" >&2; exit 1; }
# glibc_of TAG: the glibc version a manylinux_X_Y tag names, as X.Y.
glibc_of() { sed -E 's/^manylinux_([0-9]+)_([0-9]+)_.*/\1.\2/' <<<"$1"; }
tag="$oldest_tag"
if [[ "$(printf '%s\n%s\n' "$(glibc_of "$found")" "$(glibc_of "$oldest_tag")" | sort -V |
         tail -n 1)" != "$(glibc_of "$oldest_tag")" ]]; then
  tag="$found"
fi
wheel="$(retag "$wheel" "$tag")"
echo "auditwheel: the bundled library fits $found; the wheel is tagged $tag"
echo "$wheel"
