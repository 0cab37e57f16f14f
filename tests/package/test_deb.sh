#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds fusednn's .deb packages with CPack (cmake/packaging.cmake) and tests them as a user gets
# them:
#
#   1. packages: `cpack -G DEB` in the build folder; the build is (re)configured first with
#      CMAKE_INSTALL_PREFIX=/usr and CMAKE_INSTALL_LIBDIR=lib/<multiarch> (the packages'
#      architecture's triplet, from dpkg-architecture: GNUInstallDirs leaves it out of a cross
#      build), so that the library goes where Debian and Ubuntu put libraries;
#   2. their metadata and contents: names, Architecture, Version, the -dev package's dependency on
#      libfusednn0 of the same version, the runtime's Depends (on a native build, also that
#      cmake/debian-depends.cmake, which cross builds use, derives the same line as
#      dpkg-shlibdeps), the files each holds, and the packaged library's ELF machine and soname;
#   3. lintian, failing on any error or warning (the overrides the packages carry, each with its
#      reason, are in cmake/debian/*.lintian-overrides);
#   4. installs them: with `dpkg -i` when run as root on the packages' own architecture (and
#      `dpkg --purge` at the end), otherwise, or when fusednn's packages are already installed, by
#      `dpkg -x` into a temporary root;
#   5. builds tests/package/golden_check.c against the installed files only, with a plain
#      compiler call using pkg-config and as a CMake project using find_package(fusednn), and
#      runs both on the LeNet-5 golden fixture (tests/fixtures/golden/lenet5) at batch 3,
#      against PyTorch's output; then the C and C++ samples (samples/CMakeLists.txt) the same way;
#      then golden_check again with device=auto (the GPU where the library sees one, else the
#      CPU) and device=cuda (refused without a usable GPU, with the message docs/install.md
#      gives for a library with or without GPU code). For arm64 packages on another machine all
#      are cross-built with the aarch64 toolchain and run under qemu-aarch64, the C++ wrapper's
#      sample (samples/01_cpp_raii) the only sample.
#
# Usage: tests/package/test_deb.sh [--arch ARCH] [BUILD_DIR]
#   BUILD_DIR  a configured and built fusednn build folder to package (e.g. build/aarch64-cpu).
#              Without it, build/deb is configured (Release, CPU backend, library only) and built.
#   --arch     the Debian architecture the packages must have (default: this machine's).
# Exits 0 when every check passes, 1 otherwise, 2 on a usage error.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}"

