#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Checks a Jetson build of libfusednn.so (preset jetson-orin, jetson-xavier or jetson) without a
# Jetson:
#  - tools/check_aarch64_library.sh: an AArch64 ELF shared object with the x86-64 build's soname
#    and exported symbols;
#  - the embedded GPU code (cuobjdump) is machine code for the ARCHS targets alone, no other
#    target and no PTX to compile at run time, and every GPU module carries each of them;
#  - every kernel has machine code for each target: each __global__ function of src/backends/cuda
#    (at least one instantiation), each kernel name the host code registers with the CUDA
#    runtime, the same instantiations for every target, and no kernel the host code launches is
#    left undefined, so that no launch can fail with "invalid device function" on those GPUs.
# cuobjdump: FUSEDNN_JETSON_CUDA_PREFIX's (tools/jetson_cuda_dependencies.sh), else the one on PATH.
# Usage: tools/check_jetson_library.sh AARCH64_LIBRARY ARCHS X86_64_LIBRARY
#   ARCHS: the compute capabilities the library must carry, comma-separated: 87, 72 or 72,87
set -euo pipefail
cd "$(dirname "$0")/.."
if (($# != 3)); then
  echo "usage: $0 AARCH64_LIBRARY ARCH X86_64_LIBRARY" >&2
  exit 2
fi
library="$1" arch_list="$2" x86_library="$3"
[[ "$arch_list" =~ ^[0-9]+(,[0-9]+)*$ ]] ||
  { echo "ARCHS must be numbers such as 87 or 72,87, not '$arch_list'" >&2; exit 2; }
IFS=, read -ra archs <<<"$arch_list"
targets="$(printf 'sm_%s, ' "${archs[@]}")"
targets="${targets%, }"
prefix="${FUSEDNN_JETSON_CUDA_PREFIX:-build/jetson-cuda-11.8}"
cuobjdump="$prefix/usr/bin/cuobjdump"
[[ -x "$cuobjdump" ]] || cuobjdump="$(command -v cuobjdump)" ||
  { echo "cuobjdump not found: run tools/jetson_cuda_dependencies.sh" >&2; exit 1; }

tools/check_aarch64_library.sh "$library" "$x86_library"

fail() {
  echo "FAIL: $library: $*" >&2
  exit 1
}

# "ELF file    1: <module>.sm_87.cubin", one line per module and target.
elf_list="$("$cuobjdump" --list-elf "$library" 2>&1)" ||
  fail "no GPU machine code (a build without the CUDA backend?): $elf_list"
cubins="$(sed -n 's/^ELF file *[0-9]*: *//p' <<<"$elf_list")"
[[ -n "$cubins" ]] || fail "no GPU machine code (a build without the CUDA backend?)"
target_pattern="\\.sm_($(IFS='|'; echo "${archs[*]}"))\\.cubin$"
other_targets="$(grep -Ev "$target_pattern" <<<"$cubins" || true)"
[[ -z "$other_targets" ]] ||
  fail "machine code for targets other than $targets:"$'\n'"$other_targets"
if "$cuobjdump" --list-ptx "$library" 2>/dev/null | grep -q '^PTX file'; then
  fail "carries PTX (the presets build machine code only)"
fi
# Every module (one per .cu file) has a cubin for each target.
modules="$(sed -E 's/\.sm_[0-9]+\.cubin$//' <<<"$cubins" | sort -u)"
module_count="$(grep -c . <<<"$modules")"
for arch in "${archs[@]}"; do
  without="$(comm -23 <(echo "$modules") \
    <(sed -n "s/\.sm_${arch}\.cubin$//p" <<<"$cubins" | sort -u) | grep . || true)"
  [[ -z "$without" ]] || fail "GPU modules without sm_$arch machine code:"$'\n'"$without"
done

# The kernels: each GPU module's ELF ("arch = sm_87", then its section headers) has a PROGBITS
# section ".text.<mangled kernel>" per kernel. (cuobjdump --list-text lists the same sections, but
# shortens names past its length limit to a numbered stub that differs between targets.)
elf_dump="$(mktemp)"
trap 'rm -f "$elf_dump"' EXIT
"$cuobjdump" -elf "$library" >"$elf_dump"
kernels_for() {  # kernels_for ARCH: the mangled names of the kernels with sm_ARCH code
  awk -v arch="sm_$1" '/^arch = sm_[0-9]+/ { current = $3 }
    current == arch && /PROGBITS/ && $NF ~ /^\.text\./ { print substr($NF, 7) }' "$elf_dump" |
    sort -u
}
kernels="$(kernels_for "${archs[0]}")"
kernel_count="$(grep -c . <<<"$kernels" || true)"
((kernel_count > 0)) || fail "no sm_${archs[0]} kernels listed by cuobjdump --list-text"
# The same kernel instantiations for every target: the checks below, made on the first target's
# list, then hold for each.
for arch in "${archs[@]:1}"; do
  differences="$(diff <(echo "$kernels") <(kernels_for "$arch") || true)"
  [[ -z "$differences" ]] ||
    fail "kernels with code for only one of sm_${archs[0]} (<) and sm_$arch (>):"$'\n'"$differences"
done

# 1. The kernel list of the sources: the name of every __global__ function in
#    src/backends/cuda (the last "identifier(" between __global__ and the body's brace, so that
#    __launch_bounds__(...) is passed over). Each must have machine code for at least one
#    instantiation: a kernel whose whole definition an architecture guard left out has none.
source_kernels="$(awk '
  /^[^\/]*__global__/ { collect = 1; text = "" }
  collect {
    text = text " " $0
    if (index($0, "{")) {
      name = ""; rest = text
      while (match(rest, /[A-Za-z_][A-Za-z0-9_]*\(/)) {
        name = substr(rest, RSTART, RLENGTH - 1); rest = substr(rest, RSTART + RLENGTH)
      }
      print name; collect = 0
    }
  }' src/backends/cuda/*/*.cu src/backends/cuda/*/*.cuh | sort -u)"
((${#source_kernels} > 0)) || fail "no __global__ functions found in src/backends/cuda"
# Each kernel's unqualified name: "void ns::(anonymous namespace)::name<...>(...)" -> name.
base_names="$(c++filt <<<"$kernels" | sed 's/(anonymous namespace):://g; s/^void //; s/[<(].*//; s/.*:://')"
missing_kernels=""
summary=""
while read -r name; do
  count="$(grep -cx "$name" <<<"$base_names" || true)"
  ((count > 0)) || missing_kernels+="$name"$'\n'
  summary+="$(printf '  %-36s %3d' "$name" "$count")"$'\n'
done <<<"$source_kernels"
[[ -z "$missing_kernels" ]] ||
  fail "kernels of the sources without $targets code:"$'\n'"$missing_kernels"

# 2. The names the host code registers with the CUDA runtime (the mangled-name literals nvcc's
#    stubs pass to __cudaRegisterFunction, in .rodata) all have machine code, but for device
#    variables (OBJECT symbols of the GPU code, st_info 0x11 global or 0x21 weak), which have none.
registered="$(readelf -p .rodata -W "$library" | grep -o '\] *_Z[A-Za-z0-9_]*$' |
  sed 's/^\] *//' | sort -u)"
registered_count="$(grep -c . <<<"$registered" || true)"
((registered_count > 0)) || fail "no registered kernel names found in .rodata"
variables="$(awk '$1 ~ /^0x/ && ($4 == "0x11" || $4 == "0x21") { print $NF }' "$elf_dump" | sort -u)"
without_code="$(comm -23 <(echo "$registered") <(echo "$kernels"))"
missing="$(comm -23 <(echo "$without_code") <(echo "$variables") | grep . || true)"
[[ -z "$missing" ]] || fail "registered kernels without $targets machine code:"$'\n'"$missing"

# 3. No launch refers to a kernel the library lacks: a kernel stub nvcc did not emit would be an
#    undefined symbol, so the only undefined ones allowed are the C and C++ runtimes' (versioned)
#    and the weak hooks every shared object has.
undefined="$(readelf --dyn-syms -W "$library" |
  awk '$7 == "UND" && NF >= 8 && $5 != "WEAK" && $8 !~ /@(GLIBC|GLIBCXX|CXXABI|GCC)_/ { print $8 }')"
[[ -z "$undefined" ]] || fail "undefined symbols outside the C and C++ runtimes:"$'\n'"$undefined"

echo "PASS: $library: $module_count GPU modules, each with machine code for $targets and" \
  "nothing else, no PTX; $kernel_count kernel instantiations, each with code for every target," \
  "covering the $(grep -c . <<<"$source_kernels") __global__ functions of the sources and the" \
  "$registered_count names the host code registers; no undefined symbols beyond the C and C++" \
  "runtimes. Instantiations per kernel:"
printf '%s' "$summary"
