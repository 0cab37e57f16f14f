# SPDX-License-Identifier: Apache-2.0
# Cross-compiles fusednn with its CUDA backend for Jetson (aarch64 Linux with an integrated GPU):
# the aarch64 toolchain of aarch64-linux-gnu.cmake, plus the CUDA 11.8 toolkit that
# tools/jetson_cuda_dependencies.sh extracts from Debian bookworm's non-free packages into
# FUSEDNN_JETSON_CUDA_PREFIX (never installed system-wide, so the machine's own nvcc stays the
# default for every other build).
#
# From that prefix: the amd64 nvcc (which still targets sm_72 and sm_87, unlike CUDA 13), and the
# arm64 CUDA runtime and headers that the aarch64 library is compiled and linked against. nvcc's
# host compiler is Debian's aarch64-linux-gnu-g++; CUDA 11.8 accepts GCC up to 11 and this
# machine's cross compiler is GCC 12, so nvcc is told to accept it (-allow-unsupported-compiler):
# the host code nvcc hands it is ordinary C++17, which GCC 12 compiles as GCC 11 would.
include(${CMAKE_CURRENT_LIST_DIR}/aarch64-linux-gnu.cmake)

set(FUSEDNN_JETSON_CUDA_PREFIX "" CACHE PATH
    "Folder tools/jetson_cuda_dependencies.sh extracted the CUDA 11.8 packages into")
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES FUSEDNN_JETSON_CUDA_PREFIX)
if(NOT FUSEDNN_JETSON_CUDA_PREFIX)
  message(FATAL_ERROR "Set FUSEDNN_JETSON_CUDA_PREFIX to the folder tools/jetson_cuda_dependencies.sh "
                      "fills (the jetson-orin and jetson-xavier presets do)")
endif()
set(fusednn_jetson_nvcc ${FUSEDNN_JETSON_CUDA_PREFIX}/usr/lib/nvidia-cuda-toolkit/bin/nvcc)
if(NOT EXISTS ${fusednn_jetson_nvcc})
  message(FATAL_ERROR "${fusednn_jetson_nvcc} not found: run tools/jetson_cuda_dependencies.sh")
endif()

set(CMAKE_CUDA_COMPILER ${fusednn_jetson_nvcc})
set(CMAKE_CUDA_HOST_COMPILER ${FUSEDNN_AARCH64_TRIPLE}-g++)
set(CMAKE_CUDA_FLAGS_INIT "-allow-unsupported-compiler")

# The arm64 packages' headers are in <prefix>/usr/include and their libraries in
# <prefix>/usr/lib/aarch64-linux-gnu, where find_library looks under a find root.
list(APPEND CMAKE_FIND_ROOT_PATH ${FUSEDNN_JETSON_CUDA_PREFIX})
set(CUDAToolkit_ROOT ${FUSEDNN_JETSON_CUDA_PREFIX}/usr)
