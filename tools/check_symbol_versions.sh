#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Checks that a shared library loads on a system whose C library is glibc GLIBC_MAX and whose C++
# runtime (if the library needs one) is at most GLIBCXX_MAX / CXXABI_MAX, by reading what the
# dynamic loader checks: the symbol versions the library needs (readelf -V, .gnu.version_r),
# file by file, and the libraries it names (NEEDED). It fails when
#  - it needs a GLIBC_ version above GLIBC_MAX, a GLIBCXX_ above GLIBCXX_MAX or a CXXABI_ above
#    CXXABI_MAX (each culprit named with the undefined symbols bound to that version, from
#    readelf --dyn-syms);
#  - it names a library other than glibc's (libc, libm, libpthread, libdl, librt, the loader),
#    libstdc++ and libgcc_s, whose versions this check cannot judge.
# JetPack 5 (Ubuntu 20.04): glibc 2.31, GCC 10's libstdc++ (GLIBCXX_3.4.28, CXXABI_1.3.12).
# Usage: tools/check_symbol_versions.sh LIBRARY GLIBC_MAX GLIBCXX_MAX CXXABI_MAX
#   e.g. tools/check_symbol_versions.sh libfusednn.so.0 2.31 3.4.28 1.3.12
set -euo pipefail
if (($# != 4)); then
  echo "usage: $0 LIBRARY GLIBC_MAX GLIBCXX_MAX CXXABI_MAX" >&2
  exit 2
fi
library="$1"
declare -A maximum=([GLIBC]="$2" [GLIBCXX]="$3" [CXXABI]="$4")
for node in GLIBC GLIBCXX CXXABI; do
  [[ "${maximum[$node]}" =~ ^[0-9]+(\.[0-9]+)+$ ]] ||
    { echo "$node maximum must be a version such as 2.31, not '${maximum[$node]}'" >&2; exit 2; }
done
[[ -f "$library" ]] || { echo "FAIL: $library not found" >&2; exit 1; }

failures=()
# version_above A B: A is a higher version than B.
version_above() { [[ "$1" != "$2" && "$(printf '%s\n%s\n' "$1" "$2" | sort -V | tail -n1)" == "$1" ]]; }

needed="$(readelf -d -W "$library" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')"
allowed='^(libc\.so\.6|libm\.so\.6|libpthread\.so\.0|libdl\.so\.2|librt\.so\.1'
allowed+='|ld-linux-aarch64\.so\.1|ld-linux-x86-64\.so\.2|libstdc\+\+\.so\.6|libgcc_s\.so\.1)$'
others="$(grep -Ev "$allowed" <<<"$needed" | grep . || true)"
[[ -z "$others" ]] || failures+=("needs libraries this check does not know: $(paste -sd' ' <<<"$others")")

# "  0x0010:   Name: GLIBC_2.17  Flags: none  Version: 3" lines, each under its
# "  000000: Version: 1  File: libc.so.6  Cnt: 3" line.
needs="$(readelf -V -W "$library" |
  awk '/ File: / { for (i = 1; i < NF; i++) if ($i == "File:") file = $(i + 1) }
       / Name: / { for (i = 1; i < NF; i++) if ($i == "Name:") print file, $(i + 1) }')"
[[ -n "$needs" || -z "$needed" ]] || failures+=("readelf -V lists no symbol versions needed")
highest=""
while read -r file name; do
  [[ -n "$name" ]] || continue
  node="${name%%_*}" version="${name#*_}"
  [[ -n "${maximum[$node]:-}" ]] || continue
  highest+="$file $name"$'\n'
  if version_above "$version" "${maximum[$node]}"; then
    symbols="$(readelf --dyn-syms -W "$library" |
      awk -v v="@$name" '$7 == "UND" { n = index($8, v); if (n) print substr($8, 1, n - 1) }' |
      sort -u | paste -sd' ')"
    failures+=("$file: $name is above ${node}_${maximum[$node]} (symbols: ${symbols:-none listed})")
  fi
done <<<"$needs"

if ((${#failures[@]})); then
  echo "FAIL: $library:" >&2
  printf '  %s\n' "${failures[@]}" >&2
  exit 1
fi
summary=""
for node in GLIBC GLIBCXX CXXABI; do
  top="$(awk -v node="$node" '$2 ~ "^" node "_" { print substr($2, length(node) + 2) }' \
    <<<"$highest" | sort -V | tail -n1)"
  summary+=" ${node}_${top:-(none)}"
done
echo "PASS: $library needs at most:$summary (limits GLIBC_${maximum[GLIBC]}," \
  "GLIBCXX_${maximum[GLIBCXX]}, CXXABI_${maximum[CXXABI]}); libraries: $(paste -sd' ' <<<"$needed")"
