#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds the aarch64 Python wheel from an aarch64 build (tools/build_aarch64_wheel.sh) and checks
# it as a Jetson user would get it, on an x86-64 machine:
#
#   1. its name and WHEEL file carry the documented tag, py3-none-manylinux_2_28_aarch64, and
#      `auditwheel show` finds the wheel consistent with that tag or an older one;
#   2. the bundled library, read independently of auditwheel: an AArch64 ELF with soname
#      libfusednn.so.0, the very file the build made, no debug sections, needing only libc, libm,
#      libpthread and libdl (the C++ runtime is linked in: no libstdc++ or libgcc_s), no symbol
#      version newer than the tag allows (GLIBC 2.28: the manylinux_2_28 policy's limit), and,
#      given REFERENCE_BUILD (the aarch64-cpu build), exporting the same symbols as its library;
#   3. pip installs it for that platform into a target folder (`pip install --platform
#      manylinux_2_28_aarch64 --only-binary=:all: --target DIR`); and for the platforms pip on a
#      device of a given glibc accepts (manylinux_2_X down to manylinux_2_17 for glibc 2.X: pip's
#      --platform matches each tag exactly, so they are all listed) it installs on glibc 2.28
#      (RHEL 8), 2.31 (JetPack 5) and 2.35 (JetPack 6) and is refused on glibc 2.27;
#   4. the installed package: its pure-Python part imports on this machine's Python and looks for
#      the library in its own fusednn/lib (where the x86-64 loader cannot open the aarch64 file);
#      tests/package/golden_check.c, cross-built against the installed fusednn/lib/libfusednn.so.0
#      and run under qemu-aarch64, runs the LeNet-5 golden fixture at batch 3 within 1e-5 of
#      PyTorch's output, and given a file that is no model it fails with the library's message
#      (an exception thrown and caught inside the library, through its own C++ runtime); given
#      REFERENCE_BUILD, its C API test suite (tests/api's fusednn_api_tests, which links
#      libfusednn.so.0 and includes only the public headers) passes under qemu-aarch64 with the
#      installed wheel's library in place of the build's (the loader's LD_DEBUG log shows which
#      file it loaded). No aarch64 Python runs the package here, and no glibc older than the build
#      machine's 2.36.
#
# Usage: tests/package/test_aarch64_wheel.sh [BUILD_DIR [REFERENCE_BUILD]]
#   BUILD_DIR        passed to tools/build_aarch64_wheel.sh (default build/aarch64-wheel)
#   REFERENCE_BUILD  an aarch64 build with tests (build/aarch64-cpu, built): its library's exports
#                    and its fusednn_api_tests are checked against the wheel's library
# Exits 0 when every check passes, 1 otherwise.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="$(realpath -m "${1:-$root/build/aarch64-wheel}")"
reference_build="${2:+$(realpath -m "$2")}"
expected_tag=manylinux_2_28_aarch64
glibc_limit=2.28
allowed_needed="libc.so.6 libm.so.6 libpthread.so.0 libdl.so.2"

for tool in aarch64-linux-gnu-gcc qemu-aarch64 readelf python3; do
  command -v "$tool" >/dev/null || {
    echo "test_aarch64_wheel.sh: $tool not found: run tools/install_dependencies.sh --tests" >&2
    exit 1
  }
done

failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
pass() { echo "ok: $*"; }
# Whether version $1 is at most $2 (dotted numbers, as sort -V orders them).
version_at_most() { [[ "$(printf '%s\n%s\n' "$1" "$2" | sort -V | tail -n 1)" == "$2" ]]; }

work="$(mktemp -d "${TMPDIR:-/tmp}/fusednn-wheel.XXXXXX")"
trap 'rm -rf "$work"' EXIT
start=$SECONDS

# ---- 1. the wheel and its tag ----------------------------------------------------------------

"$root/tools/build_aarch64_wheel.sh" "$build" "$work/dist" >"$work/build.log" 2>&1 || {
  cat "$work/build.log"; echo "FAIL: tools/build_aarch64_wheel.sh"; exit 1; }
wheel="$(tail -n 1 "$work/build.log")"
echo "wheel: $(basename "$wheel")"
[[ "$(basename "$wheel")" =~ ^fusednn-[0-9.]+-py3-none-${expected_tag}\.whl$ ]] &&
  pass "the wheel is named for py3-none-$expected_tag" ||
  fail "the wheel's name $(basename "$wheel") does not carry py3-none-$expected_tag"
