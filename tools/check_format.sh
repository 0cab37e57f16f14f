#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Checks that the C, C++ and CUDA sources are laid out as .clang-format says; prints each file that
# is not, with clang-format's first complaints, and exits 1. With --fix, reformats them in place.
#
# Usage: tools/check_format.sh [--fix] [FILE...]   (default: every tracked .c .h .cpp .hpp .cu .cuh)
# Environment: CLANG_FORMAT, the clang-format to run (default: clang-format). Versions differ in
# small ways; CI uses Debian's (apt-get install clang-format).
set -euo pipefail
cd "$(dirname "$0")/.."

fix=0
files=()
for argument in "$@"; do
  case "$argument" in
    --fix) fix=1 ;;
    -h|--help) sed -n '3,8p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "check_format.sh: unknown option $argument (see --help)" >&2; exit 2 ;;
    *) files+=("$argument") ;;
  esac
done
clang_format="${CLANG_FORMAT:-clang-format}"
if ! command -v "$clang_format" >/dev/null; then
  echo "check_format.sh: $clang_format not found (apt-get install clang-format)" >&2
  exit 2
fi
if ((${#files[@]} == 0)); then
  mapfile -t files < <(git ls-files '*.c' '*.h' '*.cpp' '*.hpp' '*.cu' '*.cuh')
fi

if ((fix)); then
  "$clang_format" -i --style=file "${files[@]}"
  echo "check_format.sh: formatted ${#files[@]} files with $("$clang_format" --version)"
  exit 0
fi

unformatted=0
for file in "${files[@]}"; do
  if ! complaints="$("$clang_format" --style=file --dry-run --Werror "$file" 2>&1)"; then
    unformatted=$((unformatted + 1))
    echo "$file"
    sed -n '1,6s/^/    /p' <<<"$complaints"
  fi
done
if ((unformatted)); then
  echo "check_format.sh: $unformatted of ${#files[@]} files are not formatted" \
       "(tools/check_format.sh --fix formats them; $("$clang_format" --version))"
  exit 1
fi
echo "check_format.sh: ${#files[@]} files formatted as .clang-format says"
