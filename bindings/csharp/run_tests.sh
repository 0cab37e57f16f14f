#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
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

source "$root/bindings/find_library.sh"
lib_dir="$(fusednn_library_dir "${1:-${FUSEDNN_LIBRARY_DIR:-}}" "$root" "$out/native")"
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