wheel_file="$(python3 -m zipfile -l "$wheel" | awk '{print $1}' | grep -E '\.dist-info/WHEEL$')"
wheel_metadata="$(python3 -c 'import sys, zipfile; print(zipfile.ZipFile(sys.argv[1]).read(sys.argv[2]).decode())' \
  "$wheel" "$wheel_file")"
tags="$(sed -n 's/^Tag: //p' <<<"$wheel_metadata")"
[[ "$tags" == "py3-none-$expected_tag" ]] && pass "WHEEL: Tag: $tags" ||
  fail "WHEEL's tags are '$(tr '\n' ' ' <<<"$tags")', not py3-none-$expected_tag"
grep -qx 'Root-Is-Purelib: false' <<<"$wheel_metadata" &&
  pass "WHEEL: Root-Is-Purelib: false" || fail "WHEEL does not say Root-Is-Purelib: false"
report="$("${WHEEL_TOOLS:-$root/build/wheel-tools}/bin/auditwheel" show "$wheel" 2>&1)" ||
  fail "auditwheel show failed: $report"
# auditwheel names the oldest policy the wheel is consistent with; it must not be newer than the
# tag's.
found="$(grep -oE 'consistent with the following platform tag: "manylinux_[0-9]+_[0-9]+_aarch64"' \
         <<<"${report//$'\n'/ }" | grep -oE '[0-9]+_[0-9]+_aarch64' | sed -E 's/_aarch64//; s/_/./' ||
         true)"
if [[ -z "$found" ]]; then
  fail "auditwheel show names no manylinux policy: $report"
elif version_at_most "$found" "$glibc_limit"; then
  pass "auditwheel show: consistent with manylinux_${found/./_}_aarch64, so with $expected_tag"
else
  fail "auditwheel show finds the wheel needs manylinux_${found/./_}_aarch64, newer than $expected_tag"
fi

# ---- 2. the bundled library ------------------------------------------------------------------

python3 -m zipfile -e "$wheel" "$work/unzipped"
bundled="$work/unzipped/fusednn/lib/libfusednn.so.0"
listing="$(cd "$work/unzipped" && find . -type f | sort)"
for file in fusednn/__init__.py fusednn/_native.py fusednn/_model.py fusednn/py.typed \
            fusednn/lib/libfusednn.so.0; do
  grep -qx "./$file" <<<"$listing" && pass "the wheel holds $file" || fail "the wheel lacks $file"
done
others="$(grep -E '/lib/' <<<"$listing" | grep -vx './fusednn/lib/libfusednn.so.0' || true)"
[[ -z "$others" ]] || fail "the wheel bundles more than the library: $others"
if [[ -f "$bundled" ]]; then
  readelf -h "$bundled" | grep -q 'Machine: *AArch64$' && pass "the bundled library is AArch64" ||
    fail "the bundled library's machine is '$(readelf -h "$bundled" | sed -n 's/ *Machine: *//p')'"
  soname="$(readelf -d "$bundled" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')"
  [[ "$soname" == libfusednn.so.0 ]] && pass "soname $soname" || fail "soname '$soname'"
  cmp -s "$bundled" "$(realpath "$build/src/api/libfusednn.so")" &&
    pass "the bundled library is the build's $(basename "$(realpath "$build/src/api/libfusednn.so")")" ||
    fail "the bundled library differs from $build/src/api/libfusednn.so"
  readelf -S "$bundled" | grep -q '\.debug_' && fail "the bundled library has debug sections"
  needed="$(readelf -d "$bundled" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')"
  for library in $needed; do
    [[ " $allowed_needed " == *" $library "* ]] || fail "the bundled library needs $library"
  done
  echo "needs: $needed"
  # Every version the library needs (readelf -V's version needs section): GLIBC_ ones up to the
  # tag's glibc, and no other node (GLIBCXX_, CXXABI_, GCC_ would mean a C++ runtime outside it).
  versions="$(readelf -V "$bundled" | sed -n 's/.*Name: \([A-Z][A-Z_]*_[0-9][0-9.]*\).*/\1/p' | sort -u)"
  others="$(grep -v '^GLIBC_' <<<"$versions" || true)"
  [[ -z "$others" ]] && pass "needs no symbol version but GLIBC_ ones" ||
    fail "the library needs versions of other libraries: $(tr '\n' ' ' <<<"$others")"
  highest="$(sed -n 's/^GLIBC_//p' <<<"$versions" | sort -V | tail -n 1)"
  if [[ -z "$highest" ]]; then
    fail "readelf -V shows no GLIBC_ version (the section was not read)"
  elif version_at_most "$highest" "$glibc_limit"; then
    pass "highest GLIBC_ needed: $highest (the tag allows $glibc_limit)"
  else
    fail "the library needs GLIBC_$highest, newer than $expected_tag allows ($glibc_limit)"
  fi
  if [[ -n "$reference_build" ]]; then
    reference="$reference_build/src/api/libfusednn.so"
    # exports LIBRARY: the names of the defined dynamic symbols of default visibility.
    exports() {
      readelf --dyn-syms -W "$1" | awk '$7 != "UND" && $5 != "LOCAL" && $6 == "DEFAULT" &&
                                         $4 != "SECTION" && $4 != "FILE" { print $8 }' |
        sed 's/@.*//' | sort -u
    }
    difference="$(diff <(exports "$reference") <(exports "$bundled") 2>&1 || true)"
    count="$(exports "$bundled" | wc -l)"
    [[ -z "$difference" && "$count" -gt 0 ]] &&
      pass "exports the same $count symbols as $reference" ||
      fail "the exports differ from $reference's: $difference"
  fi
