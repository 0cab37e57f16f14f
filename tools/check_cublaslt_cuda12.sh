#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Checks the claim that lets the Jetson library (built with CUDA 11.8) load JetPack 6's
# libcublasLt.so.12 where libcublasLt.so.11 is absent (linear/cublaslt_library.cpp):
#  1. tools/audit_cublaslt_abi.py --self-test: the audit reports a doctored header;
#  2. the audit of CUDA 11.8's cublasLt.h against cuBLAS 12.2 (JetPack 6.0), 12.6 (JetPack 6.1
#     and 6.2) and 12.9 (the last 12.x): every function, type and value fusednn uses must agree,
#     but the matmul descriptor's storage size (184 bytes under 11.8, 256 under 12), which
#  3. tools/cublaslt_descriptor_probe.cpp covers: compiled against CUDA 11.8's header, it describes
#     fusednn's products through each libcublasLt.so.12, which must accept every call and write
#     nothing past the 184 bytes (run natively for the x86-64 12.2 library, PyPI having no aarch64
#     wheel of it, and under qemu-aarch64 for the aarch64 12.6 and 12.9 libraries);
#  4. tools/cublaslt_loader_probe.cpp: the backend's loader (cublaslt_library.cpp, compiled with
#     CUDA 11.8's headers), with only each libcublasLt.so.12 on the library path, must load it
#     and say that it did and why libcublasLt.so.11 was passed over.
# It also builds CUBLAS12_DIR/cublaslt_gpu_check (tools/cublaslt_gpu_check.cpp), which needs a GPU
# to run: CUBLAS12_DIR/cublaslt_gpu_check CUBLAS12_DIR/12.2.5.6/nvidia/cublas/lib/libcublasLt.so.12
#   CUBLAS12_DIR/12.2.5.6/nvidia/cuda_runtime/lib/libcudart.so.12
# The cuBLAS 12 headers and libcublasLt.so.12 come from PyPI's nvidia-cublas-cu12 wheels, the
# other CUDA headers cublasLt.h includes from nvidia-cuda-runtime-cu12 (pip download --no-deps),
# unpacked into CUBLAS12_DIR (default build/cublas-cu12) and the wheels deleted; a version already
# unpacked there is not fetched again.
# Usage: tools/check_cublaslt_cuda12.sh [CUDA_11_8_PREFIX [CUBLAS12_DIR]]
#   (default build/jetson-cuda-11.8, filled by tools/jetson_cuda_dependencies.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
cuda_11_8="$(realpath "${1:-build/jetson-cuda-11.8}")/usr/include"
cublas12="$(realpath -m "${2:-build/cublas-cu12}")"
[[ -f "$cuda_11_8/cublasLt.h" ]] ||
  { echo "no CUDA 11.8 cublasLt.h in $cuda_11_8 (tools/jetson_cuda_dependencies.sh)" >&2; exit 1; }
start=$SECONDS

# cuBLAS version : its wheel's platform : the CUDA runtime wheel of the same toolkit
releases=("12.2.5.6:x86_64:12.2.140" "12.6.1.4:aarch64:12.6.77" "12.9.1.4:aarch64:12.9.79")

