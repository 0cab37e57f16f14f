#!/usr/bin/env bash
# Builds the FusedNN .NET library and its test program with Mono (no .NET SDK, no NuGet) and runs
# the tests. The closing line is "N passed, N failed"; the exit code is non-zero on any failure.
#
# Usage: bindings/csharp/run_tests.sh [LIBRARY]
#   LIBRARY: libfusednn.so itself, the folder holding it, or an install prefix with lib/.
#   Without it: $FUSEDNN_LIBRARY_DIR, then the newest libfusednn.so under the repository's build*/
#   folders (not a sanitizer build), else the library is built into bindings/csharp/build/native.
# Mono is installed from Debian (apt-get install mono-complete) when mcs or mono is missing.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="$here/build"

if ! command -v mcs >/dev/null || ! command -v mono >/dev/null; then
  echo "run_tests.sh: installing Mono (mono-complete) from Debian; this takes a few minutes"
  sudo=""
  if [[ $(id -u) -ne 0 ]]; then sudo="sudo"; fi
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q mono-complete >/dev/null
fi

# Prints the folder holding libfusednn.so for a file, folder or prefix; fails if none.
library_dir() {
  local given="$1"
  if [[ -f "$given" ]]; then dirname "$(readlink -f "$given")"; return; fi
  for dir in "$given" "$given/lib" "$given/lib64"; do
    if [[ -e "$dir/libfusednn.so" ]]; then (cd "$dir" && pwd); return; fi
  done
  echo "run_tests.sh: no libfusednn.so in $given, $given/lib or $given/lib64" >&2
  return 1
}

if [[ $# -ge 1 ]]; then
  lib_dir="$(library_dir "$1")"
elif [[ -n "${FUSEDNN_LIBRARY_DIR:-}" ]]; then
  lib_dir="$(library_dir "$FUSEDNN_LIBRARY_DIR")"
else
  # The newest library in a build folder, skipping sanitizer builds (their runtime must be
  # loaded first, which cargo's and Mono's test processes do not do).
  newest=""
  while read -r _ candidate; do
    needed="$(readelf -d "$candidate" 2>/dev/null || true)"
    if [[ ! "$needed" =~ lib(a|ub|t)san ]]; then
      newest="$candidate"
      break
    fi
  done < <(find "$root" -maxdepth 5 -path "$root/bindings" -prune -o -path '*/build*' \
             -name 'libfusednn.so' -printf '%T@ %p\n' 2>/dev/null | sort -nr)
  if [[ -n "$newest" ]]; then
    lib_dir="$(dirname "$newest")"
  else
    echo "run_tests.sh: no libfusednn.so found; building it into bindings/csharp/build/native"
    cmake -S "$root" -B "$out/native" -DFUSEDNN_BUILD_TOOLS=OFF -DFUSEDNN_BUILD_TESTS=OFF >/dev/null
    cmake --build "$out/native" -j2 --target fusednn
    lib_dir="$(dirname "$(find "$out/native" -name 'libfusednn.so' | head -n1)")"
  fi
fi
echo "run_tests.sh: testing against $lib_dir/libfusednn.so"

mkdir -p "$out"
# The library: the same sources FusedNN.csproj builds; Span<T> comes from Mono's mscorlib.
mcs -target:library -unsafe -optimize+ -warn:4 -warnaserror \
    -doc:"$out/FusedNN.xml" -out:"$out/FusedNN.dll" "$here"/FusedNN/*.cs
mcs -target:exe -unsafe -warn:4 -warnaserror -r:"$out/FusedNN.dll" -r:System.Core.dll \
    -out:"$out/FusedNN.Tests.exe" "$here"/tests/*.cs

# DllImport("fusednn") resolves to libfusednn.so through the dynamic loader's path.
export LD_LIBRARY_PATH="$lib_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export FUSEDNN_SOURCE_DIR="$root"
exec mono --debug "$out/FusedNN.Tests.exe" ${FUSEDNN_TEST_FILTER:+"$FUSEDNN_TEST_FILTER"}
