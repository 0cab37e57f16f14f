# SPDX-License-Identifier: Apache-2.0
# The jetson preset's toolchain: the compilers of jetson-cuda-11.8.cmake (Debian 12's aarch64
# GCC 12, CUDA 11.8's nvcc with GCC 12 as its host compiler) against the C library of Debian 11,
# glibc 2.31, which is Ubuntu 20.04's and so JetPack 5's, with the C++ runtime linked in, so that
# the library needs nothing newer than JetPack 5 has (JetPack 6 has more).
#
# FUSEDNN_GLIBC_2_31_PREFIX is the folder tools/aarch64_glibc_2.31_sysroot.sh fills:
#  - compiling: --sysroot, and -nostdinc followed by GCC's own header folders (libstdc++'s and the
#    compiler's) and the sysroot's C headers, since the cross GCC would otherwise search Debian
#    12's C headers (/usr/aarch64-linux-gnu/include) before any sysroot's; for nvcc the same
#    flags go to its host compiler;
#  - linking: the sysroot's startup files and libraries ahead of Debian 12's; libstdc++ and
#    libgcc static (the exports map keeps their symbols local), with GCC 10's unwinder in place
#    of GCC 12's, which calls _dl_find_object (glibc 2.35), and the __libc_single_threaded flag
#    (glibc 2.32) that GCC 12's libstdc++ reads (cmake/toolchains/glibc-2.31/). Unreferenced
#    sections are dropped (--gc-sections): the exception classes pull in libstdc++'s
#    std::random_device, whose arc4random source (glibc 2.36) nothing calls; a use of it would
#    be an undefined symbol, which --no-undefined makes a link error.
include(${CMAKE_CURRENT_LIST_DIR}/jetson-cuda-11.8.cmake)

set(FUSEDNN_GLIBC_2_31_PREFIX "" CACHE PATH
    "Folder tools/aarch64_glibc_2.31_sysroot.sh filled with Debian 11's aarch64 C library")
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES FUSEDNN_GLIBC_2_31_PREFIX)
set(fusednn_compat_object ${FUSEDNN_GLIBC_2_31_PREFIX}/compat/libc_single_threaded.o)
if(NOT FUSEDNN_GLIBC_2_31_PREFIX OR NOT EXISTS ${fusednn_compat_object})
  message(FATAL_ERROR "Set FUSEDNN_GLIBC_2_31_PREFIX to the folder tools/aarch64_glibc_2.31_sysroot.sh "
                      "fills (the jetson preset does), after running it")
endif()
set(fusednn_sysroot ${FUSEDNN_GLIBC_2_31_PREFIX}/sysroot)
set(CMAKE_SYSROOT ${fusednn_sysroot})

# fusednn_compiler_headers(LANGUAGE OUT): the folders the cross GCC searches for <...> headers
# in LANGUAGE (c or c++), but those holding the C library's stdio.h, which are Debian 12's.
function(fusednn_compiler_headers language out)
  execute_process(
    COMMAND ${FUSEDNN_AARCH64_TRIPLE}-gcc -x ${language} -E -v -
    INPUT_FILE /dev/null OUTPUT_QUIET ERROR_VARIABLE listing RESULT_VARIABLE failed)
  if(failed OR NOT listing MATCHES "search starts here:\n(.*)\nEnd of search list")
    message(FATAL_ERROR "${FUSEDNN_AARCH64_TRIPLE}-gcc did not list its header folders: ${listing}")
  endif()
  string(REPLACE "\n" ";" lines "${CMAKE_MATCH_1}")
  set(folders "")
  foreach(line IN LISTS lines)
    string(STRIP "${line}" folder)
    if(IS_DIRECTORY "${folder}" AND NOT EXISTS "${folder}/stdio.h")
      file(REAL_PATH "${folder}" folder)
      list(APPEND folders "${folder}")
    endif()
  endforeach()
  list(APPEND folders ${fusednn_sysroot}/usr/include/${FUSEDNN_AARCH64_TRIPLE}
       ${fusednn_sysroot}/usr/include)
  set(${out} "${folders}" PARENT_SCOPE)
endfunction()

fusednn_compiler_headers(c fusednn_c_headers)
fusednn_compiler_headers(c++ fusednn_cxx_headers)
list(TRANSFORM fusednn_c_headers PREPEND "-isystem ")
list(JOIN fusednn_c_headers " " fusednn_c_flags)
set(CMAKE_C_FLAGS_INIT "-nostdinc ${fusednn_c_flags}")
list(TRANSFORM fusednn_cxx_headers PREPEND "-isystem ")
list(JOIN fusednn_cxx_headers " " fusednn_cxx_flags)
set(CMAKE_CXX_FLAGS_INIT "-nostdinc ${fusednn_cxx_flags}")
# CMake passes no sysroot to nvcc: the host compiler gets it, and the header folders, through
# -Xcompiler (one comma-separated list).
string(REPLACE " " "," fusednn_cuda_host_flags "--sysroot=${fusednn_sysroot} ${CMAKE_CXX_FLAGS_INIT}")
string(APPEND CMAKE_CUDA_FLAGS_INIT " -Xcompiler=${fusednn_cuda_host_flags}")

# --sysroot again: CMake gives it to GCC links but not to those of CUDA targets.
set(fusednn_link_flags
  --sysroot=${fusednn_sysroot} -static-libstdc++ -static-libgcc -Wl,--gc-sections
  -B${fusednn_sysroot}/usr/lib/${FUSEDNN_AARCH64_TRIPLE}
  -L${FUSEDNN_GLIBC_2_31_PREFIX}/unwinder
  -L${fusednn_sysroot}/lib/${FUSEDNN_AARCH64_TRIPLE}
  -L${fusednn_sysroot}/usr/lib/${FUSEDNN_AARCH64_TRIPLE}
  ${fusednn_compat_object})
list(JOIN fusednn_link_flags " " fusednn_link_flags)
set(CMAKE_SHARED_LINKER_FLAGS_INIT "${fusednn_link_flags}")
set(CMAKE_MODULE_LINKER_FLAGS_INIT "${fusednn_link_flags}")
set(CMAKE_EXE_LINKER_FLAGS_INIT "${fusednn_link_flags}")

# Libraries (the CUDA runtime's librt, libdl and libpthread among them) come from this sysroot,
# never from Debian 12's.
set(CMAKE_FIND_ROOT_PATH ${fusednn_sysroot} ${FUSEDNN_JETSON_CUDA_PREFIX})
if(FUSEDNN_AARCH64_PREFIX)
  list(APPEND CMAKE_FIND_ROOT_PATH ${FUSEDNN_AARCH64_PREFIX})
endif()
if(FUSEDNN_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${FUSEDNN_QEMU_AARCH64} -L ${fusednn_sysroot})
endif()
