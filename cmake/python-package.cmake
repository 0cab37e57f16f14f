# SPDX-License-Identifier: Apache-2.0
# The Python package's build: bindings/python/pyproject.toml (pip install ./bindings/python) and
# the root pyproject.toml (pip install .) build this project with scikit-build-core (which defines
# SKBUILD), and the wheel holds libfusednn as fusednn/lib/libfusednn.so.0, the one file of the
# "python" install component; the binding loads it from there (bindings/python/src/fusednn/
# _native.py).
#
# Backend: the CUDA backend, for the architectures of the GPUs present, where a CUDA compiler is
# found and nvidia-smi lists a GPU; otherwise the CPU backend alone. Either is overridden with
# -C cmake.define.FUSEDNN_WITH_CUDA=ON|OFF (and -C cmake.define.CMAKE_CUDA_ARCHITECTURES=...), or
# the same definitions in the SKBUILD_CMAKE_DEFINE environment variable.
#
# FUSEDNN_PYTHON_PREBUILT_LIBRARY (from the environment variable FUSEDNN_BUNDLE_LIBRARY) names a
# libfusednn already built: it is bundled as it is and nothing is compiled.
set(FUSEDNN_PYTHON_PREBUILT_LIBRARY "" CACHE FILEPATH
  "A libfusednn shared library to bundle in the Python package instead of building one")
if(FUSEDNN_PYTHON_PREBUILT_LIBRARY)
  if(NOT IS_ABSOLUTE "${FUSEDNN_PYTHON_PREBUILT_LIBRARY}" OR
     NOT EXISTS "${FUSEDNN_PYTHON_PREBUILT_LIBRARY}")
    message(FATAL_ERROR "FUSEDNN_BUNDLE_LIBRARY=${FUSEDNN_PYTHON_PREBUILT_LIBRARY}: give the "
      "absolute path of an existing libfusednn.so")
  endif()
  # The file itself, not a link to it (libfusednn.so -> .so.0 -> .so.0.4.0).
  file(REAL_PATH "${FUSEDNN_PYTHON_PREBUILT_LIBRARY}" fusednn_prebuilt_file)
  message(STATUS "fusednn: the Python package bundles ${fusednn_prebuilt_file}")
  install(FILES "${fusednn_prebuilt_file}" DESTINATION fusednn/lib
    RENAME libfusednn.so.${PROJECT_VERSION_MAJOR} COMPONENT python)
  return()
endif()

if(NOT DEFINED FUSEDNN_WITH_CUDA)
  include(CheckLanguage)
  check_language(CUDA)
  set(fusednn_gpu_architectures "")
  find_program(FUSEDNN_NVIDIA_SMI nvidia-smi)
  if(CMAKE_CUDA_COMPILER AND FUSEDNN_NVIDIA_SMI)
    execute_process(COMMAND ${FUSEDNN_NVIDIA_SMI} --query-gpu=compute_cap --format=csv,noheader
      OUTPUT_VARIABLE fusednn_compute_capabilities RESULT_VARIABLE fusednn_smi_result
      ERROR_QUIET)
    if(fusednn_smi_result EQUAL 0)
      # One line per GPU, such as "9.0"; 9.0 is architecture 90.
      string(REGEX MATCHALL "[0-9]+\\.[0-9]+" fusednn_compute_capabilities
        "${fusednn_compute_capabilities}")
      foreach(capability IN LISTS fusednn_compute_capabilities)
        string(REPLACE "." "" architecture "${capability}")
        list(APPEND fusednn_gpu_architectures ${architecture})
      endforeach()
      list(REMOVE_DUPLICATES fusednn_gpu_architectures)
    endif()
  endif()
  if(fusednn_gpu_architectures)
    set(FUSEDNN_WITH_CUDA ON CACHE BOOL "Build the CUDA backend")
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES AND NOT DEFINED ENV{CUDAARCHS})
      set(CMAKE_CUDA_ARCHITECTURES "${fusednn_gpu_architectures}" CACHE STRING
        "CUDA architectures the kernels are built for")
    endif()
    message(STATUS "fusednn: Python package with the CUDA backend (GPU architectures "
      "${fusednn_gpu_architectures}); -C cmake.define.FUSEDNN_WITH_CUDA=OFF builds it without")
  else()
    set(FUSEDNN_WITH_CUDA OFF CACHE BOOL "Build the CUDA backend")
    message(STATUS "fusednn: Python package with the CPU backend only (no CUDA compiler or no "
      "GPU found); -C cmake.define.FUSEDNN_WITH_CUDA=ON builds the CUDA backend")
  endif()
endif()

install(FILES "$<TARGET_FILE:fusednn>" DESTINATION fusednn/lib
  RENAME libfusednn.so.${PROJECT_VERSION_MAJOR} COMPONENT python)
