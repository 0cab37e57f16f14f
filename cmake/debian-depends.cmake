# SPDX-License-Identifier: Apache-2.0
# The Debian Depends of a shared library, from the symbol versions it needs (readelf's
# .gnu.version_r section), for a library that dpkg-shlibdeps cannot read: a cross-built one, whose
# architecture this machine's package database does not hold.
#
#   libc.so.6, libm.so.6, ld-linux*  ->  libc6 (>= highest GLIBC_x.y needed)
#   libpthread.so.0, libdl.so.2,     ->  libc6 likewise (a library linked against a glibc before
#   librt.so.1                           2.34, which moved them into libc.so.6, names them)
#   libstdc++.so.6                   ->  libstdc++6 (>= first GCC release with the highest
#                                        GLIBCXX_3.4.n / CXXABI_1.3.n needed)
#   libgcc_s.so.1                    ->  libgcc-s1 (>= highest GCC_x.y needed)
#
# Debian's symbols files give a version per symbol, these rules one per symbol version node: a
# symbol that a later GCC release added to an existing node would need a higher libstdc++6 than
# derived here. For libfusednn the two agree: on amd64, tests/package/test_deb.sh checks that the
# result equals dpkg-shlibdeps'. Any other needed library is an error naming it, so that nothing
# is left out of Depends silently.
#
# Two uses:
#   cmake -DLIBRARY=<lib.so> [-DREADELF=<readelf>] -P cmake/debian-depends.cmake
#       prints the Depends line;
#   CPACK_PROJECT_CONFIG_FILE (cmake/packaging.cmake, cross builds): sets
#       CPACK_DEBIAN_RUNTIME_PACKAGE_DEPENDS for the library named in
#       CPACK_FUSEDNN_LIBRARY_PATH_FILE, read with CPACK_FUSEDNN_READELF.

# First GCC release whose libstdc++ defines each symbol version.
set(fusednn_glibcxx_gcc
  "3.4.18=4.8" "3.4.19=4.8.3" "3.4.20=4.9" "3.4.21=5" "3.4.22=6" "3.4.23=7" "3.4.24=7.2"
  "3.4.25=8" "3.4.26=9" "3.4.27=9.2" "3.4.28=9.3" "3.4.29=11" "3.4.30=12" "3.4.31=13"
  "3.4.32=13.2" "3.4.33=14")
set(fusednn_cxxabi_gcc
  "1.3.8=4.9" "1.3.9=5" "1.3.10=6" "1.3.11=7" "1.3.12=9" "1.3.13=11" "1.3.14=13" "1.3.15=14")

# fusednn_lookup_gcc(TABLE VERSION OUT): the GCC release for VERSION in TABLE; empty below the
# table's first entry (every libstdc++6 Debian ships has it); an error above its last.
function(fusednn_lookup_gcc table version out)
  set(result "")
  set(known_up_to "")
  foreach(entry IN LISTS ${table})
    string(REPLACE "=" ";" entry "${entry}")
    list(GET entry 0 node)
    list(GET entry 1 gcc)
    if(version VERSION_GREATER_EQUAL node)
      set(result "${gcc}")
    endif()
    set(known_up_to "${node}")
  endforeach()
  if(version VERSION_GREATER known_up_to)
    message(FATAL_ERROR "debian-depends.cmake: the library needs libstdc++ symbol version "
                        "${version}, newer than this table knows (${known_up_to}); add its GCC "
                        "release to the table")
  endif()
  set(${out} "${result}" PARENT_SCOPE)
endfunction()

