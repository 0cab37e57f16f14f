#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Checks an aarch64 build of libfusednn.so against an x86-64 build of the same sources: the first
# must be a 64-bit little-endian AArch64 ELF shared object, both must have the same soname, and
# the symbols they export (defined, global or weak, default visibility) must be the same names.
# Reads the files with readelf only, so it runs on any build machine.
# Usage: tools/check_aarch64_library.sh AARCH64_LIBRARY X86_64_LIBRARY
set -euo pipefail
if (($# != 2)); then
  echo "usage: $0 AARCH64_LIBRARY X86_64_LIBRARY" >&2
  exit 2
fi
aarch64_library="$1" x86_library="$2"
for library in "$aarch64_library" "$x86_library"; do
  [[ -f "$library" ]] || { echo "FAIL: $library not found" >&2; exit 1; }
done

header_field() {  # header_field LIBRARY FIELD: the value readelf -h gives for FIELD
  readelf -h "$1" | sed -n "s/^ *$2: *//p"
}
expect_field() {  # expect_field LIBRARY FIELD VALUE
  local value
  value="$(header_field "$1" "$2")"
  if [[ "$value" != "$3" ]]; then
    echo "FAIL: $1: $2 is '$value', expected '$3'" >&2
    exit 1
  fi
}
expect_field "$aarch64_library" Class ELF64
expect_field "$aarch64_library" Data "2's complement, little endian"
expect_field "$aarch64_library" Type "DYN (Shared object file)"
expect_field "$aarch64_library" Machine AArch64
expect_field "$x86_library" Machine "Advanced Micro Devices X86-64"

soname() {
  readelf -d "$1" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p'
}
if [[ "$(soname "$aarch64_library")" != "$(soname "$x86_library")" ]]; then
  echo "FAIL: sonames differ: $(soname "$aarch64_library") vs $(soname "$x86_library")" >&2
  exit 1
fi

# readelf --dyn-syms -W columns: Num Value Size Type Bind Vis Ndx Name[@version].
exported_symbols() {
  readelf --dyn-syms -W "$1" |
    awk '$7 != "UND" && ($5 == "GLOBAL" || $5 == "WEAK") && $6 == "DEFAULT" && NF >= 8 { print $8 }' |
    sed 's/@.*//' | sort -u
}
aarch64_symbols="$(exported_symbols "$aarch64_library")"
x86_symbols="$(exported_symbols "$x86_library")"
count="$(grep -c . <<<"$aarch64_symbols" || true)"
if ((count < 20)); then
  echo "FAIL: $aarch64_library exports only $count symbols" >&2
  exit 1
fi
if [[ "$aarch64_symbols" != "$x86_symbols" ]]; then
  echo "FAIL: exported symbols differ (< aarch64, > x86-64):" >&2
  diff <(echo "$aarch64_symbols") <(echo "$x86_symbols") >&2 || true
  exit 1
fi
echo "PASS: $aarch64_library is an AArch64 ELF with soname $(soname "$aarch64_library")," \
  "exporting the same $count symbols as the x86-64 build"
