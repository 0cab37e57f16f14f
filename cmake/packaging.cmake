# SPDX-License-Identifier: Apache-2.0
# Debian packages built by CPack from the install rules (`cpack -G DEB` in a build folder,
# configured with CMAKE_INSTALL_PREFIX=/usr and CMAKE_INSTALL_LIBDIR=lib/<multiarch triplet>, which
# GNUInstallDirs picks by itself on a native Debian build but not in a cross build;
# tests/package/test_deb.sh does both):
#
#   libfusednn0     component runtime: libfusednn.so.0 and libfusednn.so.0.<minor>.<patch>
#   libfusednn-dev  component development: the headers, the libfusednn.so link, the CMake package
#                   and the pkg-config file; depends on libfusednn0 of the same version
#
# The CLI (component cli) goes in neither. Each package also gets /usr/share/doc/<package>/
# copyright and changelog.Debian.gz, which only a component install (CPack's) writes: a plain
# `cmake --install` leaves them out. The architecture comes from the target processor, so a
# cross build (cmake/toolchains/aarch64-linux-gnu.cmake) makes arm64 packages. A build with the
# CUDA backend (presets package-amd64 and jetson) needs no CUDA library to load: the CUDA runtime
# is linked in and cuBLASLt is loaded with dlopen at first use, so the GPU driver is recommended
# and cuBLAS suggested, never required; without them the library runs on the CPU (docs/install.md).

set(FUSEDNN_DEB_RUNTIME_PACKAGE libfusednn${PROJECT_VERSION_MAJOR})
set(FUSEDNN_DEB_DEV_PACKAGE libfusednn-dev)
set(FUSEDNN_DEB_REVISION 1)
set(FUSEDNN_DEB_VERSION "${PROJECT_VERSION}-${FUSEDNN_DEB_REVISION}")
set(FUSEDNN_DEB_MAINTAINER "fusednn developers <fusednn-maintainers@example.org>")

# Debian's architecture name for the processor the library is built for.
string(TOLOWER "${CMAKE_SYSTEM_PROCESSOR}" fusednn_deb_processor)
if(fusednn_deb_processor MATCHES "^(aarch64|arm64)$")
  set(FUSEDNN_DEB_ARCHITECTURE arm64)
elseif(fusednn_deb_processor MATCHES "^(x86_64|amd64)$")
  set(FUSEDNN_DEB_ARCHITECTURE amd64)
elseif(CMAKE_CROSSCOMPILING)
  message(WARNING "fusednn: no Debian architecture known for processor ${CMAKE_SYSTEM_PROCESSOR}; "
                  "cpack -G DEB would label the packages with this machine's architecture")
endif()

# The files every package carries in /usr/share/doc/<package>: the copyright (DEP-5, pointing at
# /usr/share/common-licenses/Apache-2.0) and a Debian changelog for this version, compressed the
# way Debian wants (gzip -9n: no name or time stamp). The date honours SOURCE_DATE_EPOCH.
string(TIMESTAMP fusednn_deb_date "%a, %d %b %Y %H:%M:%S +0000" UTC)
set(fusednn_deb_doc_dir "${PROJECT_BINARY_DIR}/debian")
file(MAKE_DIRECTORY "${fusednn_deb_doc_dir}")
file(WRITE "${fusednn_deb_doc_dir}/changelog.Debian"
  "fusednn (${FUSEDNN_DEB_VERSION}) unstable; urgency=medium\n\n"
  "  * fusednn ${PROJECT_VERSION}, packaged by CPack from the project's install rules. The\n"
  "    project's own changes are listed in its CHANGELOG.md.\n\n"
  " -- ${FUSEDNN_DEB_MAINTAINER}  ${fusednn_deb_date}\n")
find_program(FUSEDNN_GZIP gzip)
if(FUSEDNN_GZIP)
  execute_process(
    COMMAND "${FUSEDNN_GZIP}" -9 -n -f "${fusednn_deb_doc_dir}/changelog.Debian"
    RESULT_VARIABLE fusednn_gzip_result)
  if(NOT fusednn_gzip_result EQUAL 0)
    message(WARNING "fusednn: gzip failed on the Debian changelog: ${fusednn_gzip_result}")
  endif()
else()
  message(STATUS "fusednn: gzip not found; the .deb packages will lack changelog.Debian.gz")
