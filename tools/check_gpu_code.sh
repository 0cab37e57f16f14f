#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Checks the GPU code inside a libfusednn.so built with the CUDA backend, reading it with cuobjdump
# (no GPU needed), so that no kernel launch can fail with "invalid device function" on the GPUs
# the library is built for:
#  - machine code for the ARCHS targets alone (sm_NN, and the architecture-specific sm_NNa of a
#    listed NN), and PTX only for --ptx's virtual architecture;
#  - every GPU module (one per .cu file) carries machine code for each of ARCHS and, with --ptx,
#    that PTX; a module built only for architecture-specific targets (the wgmma MLP kernels, sm_90a
#    alone where ARCHS lists 90) is exempt and named;
#  - every kernel has machine code for each target: each __global__ function of src/backends/cuda
#    (at least one instantiation), each kernel name the host code registers with the CUDA
#    runtime, the same instantiations for every target of ARCHS, and no kernel the host code
#    launches is left undefined.
# Used by tools/check_jetson_library.sh (the Jetson builds) and tools/test_amd64_package.sh (the
# amd64 package's library).
# Usage: tools/check_gpu_code.sh [--cuobjdump PATH] [--ptx ARCH] LIBRARY ARCHS
#   ARCHS        the compute capabilities every module must have machine code for,
#                comma-separated: 72,87 or 75,80,90,100,120
#   --ptx ARCH   the one virtual architecture whose PTX every module must carry (the driver
#                compiles it for GPUs newer than ARCHS); without it the library must carry no PTX
#   --cuobjdump  the cuobjdump to run (default: the one on PATH)
set -euo pipefail
cd "$(dirname "$0")/.."
usage() { echo "usage: $0 [--cuobjdump PATH] [--ptx ARCH] LIBRARY ARCHS" >&2; exit 2; }
cuobjdump="" ptx_arch=""
while [[ $# -gt 0 && "$1" == --* ]]; do
  case "$1" in
    --cuobjdump) [[ $# -ge 2 ]] || usage; cuobjdump="$2"; shift 2 ;;
    --ptx) [[ $# -ge 2 && "$2" =~ ^[0-9]+$ ]] || usage; ptx_arch="$2"; shift 2 ;;
    *) usage ;;
  esac
done
(($# == 2)) || usage
library="$1" arch_list="$2"
[[ "$arch_list" =~ ^[0-9]+(,[0-9]+)*$ ]] ||
  { echo "ARCHS must be numbers such as 87 or 72,87, not '$arch_list'" >&2; exit 2; }
[[ -f "$library" ]] || { echo "no library at $library" >&2; exit 2; }
IFS=, read -ra archs <<<"$arch_list"
targets="$(printf 'sm_%s, ' "${archs[@]}")"
targets="${targets%, }"
[[ -n "$cuobjdump" ]] || cuobjdump="$(command -v cuobjdump)" ||
  { echo "cuobjdump not found: pass --cuobjdump PATH" >&2; exit 1; }

fail() {
  echo "FAIL: $library: $*" >&2
  exit 1
}

# "ELF file    1: <module>.sm_87.cubin", one line per module and target.
elf_list="$("$cuobjdump" --list-elf "$library" 2>&1)" ||
  fail "no GPU machine code (a build without the CUDA backend?): $elf_list"
cubins="$(sed -n 's/^ELF file *[0-9]*: *//p' <<<"$elf_list")"
[[ -n "$cubins" ]] || fail "no GPU machine code (a build without the CUDA backend?)"
listed="$(IFS='|'; echo "${archs[*]}")"
other_targets="$(grep -Ev "\\.sm_($listed)a?\\.cubin$" <<<"$cubins" || true)"
[[ -z "$other_targets" ]] ||
  fail "machine code for targets other than $targets:"$'\n'"$other_targets"

# The modules, and among them those with machine code for a portable target (sm_NN, not sm_NNa):
# these must carry every target of ARCHS.
modules="$(sed -E 's/\.sm_[0-9]+a?\.cubin$//' <<<"$cubins" | sort -u)"
module_count="$(grep -c . <<<"$modules")"
portable_modules="$(sed -n -E 's/\.sm_[0-9]+\.cubin$//p' <<<"$cubins" | sort -u)"
specific_modules="$(comm -23 <(echo "$modules") <(echo "$portable_modules") | grep . || true)"
for arch in "${archs[@]}"; do
  without="$(comm -23 <(echo "$portable_modules") \
    <(sed -n "s/\.sm_${arch}\.cubin$//p" <<<"$cubins" | sort -u) | grep . || true)"
  [[ -z "$without" ]] || fail "GPU modules without sm_$arch machine code:"$'\n'"$without"
done
specific_targets="$(grep -oE 'sm_[0-9]+a\.cubin$' <<<"$cubins" | sed 's/\.cubin$//' | sort -u || true)"

# PTX ("PTX file    1: <module>.sm_120.ptx" for compute_120): none, or --ptx's alone, in every
# portable module.
ptx_files="$("$cuobjdump" --list-ptx "$library" 2>/dev/null | sed -n 's/^PTX file *[0-9]*: *//p' || true)"
if [[ -z "$ptx_arch" ]]; then
  [[ -z "$ptx_files" ]] || fail "carries PTX (machine code only was asked for):"$'\n'"$ptx_files"
  ptx_summary="no PTX"
else
  other_ptx="$(grep -Ev "\\.sm_${ptx_arch}\\.ptx$" <<<"$ptx_files" | grep . || true)"
  [[ -z "$other_ptx" ]] || fail "PTX for architectures other than compute_$ptx_arch:"$'\n'"$other_ptx"
  without="$(comm -23 <(echo "$portable_modules") \
    <(sed -n "s/\.sm_${ptx_arch}\.ptx$//p" <<<"$ptx_files" | sort -u) | grep . || true)"
  [[ -z "$without" ]] || fail "GPU modules without compute_$ptx_arch PTX:"$'\n'"$without"
  ptx_summary="compute_$ptx_arch PTX in each"
fi

# The kernels: each GPU module's ELF ("arch = sm_87", then its section headers) has a PROGBITS
# section ".text.<mangled kernel>" per kernel. (cuobjdump --list-text lists the same sections, but
# shortens names past its length limit to a numbered stub that differs between targets.) The
# dump is filtered as it is read: the section contents it also prints run to hundreds of MB.
elf_dump="$(mktemp)"
trap 'rm -f "$elf_dump"' EXIT
"$cuobjdump" -elf "$library" 2>/dev/null |
  awk '/^arch = / || /PROGBITS/ || ($1 ~ /^0x/ && ($4 == "0x11" || $4 == "0x21"))' >"$elf_dump"
kernels_for() {  # kernels_for TARGET: the mangled names of the kernels with TARGET (sm_87) code
  awk -v arch="$1" '/^arch = sm_[0-9]+/ { current = $3 }
    current == arch && /PROGBITS/ && $NF ~ /^\.text\./ { print substr($NF, 7) }' "$elf_dump" |
    sort -u
}
kernels="$(kernels_for "sm_${archs[0]}")"
kernel_count="$(grep -c . <<<"$kernels" || true)"
((kernel_count > 0)) || fail "no sm_${archs[0]} kernels in cuobjdump -elf's listing"
# The same kernel instantiations for every target of ARCHS: the checks below, made on the first
# target's list (with the architecture-specific targets' kernels), then hold for each.
for arch in "${archs[@]:1}"; do
  differences="$(diff <(echo "$kernels") <(kernels_for "sm_$arch") || true)"
  [[ -z "$differences" ]] ||
    fail "kernels with code for only one of sm_${archs[0]} (<) and sm_$arch (>):"$'\n'"$differences"
done
all_kernels="$kernels"
specific_summary=""
for target in $specific_targets; do
  target_kernels="$(kernels_for "$target")"
  [[ -n "$target_kernels" ]] || fail "no kernels in the $target machine code"
  all_kernels="$(sort -u <(echo "$all_kernels") <(echo "$target_kernels"))"
  specific_summary+=" $(grep -c . <<<"$target_kernels") more have $target code only (the"
  specific_summary+=" modules built for it alone: $(echo $specific_modules));"
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
base_names="$(c++filt <<<"$all_kernels" |
  sed 's/(anonymous namespace):://g; s/^void //; s/[<(].*//; s/.*:://')"
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
without_code="$(comm -23 <(echo "$registered") <(echo "$all_kernels"))"
missing="$(comm -23 <(echo "$without_code") <(echo "$variables") | grep . || true)"
[[ -z "$missing" ]] || fail "registered kernels without $targets machine code:"$'\n'"$missing"

# 3. No launch refers to a kernel the library lacks: a kernel stub nvcc did not emit would be an
#    undefined symbol, so the only undefined ones allowed are the C and C++ runtimes' (versioned)
#    and the weak hooks every shared object has.
undefined="$(readelf --dyn-syms -W "$library" |
  awk '$7 == "UND" && NF >= 8 && $5 != "WEAK" && $8 !~ /@(GLIBC|GLIBCXX|CXXABI|GCC)_/ { print $8 }')"
[[ -z "$undefined" ]] || fail "undefined symbols outside the C and C++ runtimes:"$'\n'"$undefined"

echo "PASS: $library: $module_count GPU modules, each with machine code for $targets and" \
  "nothing else$([[ -n "$specific_modules" ]] && echo " (but those built for an" \
  "architecture-specific target alone)"), $ptx_summary; $kernel_count kernel instantiations," \
  "each with code for every target;$specific_summary covering the" \
  "$(grep -c . <<<"$source_kernels") __global__ functions of the sources and the" \
  "$registered_count names the host code registers; no undefined symbols beyond the C and C++" \
  "runtimes. Instantiations per kernel:"
printf '%s' "$summary"
