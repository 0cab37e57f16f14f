# SPDX-License-Identifier: Apache-2.0
# Checks, run while a parent project configures, that adding fusednn left the parent as it was:
# no tests, benchmarks, samples or command-line tool of fusednn's in the parent's build, no
# warning flags on fusednn's targets, and no global setting (build type, flags, standard,
# position-independent code, visibility) changed.

set(fusednn_consumer_watched_variables
  CMAKE_BUILD_TYPE CMAKE_C_FLAGS CMAKE_CXX_FLAGS CMAKE_CXX_STANDARD CMAKE_CXX_EXTENSIONS
  CMAKE_C_STANDARD CMAKE_POSITION_INDEPENDENT_CODE CMAKE_CXX_VISIBILITY_PRESET
  CMAKE_VISIBILITY_INLINES_HIDDEN CMAKE_CUDA_ARCHITECTURES BUILD_TESTING)

# Call before adding fusednn: remembers the watched variables' values.
macro(fusednn_consumer_record_settings)
  foreach(variable IN LISTS fusednn_consumer_watched_variables)
    set(fusednn_consumer_before_${variable} "${${variable}}")
  endforeach()
endmacro()

function(fusednn_consumer_fail message)
  message(FATAL_ERROR "fusednn as a dependency: ${message}")
endfunction()

# Call after adding fusednn, with the folder it was added from.
function(fusednn_consumer_check_isolation fusednn_source_dir)
  foreach(variable IN LISTS fusednn_consumer_watched_variables)
    if(NOT "${${variable}}" STREQUAL "${fusednn_consumer_before_${variable}}")
      fusednn_consumer_fail("${variable} changed from '${fusednn_consumer_before_${variable}}' "
        "to '${${variable}}'")
    endif()
  endforeach()

  if(NOT TARGET fusednn::fusednn)
    fusednn_consumer_fail("no fusednn::fusednn target")
  endif()
  if(FUSEDNN_DEVELOPER_MODE)
    fusednn_consumer_fail("FUSEDNN_DEVELOPER_MODE is ON in a parent project")
  endif()

  get_property(folders DIRECTORY ${fusednn_source_dir} PROPERTY SUBDIRECTORIES)
  foreach(folder IN LISTS folders)
    get_filename_component(name ${folder} NAME)
    if(name MATCHES "^(tests|bench|samples|tools)$")
      fusednn_consumer_fail("fusednn added its ${name}/ folder to the parent's build")
    endif()
  endforeach()
  get_property(tests DIRECTORY ${fusednn_source_dir} PROPERTY TESTS)
  if(tests)
    fusednn_consumer_fail("fusednn registered tests: ${tests}")
  endif()

  # No warning flags on fusednn's own targets, and nothing at all passed on to the parent's.
  foreach(target fusednn fusednn_internal)
    get_target_property(options ${target} INTERFACE_COMPILE_OPTIONS)
    if(options AND target STREQUAL "fusednn")
      fusednn_consumer_fail("fusednn::fusednn passes compile options on: ${options}")
    endif()
    if(options MATCHES "-W")
      fusednn_consumer_fail("${target} carries warning flags: ${options}")
    endif()
  endforeach()
  message(STATUS "fusednn as a dependency: no tests, benchmarks, samples, tool or warnings; "
    "the parent's settings unchanged")
endfunction()
