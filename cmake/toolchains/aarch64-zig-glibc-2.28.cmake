# SPDX-License-Identifier: Apache-2.0
# Cross-compiles the library for 64-bit Arm Linux with glibc 2.28 as the oldest C library it
# needs, for the manylinux_2_28_aarch64 Python wheel (tools/build_aarch64_wheel.sh).
#
# The compiler is zig's clang (PyPI's `ziglang`), given FUSEDNN_ZIG, the `zig` program of that
# package. `-target aarch64-linux-gnu.2.28` makes zig link against stubs of glibc 2.28 that
# carry only the symbol versions that release has, and link LLVM's libc++, libc++abi and
# libunwind statically into the library (compiled by zig for the target on first use and
# cached). So the library needs no libstdc++ and no glibc symbol newer than 2.28; the exports
# map keeps libc++'s symbols local. Debian's aarch64 sysroot is not searched: its glibc 2.36
# headers would bring in newer symbols. Only FUSEDNN_AARCH64_PREFIX is, for the header-only
# nlohmann-json (tools/aarch64_dependencies.sh).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

set(FUSEDNN_ZIG "" CACHE FILEPATH "The zig program of PyPI's ziglang package")
set(FUSEDNN_AARCH64_PREFIX "" CACHE PATH
    "Folder with aarch64 builds of fusednn's dependencies (tools/aarch64_dependencies.sh)")
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES FUSEDNN_ZIG FUSEDNN_AARCH64_PREFIX)
if(NOT FUSEDNN_ZIG OR NOT EXISTS "${FUSEDNN_ZIG}")
  message(FATAL_ERROR "Set FUSEDNN_ZIG to the zig program of PyPI's ziglang package "
                      "(tools/build_aarch64_wheel.sh does)")
endif()

set(fusednn_zig_target aarch64-linux-gnu.2.28)
set(CMAKE_C_COMPILER "${FUSEDNN_ZIG}" cc -target ${fusednn_zig_target})
set(CMAKE_CXX_COMPILER "${FUSEDNN_ZIG}" c++ -target ${fusednn_zig_target})
# The static libraries between the sources and libfusednn.so are archived by the cross binutils
# (the build machine's own ar may not index AArch64 objects).
find_program(CMAKE_AR aarch64-linux-gnu-ar REQUIRED)
find_program(CMAKE_RANLIB aarch64-linux-gnu-ranlib REQUIRED)
# zig compiles libc++ with debug information; the wheel's library ships without it.
set(CMAKE_SHARED_LINKER_FLAGS_INIT "-Wl,--strip-debug")

set(CMAKE_FIND_ROOT_PATH ${FUSEDNN_AARCH64_PREFIX})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
