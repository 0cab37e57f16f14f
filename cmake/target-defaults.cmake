# SPDX-License-Identifier: Apache-2.0
# The language settings of fusednn's own targets, set as target properties rather than global
# CMAKE_* variables so that a parent project's targets are left as they are.

# fusednn_apply_target_defaults(<directory>): applies the settings to every target defined in
# <directory> and the folders below it. Call it once, after every add_subdirectory.
function(fusednn_apply_target_defaults directory)
  get_property(targets DIRECTORY ${directory} PROPERTY BUILDSYSTEM_TARGETS)
  foreach(target IN LISTS targets)
    get_target_property(type ${target} TYPE)
    if(type STREQUAL "INTERFACE_LIBRARY" OR type STREQUAL "UTILITY")
      continue()
    endif()
    # Standard C++ / CUDA (the standard itself comes from target_compile_features), position-
    # independent objects (they are linked into libfusednn.so), and hidden symbols: only what
    # FDNN_API marks is exported.
    set_target_properties(${target} PROPERTIES
      CXX_EXTENSIONS OFF
      CUDA_EXTENSIONS OFF
      POSITION_INDEPENDENT_CODE ON
      CXX_VISIBILITY_PRESET hidden
      CUDA_VISIBILITY_PRESET hidden
      VISIBILITY_INLINES_HIDDEN ON)
  endforeach()
  get_property(subdirectories DIRECTORY ${directory} PROPERTY SUBDIRECTORIES)
  foreach(subdirectory IN LISTS subdirectories)
    fusednn_apply_target_defaults(${subdirectory})
  endforeach()
endfunction()