# fusednn_debian_depends(READELF LIBRARY OUT): the Depends line of LIBRARY.
function(fusednn_debian_depends readelf library out)
  if(NOT EXISTS "${library}")
    message(FATAL_ERROR "debian-depends.cmake: no library at '${library}'")
  endif()
  execute_process(COMMAND "${readelf}" --wide --dynamic --version-info "${library}"
                  OUTPUT_VARIABLE listing RESULT_VARIABLE failed ERROR_VARIABLE errors)
  if(failed)
    message(FATAL_ERROR "debian-depends.cmake: ${readelf} failed on ${library}: ${errors}")
  endif()
  string(REPLACE "\n" ";" lines "${listing}")

  set(needed "")
  set(file "")
  set(glibc "")
  set(glibcxx "")
  set(cxxabi "")
  set(gcc_s "")
  foreach(line IN LISTS lines)
    if(line MATCHES "\\(NEEDED\\).*\\[([^]]+)\\]")
      list(APPEND needed "${CMAKE_MATCH_1}")
    elseif(line MATCHES "File: ([^ ]+)")
      set(file "${CMAKE_MATCH_1}")
    elseif(line MATCHES "Name: ([A-Z_]+)_([0-9.]+)")
      set(node "${CMAKE_MATCH_1}")
      set(version "${CMAKE_MATCH_2}")
      if(node STREQUAL "GLIBC" AND (glibc STREQUAL "" OR version VERSION_GREATER glibc))
        set(glibc "${version}")
      elseif(node STREQUAL "GLIBCXX" AND (glibcxx STREQUAL "" OR version VERSION_GREATER glibcxx))
        set(glibcxx "${version}")
      elseif(node STREQUAL "CXXABI" AND (cxxabi STREQUAL "" OR version VERSION_GREATER cxxabi))
        set(cxxabi "${version}")
      elseif(node STREQUAL "GCC" AND file STREQUAL "libgcc_s.so.1" AND
             (gcc_s STREQUAL "" OR version VERSION_GREATER gcc_s))
        set(gcc_s "${version}")
      endif()
    endif()
  endforeach()

  set(depends "")
  set(libc_needed OFF)
  foreach(library_name IN LISTS needed)
    if(library_name MATCHES
       "^(libc\\.so\\.6|libm\\.so\\.6|libpthread\\.so\\.0|libdl\\.so\\.2|librt\\.so\\.1|ld-linux.*\\.so\\.[0-9]+)$")
      set(libc_needed ON)
    elseif(library_name STREQUAL "libstdc++.so.6")
      set(stdcxx "")
      if(glibcxx)
        fusednn_lookup_gcc(fusednn_glibcxx_gcc "${glibcxx}" stdcxx)
      endif()
      if(cxxabi)
        fusednn_lookup_gcc(fusednn_cxxabi_gcc "${cxxabi}" from_abi)
        if(from_abi AND (stdcxx STREQUAL "" OR from_abi VERSION_GREATER stdcxx))
          set(stdcxx "${from_abi}")
        endif()
      endif()
      if(stdcxx)
        list(APPEND depends "libstdc++6 (>= ${stdcxx})")
      else()
        list(APPEND depends "libstdc++6")
      endif()
    elseif(library_name STREQUAL "libgcc_s.so.1")
      if(gcc_s)
        list(APPEND depends "libgcc-s1 (>= ${gcc_s})")
      else()
        list(APPEND depends "libgcc-s1")
      endif()
    else()
      message(FATAL_ERROR "debian-depends.cmake: ${library} needs ${library_name}, for which "
                          "this file has no rule; add one naming its Debian package")
    endif()
  endforeach()
  if(libc_needed)
    if(glibc)
      list(APPEND depends "libc6 (>= ${glibc})")
    else()
      list(APPEND depends "libc6")
    endif()
  endif()
  list(SORT depends)
  list(JOIN depends ", " depends)
  set(${out} "${depends}" PARENT_SCOPE)
endfunction()

if(CMAKE_SCRIPT_MODE_FILE AND NOT CPACK_GENERATOR)
  if(NOT LIBRARY)
    message(FATAL_ERROR "usage: cmake -DLIBRARY=<lib.so> [-DREADELF=<readelf>] -P ${CMAKE_CURRENT_LIST_FILE}")
  endif()
  if(NOT READELF)
    set(READELF readelf)
  endif()
  fusednn_debian_depends("${READELF}" "${LIBRARY}" depends)
  execute_process(COMMAND "${CMAKE_COMMAND}" -E echo "${depends}")
elseif(CPACK_GENERATOR STREQUAL "DEB" AND CPACK_FUSEDNN_LIBRARY_PATH_FILE)
  file(READ "${CPACK_FUSEDNN_LIBRARY_PATH_FILE}" fusednn_library)
  fusednn_debian_depends("${CPACK_FUSEDNN_READELF}" "${fusednn_library}"
                         CPACK_DEBIAN_RUNTIME_PACKAGE_DEPENDS)
  message(STATUS "fusednn: ${CPACK_DEBIAN_RUNTIME_PACKAGE_NAME} Depends: "
                 "${CPACK_DEBIAN_RUNTIME_PACKAGE_DEPENDS}")
endif()