else
  fail "no fusednn/lib/libfusednn.so.0 in the wheel"
fi

# ---- 3. pip, for the tag's platform and an older one -----------------------------------------

target="$work/site"
if python3 -m pip install -q --disable-pip-version-check --no-index --no-deps \
     --platform "$expected_tag" --only-binary=:all: --target "$target" "$wheel" \
     >"$work/pip.log" 2>&1; then
  [[ -f "$target/fusednn/lib/libfusednn.so.0" ]] &&
    pass "pip install --platform $expected_tag --target: fusednn/lib/libfusednn.so.0 installed" ||
    fail "pip installed no fusednn/lib/libfusednn.so.0 into $target"
else
  cat "$work/pip.log"
  fail "pip install --platform $expected_tag refused the wheel"
fi
# pip_on_glibc MINOR FOLDER: installs the wheel for the platforms pip accepts on an aarch64 device
# with glibc 2.MINOR (manylinux_2_MINOR down to manylinux_2_17, and manylinux2014, its alias).
pip_on_glibc() {
  local platforms=(--platform manylinux2014_aarch64) minor
  for ((minor = $1; minor >= 17; minor--)); do
    platforms+=(--platform "manylinux_2_${minor}_aarch64")
  done
  python3 -m pip install -q --disable-pip-version-check --no-index --no-deps --only-binary=:all: \
    "${platforms[@]}" --target "$2" "$wheel"
}
for device in "28 RHEL 8" "31 JetPack 5, Ubuntu 20.04" "35 JetPack 6, Ubuntu 22.04"; do
  if pip_on_glibc "${device%% *}" "$work/glibc-${device%% *}" >"$work/pip-device.log" 2>&1; then
    pass "pip installs the wheel on glibc 2.${device%% *} (${device#* })"
  else
    cat "$work/pip-device.log"
    fail "pip refuses the wheel on glibc 2.${device%% *} (${device#* })"
  fi
done
if pip_on_glibc 27 "$work/glibc-27" >"$work/pip-old.log" 2>&1; then
  fail "pip installs the wheel on glibc 2.27 (manylinux_2_27_aarch64 and older), which it needs more than"
else
  grep -q 'is not a supported wheel on this platform' "$work/pip-old.log" &&
    pass "pip refuses the wheel on glibc 2.27 (manylinux_2_27_aarch64 and older)" ||
    { cat "$work/pip-old.log"; fail "pip failed on glibc 2.27 for another reason"; }
fi

# ---- 4. the installed package ----------------------------------------------------------------

if [[ -f "$target/fusednn/lib/libfusednn.so.0" ]]; then
  # This machine's Python cannot load an aarch64 library; the package must still import and
  # name its bundled copy among the ones it tried.
  if output="$(cd "$work" && env -u FUSEDNN_LIBRARY -u LD_LIBRARY_PATH PYTHONPATH="$target" \
       PYTHONNOUSERSITE=1 python3 - "$target" 2>&1 <<'PYTHON'
import sys
import fusednn
target = sys.argv[1]
if not fusednn.__file__.startswith(target):
    sys.exit(f"fusednn came from {fusednn.__file__}, not {target}")