endif()
foreach(pair "runtime:${FUSEDNN_DEB_RUNTIME_PACKAGE}" "development:${FUSEDNN_DEB_DEV_PACKAGE}")
  string(REPLACE ":" ";" pair "${pair}")
  list(GET pair 0 component)
  list(GET pair 1 package)
  set(doc_files "${PROJECT_SOURCE_DIR}/cmake/debian/copyright")
  if(EXISTS "${fusednn_deb_doc_dir}/changelog.Debian.gz")
    list(APPEND doc_files "${fusednn_deb_doc_dir}/changelog.Debian.gz")
  endif()
  install(FILES ${doc_files}
    DESTINATION "${CMAKE_INSTALL_DATAROOTDIR}/doc/${package}"
    PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ
    COMPONENT ${component} EXCLUDE_FROM_ALL)
  # What lintian reports and is left as it is, each with its reason in the file.
  install(FILES "${PROJECT_SOURCE_DIR}/cmake/debian/${component}.lintian-overrides"
    DESTINATION "${CMAKE_INSTALL_DATAROOTDIR}/lintian/overrides"
    RENAME ${package}
    PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ
    COMPONENT ${component} EXCLUDE_FROM_ALL)
endforeach()

set(CPACK_PACKAGE_NAME fusednn)
# CPack's Debian generator puts CPACK_PACKAGE_DESCRIPTION_SUMMARY in front of every package's
# description unless it is CPack's own placeholder, which this is; each package's description
# below starts with its own synopsis instead.
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${CMAKE_PROJECT_NAME} built using CMake")
set(CPACK_PACKAGE_VENDOR "fusednn")
set(CPACK_PACKAGE_VERSION "${PROJECT_VERSION}")
set(CPACK_PACKAGE_CONTACT "${FUSEDNN_DEB_MAINTAINER}")
set(CPACK_PACKAGE_DIRECTORY "${PROJECT_BINARY_DIR}/packages")
set(CPACK_RESOURCE_FILE_LICENSE "${PROJECT_SOURCE_DIR}/LICENSE")
set(CPACK_GENERATOR DEB)
set(CPACK_STRIP_FILES ON)
set(CPACK_INSTALL_DEFAULT_DIRECTORY_PERMISSIONS
  OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)

set(CPACK_COMPONENTS_ALL runtime development)
set(CPACK_COMPONENT_DEVELOPMENT_DEPENDS runtime)
set(CPACK_DEB_COMPONENT_INSTALL ON)

set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_RELEASE ${FUSEDNN_DEB_REVISION})
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${FUSEDNN_DEB_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_SOURCE fusednn)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
if(FUSEDNN_DEB_ARCHITECTURE)
  set(CPACK_DEBIAN_PACKAGE_ARCHITECTURE ${FUSEDNN_DEB_ARCHITECTURE})
endif()

set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME ${FUSEDNN_DEB_RUNTIME_PACKAGE})
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SECTION libs)
# Each package's description: the synopsis, then lines under 80 columns.
string(CONCAT fusednn_deb_about
  "fusednn runs neural networks trained in PyTorch (multilayer\n"
  "perceptrons, convolutional networks, residual blocks) from a\n"
  "safetensors bundle, through a C API, on the CPU or an NVIDIA GPU.\n\n")
string(CONCAT CPACK_DEBIAN_RUNTIME_DESCRIPTION
  "inference library for PyTorch-trained networks\n" "${fusednn_deb_about}"
  "This package holds the shared library.")
# The shlibs file (libfusednn 0 libfusednn0 (>= VERSION)) gives packages built against this one
# their dependency on it; the ldconfig trigger refreshes the linker cache after unpacking.
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY ">=")
set(CPACK_DEBIAN_RUNTIME_PACKAGE_CONTROL_EXTRA "${PROJECT_SOURCE_DIR}/cmake/debian/triggers")
set(CPACK_DEBIAN_RUNTIME_PACKAGE_CONTROL_STRICT_PERMISSION ON)
# A Jetson build's GPU code (the jetson-orin and jetson-xavier presets) needs the GPU driver,
# which JetPack's nvidia-l4t-cuda provides: without it the library runs on the CPU backend, so
# the driver is recommended rather than required. The CUDA runtime is linked in; cuBLASLt is
# loaded when present (CUDA 11's, which JetPack 5's libcublas packages hold, or else cuBLAS 12's,
# JetPack 6's), the tiled GEMM standing in without it.
if(FUSEDNN_WITH_CUDA AND FUSEDNN_DEB_ARCHITECTURE STREQUAL "arm64")
  set(CPACK_DEBIAN_RUNTIME_PACKAGE_RECOMMENDS "nvidia-l4t-cuda")
  set(CPACK_DEBIAN_RUNTIME_PACKAGE_SUGGESTS
      "libcublas-11-4 | libcublas-11-8 | libcublas-12-2 | libcublas-12-6")
