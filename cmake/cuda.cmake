# SPDX-License-Identifier: Apache-2.0
# CUDA toolchain for the CUDA backend; included by the top-level CMakeLists.txt when
# FUSEDNN_WITH_CUDA is ON.
#
# Architectures: the user's choice wins (-DCMAKE_CUDA_ARCHITECTURES=native, a list such as
# "87;90", or the CUDAARCHS environment variable at the first configure; a parent project's
# setting likewise). Without one, the default is the deployment list: machine code for each GPU
# generation from Turing to Blackwell that this toolkit targets (sm_75, 80, 86, 87, 89, 90, 100,
# 120; GPUs of a later minor version, such as sm_88, 103 or 121, run the code of the one before)
# plus the PTX of the newest, which the driver compiles for GPUs newer than the list. Jetson Thor
# (sm_110) is not in it: add 110 to the list to build for it.
if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES AND NOT DEFINED ENV{CUDAARCHS})
  include(CheckLanguage)
  check_language(CUDA)
  set(fusednn_toolkit_codes "")
  if(CMAKE_CUDA_COMPILER)
    execute_process(COMMAND ${CMAKE_CUDA_COMPILER} --list-gpu-code
      OUTPUT_VARIABLE fusednn_toolkit_codes ERROR_QUIET RESULT_VARIABLE fusednn_list_result)
    if(fusednn_list_result EQUAL 0)
      string(APPEND fusednn_toolkit_codes "\n")
    else()
      set(fusednn_toolkit_codes "")
    endif()
  endif()
  set(fusednn_deployment_architectures "")
  set(fusednn_newest_architecture "")
  foreach(architecture 75 80 86 87 89 90 100 120)
    # A toolkit too old to list its codes (nvcc before 11.0) is given the whole list.
    if(fusednn_toolkit_codes STREQUAL "" OR fusednn_toolkit_codes MATCHES "sm_${architecture}\n")
      list(APPEND fusednn_deployment_architectures ${architecture}-real)
      set(fusednn_newest_architecture ${architecture})
    endif()
  endforeach()
  list(APPEND fusednn_deployment_architectures ${fusednn_newest_architecture}-virtual)
  set(CMAKE_CUDA_ARCHITECTURES "${fusednn_deployment_architectures}"
    CACHE STRING "CUDA architectures the kernels are built for")
endif()

enable_language(CUDA)
find_package(CUDAToolkit REQUIRED)

message(STATUS "fusednn: CUDA backend ON (nvcc ${CMAKE_CUDA_COMPILER_VERSION}, "
  "architectures ${CMAKE_CUDA_ARCHITECTURES})")