try:
    fusednn.version()
except fusednn.LibraryNotFoundError as error:
    bundled = f"{target}/fusednn/lib/libfusednn.so.0"
    if bundled not in str(error):
        sys.exit(f"the error does not name the bundled {bundled}: {error}")
    print("import fusednn: ok; the x86-64 loader cannot open the bundled aarch64 library")
else:
    sys.exit("an aarch64 library loaded into x86-64 Python")
PYTHON
  )"; then
    pass "$output"
  else
    fail "the installed package: $output"
  fi

  fixture="$root/tests/fixtures/golden/lenet5"
  python3 "$root/tests/package/write_golden_io.py" "$fixture/io.safetensors" 3 "$work"
  lib_dir="$target/fusednn/lib"
  if aarch64-linux-gnu-gcc -std=c99 -O2 -Wall -Wextra -Wpedantic -Werror -I"$root/include" \
       -o "$work/golden_check" "$root/tests/package/golden_check.c" \
       -L"$lib_dir" -l:libfusednn.so.0 -lm >"$work/cc.log" 2>&1; then
    if env LD_LIBRARY_PATH="$lib_dir" qemu-aarch64 -L /usr/aarch64-linux-gnu "$work/golden_check" \
         "$fixture/model.safetensors" "$work/input.f32" "$work/expected.f32" 3 \
         >"$work/golden.log" 2>&1; then
      pass "golden_check under qemu-aarch64 on the wheel's library: $(grep -m1 '^largest difference' "$work/golden.log")"
    else
      cat "$work/golden.log"
      fail "golden_check failed on the wheel's library"
    fi
    # A file that is no model: the library reports it through its status and message (its
    # loader throws and its C API catches), and golden_check exits 1, not on a signal.
    printf 'not a model' >"$work/not_a_model.safetensors"
    status=0
    env LD_LIBRARY_PATH="$lib_dir" qemu-aarch64 -L /usr/aarch64-linux-gnu "$work/golden_check" \
      "$work/not_a_model.safetensors" "$work/input.f32" "$work/expected.f32" 3 \
      >"$work/bad.log" 2>&1 || status=$?
    message="$(grep -m1 'golden_check: fdnn_' "$work/bad.log" || true)"
    [[ "$status" -eq 1 && "$message" == *not_a_model.safetensors* ]] &&
      pass "golden_check on a file that is no model: $message" ||
      { cat "$work/bad.log"; fail "golden_check on a file that is no model exited $status"; }
  else
    cat "$work/cc.log"
    fail "golden_check.c did not cross-build against the wheel's library"
  fi
fi

# The C API suite of the reference build, run on the installed wheel's library: the executable's
# RUNPATH names the build's own library folder, which LD_LIBRARY_PATH comes before.
api_tests="$reference_build/tests/api/fusednn_api_tests"
if [[ -n "$reference_build" && -f "$target/fusednn/lib/libfusednn.so.0" ]]; then
  if [[ ! -x "$api_tests" ]]; then
    fail "$api_tests not found (build the reference build's tests first)"
  elif readelf -d "$api_tests" | grep -q '(RPATH)'; then
    fail "$api_tests has an RPATH, which would come before LD_LIBRARY_PATH"
  else
    lib_dir="$target/fusednn/lib"
    if qemu-aarch64 -L /usr/aarch64-linux-gnu -E LD_LIBRARY_PATH="$lib_dir" -E LD_DEBUG=libs \
         -E LD_DEBUG_OUTPUT="$work/loader" "$api_tests" >"$work/api.log" 2>&1; then
      loaded="$(sed -n 's/.*calling init: \(.*libfusednn\.so.*\)/\1/p' "$work"/loader.* |
                 sort -u || true)"
      [[ "$loaded" == "$lib_dir/libfusednn.so.0" ]] &&
        pass "fusednn_api_tests on the wheel's library: $(grep -m1 'PASSED' "$work/api.log")" ||
        fail "fusednn_api_tests passed, but the loader loaded '$loaded', not the wheel's library"
    else
      tail -n 40 "$work/api.log"
      fail "fusednn_api_tests fails on the wheel's library"
    fi
  fi
fi

echo
echo "test_aarch64_wheel.sh: $((SECONDS - start)) s"
if ((failures)); then
  echo "test_aarch64_wheel.sh: $failures check(s) FAILED"
  exit 1
fi
echo "test_aarch64_wheel.sh: the aarch64 wheel passes"