endif()
# An amd64 build with the CUDA backend (preset package-amd64) recommends the driver's libcuda.so.1
# of a branch that runs this CUDA major's runtime: Debian's libcuda1 (also in NVIDIA's Debian
# repository) is that package, Ubuntu's libnvidia-compute-<branch> provides a versioned libcuda1,
# and Debian's other driver flavours (libnvidia-tesla-<branch>-cuda1) a versioned libcuda.so.1.
# It suggests NVIDIA's cuBLAS package of the toolkit built with (libcublas-<major>-<minor>, which
# holds libcublasLt.so.<major>, the soname linear/cublaslt_library.cpp loads; any later minor
# release's works too) or Debian's and Ubuntu's name for it (libcublaslt<major>).
set(fusednn_deb_driver_branches "11=450" "12=525" "13=580")
if(FUSEDNN_WITH_CUDA AND FUSEDNN_DEB_ARCHITECTURE STREQUAL "amd64")
  set(fusednn_deb_driver "")
  foreach(entry IN LISTS fusednn_deb_driver_branches)
    string(REPLACE "=" ";" entry "${entry}")
    list(GET entry 0 major)
    list(GET entry 1 branch)
    if(CUDAToolkit_VERSION_MAJOR STREQUAL major)
      set(fusednn_deb_driver "${branch}")
    endif()
  endforeach()
  if(fusednn_deb_driver)
    set(CPACK_DEBIAN_RUNTIME_PACKAGE_RECOMMENDS
        "libcuda1 (>= ${fusednn_deb_driver}) | libcuda.so.1 (>= ${fusednn_deb_driver})")
  else()
    message(WARNING "fusednn: no minimum driver branch known for CUDA ${CUDAToolkit_VERSION}; "
                    "the amd64 package recommends libcuda1 without a version")
    set(CPACK_DEBIAN_RUNTIME_PACKAGE_RECOMMENDS "libcuda1 | libcuda.so.1")
  endif()
  set(CPACK_DEBIAN_RUNTIME_PACKAGE_SUGGESTS
      "libcublas-${CUDAToolkit_VERSION_MAJOR}-${CUDAToolkit_VERSION_MINOR} | libcublaslt${CUDAToolkit_VERSION_MAJOR}")
  # The oldest GPU it runs on: the lowest compute capability in CMAKE_CUDA_ARCHITECTURES.
  set(fusednn_deb_lowest "")
  foreach(architecture IN LISTS CMAKE_CUDA_ARCHITECTURES)
    if(architecture MATCHES "^([0-9]+)" AND
       (fusednn_deb_lowest STREQUAL "" OR CMAKE_MATCH_1 LESS fusednn_deb_lowest))
      set(fusednn_deb_lowest "${CMAKE_MATCH_1}")
    endif()
  endforeach()
  if(fusednn_deb_lowest)
    math(EXPR fusednn_deb_lowest_major "${fusednn_deb_lowest} / 10")
    math(EXPR fusednn_deb_lowest_minor "${fusednn_deb_lowest} % 10")
    string(APPEND CPACK_DEBIAN_RUNTIME_DESCRIPTION "\n\n"
      "This build has the CUDA backend, for NVIDIA GPUs of compute\n"
      "capability ${fusednn_deb_lowest_major}.${fusednn_deb_lowest_minor} and later with the driver this package\n"
      "recommends; without a usable GPU it runs on the CPU.")
  endif()
endif()

set(CPACK_DEBIAN_DEVELOPMENT_PACKAGE_NAME ${FUSEDNN_DEB_DEV_PACKAGE})
set(CPACK_DEBIAN_DEVELOPMENT_PACKAGE_SECTION libdevel)
string(CONCAT CPACK_DEBIAN_DEVELOPMENT_DESCRIPTION
  "inference library for PyTorch-trained networks (development files)\n"
  "${fusednn_deb_about}"
  "This package holds the C and C++ headers, the CMake package\n"
  "(find_package(fusednn)) and the pkg-config file.")
set(CPACK_DEBIAN_DEVELOPMENT_PACKAGE_DEPENDS "${FUSEDNN_DEB_RUNTIME_PACKAGE} (= ${FUSEDNN_DEB_VERSION})")

# The runtime's Depends: dpkg-shlibdeps on a native build. It cannot read a cross-built library
# against this machine's package database, so a cross build computes them at packaging time from
# the library's symbol version needs instead (cmake/debian-depends.cmake).
if(CMAKE_CROSSCOMPILING)
  set(CPACK_DEBIAN_RUNTIME_PACKAGE_SHLIBDEPS OFF)
  file(GENERATE OUTPUT "${PROJECT_BINARY_DIR}/debian/library-path.txt"
       CONTENT "$<TARGET_FILE:fusednn>")
  set(CPACK_FUSEDNN_LIBRARY_PATH_FILE "${PROJECT_BINARY_DIR}/debian/library-path.txt")
  set(CPACK_FUSEDNN_READELF "${CMAKE_READELF}")
  set(CPACK_PROJECT_CONFIG_FILE "${PROJECT_SOURCE_DIR}/cmake/debian-depends.cmake")
else()
  set(CPACK_DEBIAN_RUNTIME_PACKAGE_SHLIBDEPS ON)
endif()

include(CPack)
