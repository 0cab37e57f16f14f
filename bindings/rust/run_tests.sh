#!/usr/bin/env bash
# Builds and tests the Rust bindings offline: `cargo test` (header drift, error paths, golden
# fixtures, threads) and `cargo doc --no-deps` with warnings as errors.
#
# Usage: bindings/rust/run_tests.sh [LIBRARY]
#   LIBRARY: libfusednn.so itself, the folder holding it, or an install prefix with lib/.
#   Without it: $FUSEDNN_LIB_DIR, then $FUSEDNN_DIR, then the newest libfusednn.so under the
#   repository's build*/ folders (not a sanitizer build), else the library is built into bindings/rust/target/native.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"

if ! command -v cargo >/dev/null; then
  echo "run_tests.sh: cargo is not installed (install a Rust toolchain, 1.77 or newer)" >&2
  exit 2
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
elif [[ -n "${FUSEDNN_LIB_DIR:-}" ]]; then
  lib_dir="$(library_dir "$FUSEDNN_LIB_DIR")"
elif [[ -n "${FUSEDNN_DIR:-}" ]]; then
  lib_dir="$(library_dir "$FUSEDNN_DIR")"
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
    echo "run_tests.sh: no libfusednn.so found; building it into bindings/rust/target/native"
    cmake -S "$root" -B "$here/target/native" -DFUSEDNN_BUILD_TOOLS=OFF -DFUSEDNN_BUILD_TESTS=OFF >/dev/null
    cmake --build "$here/target/native" -j2 --target fusednn
    lib_dir="$(dirname "$(find "$here/target/native" -name 'libfusednn.so' | head -n1)")"
  fi
fi
echo "run_tests.sh: testing against $lib_dir/libfusednn.so"

export FUSEDNN_LIB_DIR="$lib_dir"
export LD_LIBRARY_PATH="$lib_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export CARGO_NET_OFFLINE=true
export RUSTDOCFLAGS="${RUSTDOCFLAGS:-} -D warnings"
cd "$here"

status=0
cargo test --offline --workspace || status=1
cargo doc --offline --no-deps --workspace || status=1
exit $status
