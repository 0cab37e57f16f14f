# SPDX-License-Identifier: Apache-2.0
# Fails when libfusednn.so needs a shared library beyond the C/C++ runtime (and the sanitizers'
# runtimes in a sanitizer build): a CUDA build links the CUDA runtime statically and loads
# cuBLASLt on demand, so it loads on a machine without the CUDA libraries (and runs on the CPU
# there).
execute_process(COMMAND ${READELF} -d ${LIBRARY} OUTPUT_VARIABLE dynamic RESULT_VARIABLE result)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "${READELF} -d ${LIBRARY} failed")
endif()
string(REGEX MATCHALL "Shared library: \\[[^]]+\\]" needed "${dynamic}")
foreach(entry IN LISTS needed)
  string(REGEX REPLACE "Shared library: \\[([^]]+)\\]" "\\1" name "${entry}")
  if(NOT name MATCHES "^(libstdc\\+\\+|libm|libgcc_s|libc|ld-linux[^.]*|libdl|libpthread|librt|libasan|libubsan|liblsan|libtsan)\\.so")
    message(FATAL_ERROR "libfusednn.so needs ${name}; only the C/C++ runtime is allowed")
  endif()
endforeach()
message(STATUS "libfusednn.so needs: ${needed}")