fetch() {  # fetch CUBLAS_VERSION PLATFORM RUNTIME_VERSION -> unpacked into $cublas12/CUBLAS_VERSION
  local folder="$cublas12/$1" platforms=()
  [[ -f "$folder/unpacked" ]] && return
  case "$2" in
    x86_64) platforms=(--platform manylinux1_x86_64 --platform manylinux2014_x86_64
                       --platform manylinux_2_17_x86_64) ;;
    aarch64) platforms=(--platform manylinux2014_aarch64 --platform manylinux_2_17_aarch64
                        --platform manylinux_2_27_aarch64) ;;
  esac
  rm -rf "$folder" && mkdir -p "$folder/wheels"
  python3 -m pip download -q --no-deps --only-binary=:all: "${platforms[@]}" \
    --python-version 3.11 -d "$folder/wheels" "nvidia-cublas-cu12==$1" \
    "nvidia-cuda-runtime-cu12==$3"
  # The headers, libcublasLt.so.12 and libcudart.so.12 (for tools/cublaslt_gpu_check.cpp) only:
  # the cuBLAS wheel also holds libcublas and more.
  python3 - "$folder" "$folder"/wheels/*.whl <<'EOF'
import sys, zipfile
wanted = ("nvidia/cublas/include/", "nvidia/cuda_runtime/include/",
          "nvidia/cublas/lib/libcublasLt.so.12", "nvidia/cuda_runtime/lib/libcudart.so.12")
for wheel in sys.argv[2:]:
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(sys.argv[1], [n for n in archive.namelist() if n.startswith(wanted)])
EOF
  rm -rf "$folder/wheels"
  echo "$2" >"$folder/unpacked"
}

python3 tools/audit_cublaslt_abi.py --self-test "$cuda_11_8"

probes="$(mktemp -d)"
trap 'rm -rf "$probes"' EXIT
g++ -std=c++17 -O1 -Wall -Wextra -Werror -isystem "$cuda_11_8" \
  tools/cublaslt_descriptor_probe.cpp -ldl -o "$probes/x86_64"
aarch64-linux-gnu-g++ -std=c++17 -O1 -Wall -Wextra -Werror -isystem "$cuda_11_8" \
  tools/cublaslt_descriptor_probe.cpp -ldl -o "$probes/aarch64"
# Built, not run (it needs a GPU): the GPU check docs/jetson.md gives for the GPU machine.
mkdir -p "$cublas12"
g++ -std=c++17 -O2 -Wall -Wextra -Werror -isystem "$cuda_11_8" tools/cublaslt_gpu_check.cpp -ldl \
  -o "$cublas12/cublaslt_gpu_check"
loader_sources=(tools/cublaslt_loader_probe.cpp src/backends/cuda/linear/cublaslt_library.cpp
                src/backends/cuda/linear/cublaslt_sonames.cpp)
g++ -std=c++17 -O1 -Wall -Wextra -Werror -Isrc -isystem "$cuda_11_8" "${loader_sources[@]}" -ldl \
  -o "$probes/loader_x86_64"
aarch64-linux-gnu-g++ -std=c++17 -O1 -Wall -Wextra -Werror -Isrc -isystem "$cuda_11_8" \
  "${loader_sources[@]}" -ldl -o "$probes/loader_aarch64"

for release in "${releases[@]}"; do
  IFS=: read -r version platform runtime <<<"$release"
  fetch "$version" "$platform" "$runtime"
  echo "== CUDA 11.8's cublasLt.h against cuBLAS $version"
  python3 tools/audit_cublaslt_abi.py --tolerate cublasLtMatmulDescOpaque_t "$cuda_11_8" \
    "$cublas12/$version/nvidia/cublas/include:$cublas12/$version/nvidia/cuda_runtime/include"
  library="$cublas12/$version/nvidia/cublas/lib/libcublasLt.so.12"
  only_12=(env LD_LIBRARY_PATH="$(dirname "$library")")
  if [[ $platform == aarch64 ]]; then
    only_12=(qemu-aarch64 -L /usr/aarch64-linux-gnu -E LD_LIBRARY_PATH="$(dirname "$library")")
  fi
  "${only_12[@]}" "$probes/$platform" "$library"
  loaded=$("${only_12[@]}" "$probes/loader_$platform")
  echo "$loaded"
  expected="loaded: libcublasLt.so.12 (cuBLASLt ${version%.*}; cannot load libcublasLt.so.11 ("
  [[ $loaded == "$expected"* ]] ||
    { echo "check_cublaslt_cuda12.sh: the loader did not take cuBLAS $version's" >&2; exit 1; }
done
echo "check_cublaslt_cuda12.sh: CUDA 11.8's cuBLASLt use holds for cuBLAS ${releases[*]%%:*}" \
  "($((SECONDS - start)) s)"
