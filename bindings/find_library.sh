# SPDX-License-Identifier: Apache-2.0
# Sourced by the bindings' run_tests.sh: finds the libfusednn.so to test against.
#   fusednn_library_dir GIVEN ROOT BUILD_DIR
# GIVEN: libfusednn.so itself, the folder holding it, or an install prefix with lib/; when empty,
# the newest libfusednn.so under ROOT's build*/ folders (not a sanitizer build: its runtime must be
# loaded first, which cargo's and Mono's test processes do not do), else the library is built
# into BUILD_DIR. Prints the folder holding the library; fails with a message if there is none.
fusednn_library_dir() {
  local given="$1" root="$2" build_dir="$3"
  if [[ -n "$given" ]]; then
    if [[ -f "$given" ]]; then dirname "$(readlink -f "$given")"; return; fi
    for dir in "$given" "$given/lib" "$given/lib64"; do
      if [[ -e "$dir/libfusednn.so" ]]; then (cd "$dir" && pwd); return; fi
    done
    echo "run_tests.sh: no libfusednn.so in $given, $given/lib or $given/lib64" >&2
    return 1
  fi
  local candidate needed
  while read -r _ candidate; do
    needed="$(readelf -d "$candidate" 2>/dev/null || true)"
    if [[ ! "$needed" =~ lib(a|ub|t)san ]]; then
      dirname "$candidate"
      return
    fi
  done < <(find "$root" -maxdepth 5 -path "$root/bindings" -prune -o -path '*/build*' \
             -name 'libfusednn.so' -printf '%T@ %p\n' 2>/dev/null | sort -nr)
  echo "run_tests.sh: no libfusednn.so found; building it into $build_dir" >&2
  cmake -S "$root" -B "$build_dir" -DCMAKE_BUILD_TYPE=Release -DFUSEDNN_DEVELOPER_MODE=OFF \
    -DFUSEDNN_BUILD_TOOLS=OFF >&2
  cmake --build "$build_dir" --parallel "${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}" --target fusednn >&2
  dirname "$(find "$build_dir" -name 'libfusednn.so' | head -n1)"
}