usage() { sed -n '3,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }

host_arch="$(dpkg --print-architecture)"
arch="$host_arch"
build=""
while (($#)); do
  case "$1" in
    --arch) [[ $# -ge 2 ]] || { echo "test_deb.sh: --arch needs a value" >&2; exit 2; }
            arch="$2"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    -*) echo "test_deb.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) [[ -z "$build" ]] || { echo "test_deb.sh: one BUILD_DIR only" >&2; exit 2; }
       build="$1"; shift ;;
  esac
done

for tool in cpack dpkg-deb dpkg-architecture readelf pkg-config lintian python3; do
  command -v "$tool" >/dev/null || {
    echo "test_deb.sh: $tool not found: run tools/install_dependencies.sh --tests" >&2; exit 1; }
done

failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
pass() { echo "ok: $*"; }

# ---- 1. the packages -------------------------------------------------------------------------

multiarch="$(dpkg-architecture -a"$arch" -qDEB_HOST_MULTIARCH 2>/dev/null)" || {
  echo "test_deb.sh: dpkg-architecture knows no architecture '$arch'" >&2; exit 2; }
install_dirs=(-DCMAKE_INSTALL_PREFIX=/usr -DCMAKE_INSTALL_LIBDIR="lib/$multiarch")
# quietly LOG COMMAND...: runs COMMAND with its output in LOG; on failure shows LOG's end and stops.
quietly() {
  local log="$1"
  shift
  "$@" >"$log" 2>&1 || { tail -n 40 "$log"; echo "FAIL: $* (log: $log)"; exit 1; }
}
if [[ -z "$build" ]]; then
  build="$root/build/deb"
  mkdir -p "$build"
  quietly "$build/configure.log" cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release \
    -DFUSEDNN_WITH_CUDA=OFF -DFUSEDNN_DEVELOPER_MODE=OFF -DFUSEDNN_BUILD_TOOLS=OFF \
    "${install_dirs[@]}"
else
  [[ -f "$build/CMakeCache.txt" ]] || { echo "test_deb.sh: $build is not a configured build" >&2; exit 2; }
  build="$(cd "$build" && pwd)"
  quietly "$build/configure.log" cmake "$build" "${install_dirs[@]}"
fi
quietly "$build/build.log" cmake --build "$build" --target fusednn
packages="$build/packages"
rm -rf "$packages"
(cd "$build" && quietly "$build/cpack.log" cpack -G DEB -B "$packages")

runtime_deb=("$packages"/libfusednn[0-9]*_*.deb)
dev_deb=("$packages"/libfusednn-dev_*.deb)
if [[ ${#runtime_deb[@]} -ne 1 || ! -f "${runtime_deb[0]}" || ${#dev_deb[@]} -ne 1 || ! -f "${dev_deb[0]}" ]]; then
  ls -l "$packages"
  echo "FAIL: expected one libfusednn<N> and one libfusednn-dev package in $packages"
  exit 1
fi
runtime_deb="${runtime_deb[0]}" dev_deb="${dev_deb[0]}"
echo "packages: $(basename "$runtime_deb") $(basename "$dev_deb")"

# ---- 2. metadata and contents ----------------------------------------------------------------

field() { dpkg-deb --field "$1" "$2"; }
runtime_name="$(field "$runtime_deb" Package)"
version="$(field "$runtime_deb" Version)"
for deb in "$runtime_deb" "$dev_deb"; do
  name="$(field "$deb" Package)"
  [[ "$(field "$deb" Architecture)" == "$arch" ]] && pass "$name: Architecture $arch" ||
    fail "$name: Architecture is '$(field "$deb" Architecture)', not $arch"
  [[ "$(field "$deb" Version)" == "$version" ]] ||
    fail "$name: Version $(field "$deb" Version) differs from $runtime_name's $version"
done
dev_depends="$(field "$dev_deb" Depends)"
[[ "$dev_depends" == "$runtime_name (= $version)" ]] &&
  pass "libfusednn-dev Depends: $dev_depends" ||
  fail "libfusednn-dev Depends is '$dev_depends', not '$runtime_name (= $version)'"
runtime_depends="$(field "$runtime_deb" Depends)"

# The files each package must hold (paths as dpkg-deb lists them, after ./usr/).
contents() { dpkg-deb --contents "$1" | awk '{print $6}' | sed 's|^\./usr/||'; }
runtime_files="$(contents "$runtime_deb")"
dev_files="$(contents "$dev_deb")"
expect_file() {  # expect_file PACKAGE_NAME LISTING REGEX
  grep -Eq "$3" <<<"$2" && pass "$1 holds $3" || fail "$1 holds nothing matching $3"
}
expect_file "$runtime_name" "$runtime_files" "^lib/$multiarch/libfusednn\\.so\\.[0-9]+$"
expect_file "$runtime_name" "$runtime_files" "^lib/$multiarch/libfusednn\\.so\\.[0-9]+\\.[0-9]+\\.[0-9]+$"
expect_file "$runtime_name" "$runtime_files" "^share/doc/$runtime_name/copyright$"
expect_file "$runtime_name" "$runtime_files" "^share/doc/$runtime_name/changelog\.Debian\.gz$"
expect_file libfusednn-dev "$dev_files" '^include/fusednn/fusednn\.h$'
expect_file libfusednn-dev "$dev_files" "^lib/$multiarch/libfusednn\\.so$"
expect_file libfusednn-dev "$dev_files" "^lib/$multiarch/cmake/fusednn/fusednnConfig\\.cmake$"
expect_file libfusednn-dev "$dev_files" "^lib/$multiarch/pkgconfig/fusednn\\.pc$"
expect_file libfusednn-dev "$dev_files" '^share/doc/libfusednn-dev/copyright$'
grep -Eq '(^|/)(bin/|libfusednn\.so$)' <<<"$runtime_files" &&
  fail "$runtime_name holds a program or the development link: $(grep -E '(^|/)(bin/|libfusednn\.so$)' <<<"$runtime_files")"
grep -Eq 'libfusednn\.so\.' <<<"$dev_files" && fail "libfusednn-dev holds the runtime library"

# Unpacked copies, for the ELF checks and for installing without root.
unpacked="$(mktemp -d "${TMPDIR:-/tmp}/fusednn-deb.XXXXXX")"
installed_by_dpkg=""
cleanup() {
  rm -rf "$unpacked"
  if [[ -n "$installed_by_dpkg" ]]; then
    dpkg --purge libfusednn-dev "$runtime_name" >/dev/null && echo "removed the packages (dpkg --purge)"
  fi
}
trap cleanup EXIT
dpkg-deb -x "$runtime_deb" "$unpacked/root"
dpkg-deb -x "$dev_deb" "$unpacked/root"
library="$(find "$unpacked/root" -type f -name 'libfusednn.so.*' | head -n1)"
declare -A machine=([amd64]="Advanced Micro Devices X86-64" [arm64]="AArch64")
if [[ -n "${machine[$arch]:-}" ]]; then
  readelf -h "$library" | grep -q "Machine: *${machine[$arch]}$" &&
    pass "the packaged library is ${machine[$arch]} (readelf -h)" ||
    fail "the packaged library's machine is '$(readelf -h "$library" | sed -n 's/ *Machine: *//p')', not ${machine[$arch]}"
fi
# Depends names libc6 with a version, and libstdc++6 exactly when the library needs the shared
# C++ runtime (a library with it linked in, as the jetson preset's, does not).
if readelf -d "$library" | grep -q '(NEEDED).*\[libstdc++\.so\.6\]'; then
  [[ "$runtime_depends" == *"libc6 (>= "* && "$runtime_depends" == *"libstdc++6"* ]] &&
    pass "$runtime_name Depends: $runtime_depends" ||
    fail "$runtime_name Depends '$runtime_depends' lacks libc6 (>= ...) or libstdc++6"
else
  [[ "$runtime_depends" == *"libc6 (>= "* && "$runtime_depends" != *"libstdc++6"* ]] &&
    pass "$runtime_name Depends: $runtime_depends (the C++ runtime is linked in)" ||
    fail "$runtime_name Depends '$runtime_depends' lacks libc6 (>= ...) or names libstdc++6," \
      "which the library does not need"
fi
soname="$(readelf -d "$library" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')"
[[ "$soname" == "libfusednn.so.${runtime_name#libfusednn}" ]] && pass "soname $soname" ||
  fail "soname '$soname' does not match the package name $runtime_name"
readelf -S "$library" | grep -q '\.debug_info' && fail "the packaged library is not stripped"
if [[ "$arch" == "$host_arch" ]]; then
  # Cross builds take their Depends from cmake/debian-depends.cmake; here it must agree with
  # dpkg-shlibdeps, which made this package's line.
  derived="$(cmake -DLIBRARY="$library" -P "$root/cmake/debian-depends.cmake")"
  [[ "$derived" == "$runtime_depends" ]] &&
    pass "debian-depends.cmake derives dpkg-shlibdeps' Depends" ||
    fail "debian-depends.cmake derives '$derived', dpkg-shlibdeps '$runtime_depends'"
fi

# ---- 3. lintian ------------------------------------------------------------------------------

start=$SECONDS
if lintian --fail-on error,warning "$runtime_deb" "$dev_deb" >"$build/lintian.log" 2>&1; then
  pass "lintian: no error or warning ($((SECONDS - start)) s)"
else
  cat "$build/lintian.log"
  fail "lintian reported errors or warnings"
fi

# ---- 4. install ------------------------------------------------------------------------------

# A fusednn already installed on this machine is left alone: the packages are unpacked instead of
# installed over it.
preinstalled=""
for name in "$runtime_name" libfusednn-dev; do
  dpkg-query -W -f='${Status}' "$name" 2>/dev/null | grep -q 'ok installed' && preinstalled+=" $name"
done
if [[ "$arch" == "$host_arch" && $(id -u) -eq 0 && -z "$preinstalled" ]]; then
  installed_by_dpkg=1  # purged at exit even if dpkg -i stops half way
  dpkg -i "$runtime_deb" "$dev_deb" >"$build/dpkg.log" 2>&1 || {
    cat "$build/dpkg.log"; echo "FAIL: dpkg -i"; exit 1; }
  prefix=/usr
  pkg_config_env=()  # the system's pkg-config search path must find fusednn.pc by itself
  pass "installed with dpkg -i"
else
  prefix="$unpacked/root/usr"
  pkg_config_env=(PKG_CONFIG_PATH="$prefix/lib/$multiarch/pkgconfig")
  if [[ "$arch" != "$host_arch" ]]; then
    echo "$arch packages on $host_arch: unpacked with dpkg -x into $unpacked/root"
  elif [[ -n "$preinstalled" ]]; then
    echo "already installed on this machine:$preinstalled; left as they are, and the packages" \
         "unpacked with dpkg -x into $unpacked/root instead of installed with dpkg -i"
  else
    echo "not root: the packages are unpacked with dpkg -x into $unpacked/root instead of" \
         "installed with dpkg -i"
  fi
fi
# Installed: the loader finds the library by itself (the package's ldconfig trigger has run).
# Unpacked: LD_LIBRARY_PATH points at the copy.
library_env=()
if [[ -z "$installed_by_dpkg" ]]; then
  library_env=(LD_LIBRARY_PATH="$prefix/$(dirname "$(grep -E 'libfusednn\.so\.[0-9]+$' <<<"$runtime_files")")")
fi

# ---- 5. consumers on the golden fixture ------------------------------------------------------

fixture="$root/tests/fixtures/golden/lenet5"
batch=3
python3 "$root/tests/package/write_golden_io.py" "$fixture/io.safetensors" "$batch" "$unpacked"
check_args=("$fixture/model.safetensors" "$unpacked/input.f32" "$unpacked/expected.f32" "$batch")

cc="${CC:-cc}"
toolchain_args=()
runner=()
if [[ "$arch" != "$host_arch" ]]; then
  case "$arch" in
    arm64) cc=aarch64-linux-gnu-gcc
           toolchain_args=(-DCMAKE_TOOLCHAIN_FILE="$root/cmake/toolchains/aarch64-linux-gnu.cmake"
                           -DFUSEDNN_AARCH64_PREFIX="$prefix")
           runner=(qemu-aarch64 -L /usr/aarch64-linux-gnu) ;;
    *) echo "test_deb.sh: no cross compiler known for $arch; the consumers are not built"
       ((failures == 0)) && exit 0 || exit 1 ;;
  esac
  command -v "$cc" >/dev/null && command -v "${runner[0]}" >/dev/null || {
    fail "$cc or ${runner[0]} not found: run tools/install_dependencies.sh --tests"; exit 1; }
fi
run_consumer() {  # run_consumer LABEL PROGRAM
  local log="$unpacked/$1.log"
  if env "${library_env[@]}" "${runner[@]}" "$2" "${check_args[@]}" >"$log" 2>&1; then
    pass "$1: $(grep -m1 '^largest difference' "$log")"
  else
    cat "$log"
    fail "$1: golden_check failed"
  fi
}

# 5a. A plain compiler call with pkg-config's flags: the include and library folders come from
# the installed fusednn.pc alone.
read -ra flags <<<"$(env "${pkg_config_env[@]}" pkg-config --cflags --libs fusednn)"
echo "pkg-config --cflags --libs fusednn: ${flags[*]}"
if "$cc" -std=c99 -O2 -Wall -Wextra -Wpedantic -Werror -o "$unpacked/golden_check_pkgconfig" \
     "$root/tests/package/golden_check.c" "${flags[@]}" -lm; then
  run_consumer "pkg-config build" "$unpacked/golden_check_pkgconfig"
else
  fail "golden_check.c did not build with pkg-config's flags"
fi

# 5b. A CMake project with find_package(fusednn): it must find the installed package, not
# another copy on the machine.
cmake_build="$unpacked/cmake"
if cmake -S "$root/tests/package" -B "$cmake_build" -DCMAKE_BUILD_TYPE=Release \
     -DCMAKE_PREFIX_PATH="$prefix" "${toolchain_args[@]}" >"$unpacked/cmake.log" 2>&1 &&
   cmake --build "$cmake_build" >>"$unpacked/cmake.log" 2>&1; then
  found="$(sed -n 's/^fusednn_DIR:PATH=//p' "$cmake_build/CMakeCache.txt")"
  if [[ "$found" == "$prefix/lib/"* ]]; then
    pass "find_package(fusednn) found $found"
    run_consumer "find_package build" "$cmake_build/golden_check"
  else
    fail "find_package(fusednn) found '$found', not the package under $prefix/lib"
  fi
else
  cat "$unpacked/cmake.log"
  fail "the find_package(fusednn) consumer did not configure or build"
fi

# 5c. The C and C++ samples, built with find_package against the same files: every sample of
# samples/CMakeLists.txt (00_hello_c, 01_cpp_raii with the C++ wrapper fusednn/fusednn.hpp from
# libfusednn-dev, 06_threads, 07_cuda_stream, 08_jetson_camera_loop); each checks its own output,
# and the GPU ones skip, or run on the CPU, where no GPU can be used. Cross-built packages:
# samples/01_cpp_raii alone, under qemu.
if [[ "$arch" == "$host_arch" ]]; then
  sample_source="$root/samples"
  sample_programs=(00_hello_c/hello_c 01_cpp_raii/cpp_raii 06_threads/threads
                   07_cuda_stream/cuda_stream 08_jetson_camera_loop/camera_loop)
else
  sample_source="$root/samples/01_cpp_raii"
  sample_programs=(cpp_raii)
fi
samples_build="$unpacked/samples"
if cmake -S "$sample_source" -B "$samples_build" -DCMAKE_BUILD_TYPE=Release \
     -DCMAKE_PREFIX_PATH="$prefix" "${toolchain_args[@]}" >"$unpacked/samples.log" 2>&1 &&
   cmake --build "$samples_build" >>"$unpacked/samples.log" 2>&1; then
  found="$(sed -n 's/^fusednn_DIR:PATH=//p' "$samples_build/CMakeCache.txt")"
  [[ "$found" == "$prefix/lib/"* ]] ||
    fail "the samples' find_package(fusednn) found '$found', not the package under $prefix/lib"
  for program in "${sample_programs[@]}"; do
    sample="$(basename "$sample_source")"  # the sample's folder: 01_cpp_raii
    [[ "$program" == */* ]] && sample="${program%%/*}"
    log="$unpacked/sample-$sample.log"
    if (cd "$unpacked" && env "${library_env[@]}" "${runner[@]}" "$samples_build/$program") \
         >"$log" 2>&1; then
      note="$(grep -m1 '^SKIP:' "$log" || true)"
      pass "samples/$sample built against the packages and passed${note:+ ($note)}"
    else
      tail -n 30 "$log"
      fail "samples/$sample failed against the packages"
    fi
  done
else
  tail -n 30 "$unpacked/samples.log"
  fail "the samples did not configure or build against the packages"
fi

# 5d. The device a model runs on: device=auto runs on a GPU where the library sees one and on the
# CPU otherwise, within the same tolerance of PyTorch's output; device=cuda runs on the GPU, or,
# where none can be used, is refused with FDNN_STATUS_UNSUPPORTED and the message docs/install.md
# gives: "no CUDA device is visible" from the CUDA backend of a library with GPU code (an
# .nv_fatbin section), "built without the CUDA backend" from a CPU-only one.
golden_check="$unpacked/golden_check_pkgconfig"
if [[ -x "$golden_check" ]]; then
  run_golden() {  # run_golden DEVICE LOG: golden_check on DEVICE; its status
    env "${library_env[@]}" "${runner[@]}" "$golden_check" "${check_args[@]}" "$1" >"$2" 2>&1
  }
  auto_log="$unpacked/device-auto.log"
  if run_golden auto "$auto_log"; then
    gpus="$(sed -n 's/^CUDA devices: //p' "$auto_log")"
    used="$(sed -n 's/^device: //p' "$auto_log")"
    expected_device=cpu
    [[ "$gpus" =~ ^[1-9] ]] && expected_device=cuda
    [[ "$used" == "$expected_device" ]] &&
      pass "device=auto ran on the $used with $gpus CUDA device(s) visible: $(grep -m1 '^largest difference' "$auto_log")" ||
      fail "device=auto ran on '$used' with $gpus CUDA device(s) visible, not on the $expected_device"
  else
    cat "$auto_log"
    fail "golden_check with device=auto failed"
    gpus=""
  fi
  cuda_log="$unpacked/device-cuda.log"
  if [[ "$gpus" =~ ^[1-9] ]]; then
    run_golden cuda "$cuda_log" && grep -q '^device: cuda$' "$cuda_log" &&
      pass "device=cuda ran on the GPU: $(grep -m1 '^largest difference' "$cuda_log")" ||
      { cat "$cuda_log"; fail "golden_check with device=cuda failed on a machine with a GPU"; }
  elif [[ "$gpus" == 0 ]]; then
    expected_message="FDNN_STATUS_UNSUPPORTED: fdnn_model_create_from_file: options.device is"
    if readelf -S -W "$library" | grep -q '\.nv_fatbin'; then
      expected_message+=" FDNN_DEVICE_CUDA but no CUDA device is visible"
    else
      expected_message+=" FDNN_DEVICE_CUDA but this libfusednn was built without the CUDA backend"
    fi
    run_golden cuda "$cuda_log" && status=0 || status=$?
    message="$(grep -m1 'fdnn_model_create_from_file returned' "$cuda_log" | sed 's/.* returned //')"
    [[ $status -eq 1 && "$message" == "$expected_message"* ]] &&
      pass "device=cuda without a usable GPU: $message" ||
      { cat "$cuda_log"; fail "device=cuda without a usable GPU: exit $status, message '$message', not '$expected_message...'"; }
  fi
fi

echo
if ((failures)); then
  echo "test_deb.sh: $failures check(s) FAILED"
  exit 1
fi
echo "test_deb.sh: the $arch packages pass"
