# SPDX-License-Identifier: Apache-2.0
# Cross-compiles for 64-bit Arm Linux (Jetson's CPU) with Debian's g++-aarch64-linux-gnu.
#
# Libraries and CMake packages come only from the aarch64 sysroot (/usr/aarch64-linux-gnu) and
# from FUSEDNN_AARCH64_PREFIX, the folder tools/aarch64_dependencies.sh fills with what Debian
# does not ship for aarch64 without multiarch (GoogleTest built with this toolchain, the
# header-only nlohmann-json). Programs (python3, doxygen) are the build machine's.
#
# Where qemu-aarch64 is installed, test programs run under it with the sysroot's loader and
# libraries, so gtest_discover_tests and ctest work on the build machine.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

set(FUSEDNN_AARCH64_TRIPLE aarch64-linux-gnu)
set(CMAKE_C_COMPILER ${FUSEDNN_AARCH64_TRIPLE}-gcc)
set(CMAKE_CXX_COMPILER ${FUSEDNN_AARCH64_TRIPLE}-g++)

set(FUSEDNN_AARCH64_SYSROOT /usr/${FUSEDNN_AARCH64_TRIPLE})
set(FUSEDNN_AARCH64_PREFIX "" CACHE PATH
    "Folder with aarch64 builds of fusednn's dependencies (tools/aarch64_dependencies.sh)")
# try_compile projects read this file again and need the same search roots.
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES FUSEDNN_AARCH64_PREFIX)

set(CMAKE_FIND_ROOT_PATH ${FUSEDNN_AARCH64_SYSROOT})
if(FUSEDNN_AARCH64_PREFIX)
  list(APPEND CMAKE_FIND_ROOT_PATH ${FUSEDNN_AARCH64_PREFIX})
endif()
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

find_program(FUSEDNN_QEMU_AARCH64 qemu-aarch64)
if(FUSEDNN_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${FUSEDNN_QEMU_AARCH64} -L ${FUSEDNN_AARCH64_SYSROOT})
endif()
