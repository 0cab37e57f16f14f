# SPDX-License-Identifier: Apache-2.0
# Installs libfusednn, its headers, the CLI, a CMake config package (find_package(fusednn)) and a
# pkg-config file, so C and C++ users can consume either way. Components: runtime (the shared
# library), development (headers, the libfusednn.so link, CMake and pkg-config files) and cli;
# the Debian packages (cmake/packaging.cmake) are built from the first two.
include(CMakePackageConfigHelpers)

set(FUSEDNN_CMAKE_DIR "${CMAKE_INSTALL_LIBDIR}/cmake/fusednn")

install(TARGETS fusednn EXPORT fusednnTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime NAMELINK_COMPONENT development
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT development
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/fusednn
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT development)
if(TARGET fusednn_cli)
  install(TARGETS fusednn_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT cli)
endif()

install(EXPORT fusednnTargets
  NAMESPACE fusednn::
  DESTINATION ${FUSEDNN_CMAKE_DIR}
  COMPONENT development)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/fusednnConfig.cmake.in
  ${PROJECT_BINARY_DIR}/fusednnConfig.cmake
  INSTALL_DESTINATION ${FUSEDNN_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/fusednnConfigVersion.cmake
  COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/fusednnConfig.cmake ${PROJECT_BINARY_DIR}/fusednnConfigVersion.cmake
  DESTINATION ${FUSEDNN_CMAKE_DIR} COMPONENT development)

# The pkg-config file locates the prefix from its own folder (${pcfiledir}), so it stays right
# for `cmake --install <build> --prefix <elsewhere>` and for a prefix moved after installing;
# a prefix baked in at configure time would point at CMAKE_INSTALL_PREFIX's default instead.
# Absolute install folders cannot move, so they are written as they are.
set(FUSEDNN_PKGCONFIG_DIR "${CMAKE_INSTALL_LIBDIR}/pkgconfig")
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}" OR IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  set(FUSEDNN_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
  set(FUSEDNN_PC_LIBDIR "${CMAKE_INSTALL_FULL_LIBDIR}")
  set(FUSEDNN_PC_INCLUDEDIR "${CMAKE_INSTALL_FULL_INCLUDEDIR}")
else()
  # "../.." for lib/pkgconfig, "../../.." for lib/x86_64-linux-gnu/pkgconfig.
  file(RELATIVE_PATH fusednn_pc_up "/prefix/${FUSEDNN_PKGCONFIG_DIR}" "/prefix")
  string(REGEX REPLACE "/$" "" fusednn_pc_up "${fusednn_pc_up}")
  set(FUSEDNN_PC_PREFIX "\${pcfiledir}/${fusednn_pc_up}")
  set(FUSEDNN_PC_LIBDIR "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
  set(FUSEDNN_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()
configure_file(${PROJECT_SOURCE_DIR}/cmake/fusednn.pc.in ${PROJECT_BINARY_DIR}/fusednn.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/fusednn.pc
  DESTINATION ${FUSEDNN_PKGCONFIG_DIR} COMPONENT development)
