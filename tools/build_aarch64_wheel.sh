#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds the aarch64 Python wheel: the fusednn package with the cross-built aarch64 CPU library
# bundled as fusednn/lib/libfusednn.so.0, tagged for the oldest manylinux platform the library
# really runs on.
#
#   1. the library: BUILD_DIR's src/api/libfusednn.so, the one the aarch64 tests ran on; when it
#      is not there, the aarch64-cpu preset is configured (after tools/aarch64_dependencies.sh)
#      and its library target alone is built;
#   2. the wheel: `pip wheel ./bindings/python` with FUSEDNN_BUNDLE_LIBRARY, so scikit-build-core
#      compiles nothing and only copies the library in; it names the wheel for the build
#      machine, so the platform tag is first set to linux_aarch64 (`wheel tags`);
#   3. the tag: `auditwheel show` reads the library's needed libraries and symbol versions and
#      names the manylinux policy they fit; the wheel is retagged with that policy's tag.
#
# The build backend (scikit-build-core), wheel and auditwheel come from PyPI into a venv of their
# own (WHEEL_TOOLS, default build/wheel-tools), made once; the wheel is built in it without build
# isolation, so later runs need no package index.
# Usage: tools/build_aarch64_wheel.sh [BUILD_DIR] [OUT_DIR]
#   BUILD_DIR  an aarch64 build folder (default build/aarch64-cpu)
#   OUT_DIR    where the wheel goes (default BUILD_DIR/wheel; emptied of fusednn wheels first)
# Prints the wheel's path as its last line.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
build="$(realpath -m "${1:-build/aarch64-cpu}")"
out="$(realpath -m "${2:-$build/wheel}")"
tools_venv="$(realpath -m "${WHEEL_TOOLS:-build/wheel-tools}")"

# ---- 1. the library --------------------------------------------------------------------------

library="$build/src/api/libfusednn.so"
if [[ ! -e "$library" ]]; then
  [[ "$build" == "$root/build/aarch64-cpu" ]] || {
    echo "build_aarch64_wheel.sh: $library not found (build BUILD_DIR first)" >&2; exit 1; }
  echo "building the aarch64 library (preset aarch64-cpu, target fusednn)"
  tools/aarch64_dependencies.sh build/aarch64-deps
  cmake --preset aarch64-cpu >/dev/null
  cmake --build --preset aarch64-cpu --target fusednn
fi
library="$(realpath "$library")"
readelf -h "$library" | grep -q 'Machine: *AArch64$' || {
  echo "build_aarch64_wheel.sh: $library is not an AArch64 library" >&2; exit 1; }

# ---- tools -----------------------------------------------------------------------------------

if ! "$tools_venv/bin/python" -c 'import auditwheel, scikit_build_core, wheel' 2>/dev/null; then
  python3 -m venv "$tools_venv"
  "$tools_venv/bin/python" -m pip install -q --disable-pip-version-check \
      'scikit-build-core>=0.10' 'wheel>=0.40,<1' 'auditwheel>=6.1,<7' || {
    echo "build_aarch64_wheel.sh: could not install scikit-build-core, wheel and auditwheel" \
         "from PyPI into $tools_venv" >&2
    exit 1
  }
fi

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

report="$("$tools_venv/bin/auditwheel" show "$wheel" 2>&1)" || {
  echo "$report"; echo "build_aarch64_wheel.sh: auditwheel show failed" >&2; exit 1; }
echo "$report" >"$out/auditwheel-show.txt"
tag="$(grep -oE 'manylinux_[0-9]+_[0-9]+_aarch64' <<<"$report" | head -n 1)"
[[ -n "$tag" ]] || {
  echo "$report"; echo "build_aarch64_wheel.sh: auditwheel names no manylinux tag" >&2; exit 1; }
wheel="$(retag "$wheel" "$tag")"
echo "auditwheel: the bundled library fits $tag"
echo "$wheel"
