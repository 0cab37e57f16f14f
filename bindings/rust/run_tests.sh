#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
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

source "$root/bindings/find_library.sh"
lib_dir="$(fusednn_library_dir "${1:-${FUSEDNN_LIB_DIR:-${FUSEDNN_DIR:-}}}" "$root" "$here/target/native")"
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
