#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Checks that the C, C++ and CUDA sources are laid out as .clang-format says; prints each file that
# is not, with clang-format's first complaints, and exits 1. With --fix, reformats them in place.
#
# Usage: tools/check_format.sh [--fix] [FILE...]   (default: every tracked .c .h .cpp .hpp .cu .cuh)
# The sources are formatted with clang-format 14 (other major versions lay some lines out
# differently): CLANG_FORMAT names the one to run, else clang-format-14, else clang-format. Another
# major version is refused with exit 2 (tools/install_dependencies.sh --tests installs 14).
set -euo pipefail
cd "$(dirname "$0")/.."

required_major=14

fix=0
files=()
for argument in "$@"; do
  case "$argument" in
    --fix) fix=1 ;;
    -h|--help) sed -n '3,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "check_format.sh: unknown option $argument (see --help)" >&2; exit 2 ;;
    *) files+=("$argument") ;;
  esac
done
if [[ -n "${CLANG_FORMAT:-}" ]]; then
  clang_format="$CLANG_FORMAT"
elif command -v "clang-format-$required_major" >/dev/null; then
  clang_format="clang-format-$required_major"
else
  clang_format=clang-format
fi
if ! command -v "$clang_format" >/dev/null; then
  echo "check_format.sh: $clang_format not found; install clang-format $required_major" \
       "(tools/install_dependencies.sh --tests or apt-get install clang-format-$required_major)" \
       >&2
  exit 2
fi
version="$("$clang_format" --version | head -n1)"
found_major="$(sed -n 's/.*version \([0-9][0-9]*\)\..*/\1/p' <<<"$version" | head -n1)"
if [[ "$found_major" != "$required_major" ]]; then
  echo "check_format.sh: $clang_format is major version ${found_major:-unknown} ($version), but" \
       "the sources are formatted with clang-format $required_major, whose layout differs;" \
       "install clang-format-$required_major or point CLANG_FORMAT at it" >&2
  exit 2
fi
if ((${#files[@]} == 0)); then
  mapfile -t files < <(git ls-files '*.c' '*.h' '*.cpp' '*.hpp' '*.cu' '*.cuh')
fi

if ((fix)); then
  "$clang_format" -i --style=file "${files[@]}"
  echo "check_format.sh: formatted ${#files[@]} files with $version"
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
       "(tools/check_format.sh --fix formats them; $version)"
  exit 1
fi
echo "check_format.sh: ${#files[@]} files formatted as .clang-format says"
