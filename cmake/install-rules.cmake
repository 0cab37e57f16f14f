# Installs libfusednn, its headers, the CLI, a CMake config package (find_package(fusednn)) and a
# pkg-config file, so C and C++ users can consume either way.
include(CMakePackageConfigHelpers)

set(FUSEDNN_CMAKE_DIR "${CMAKE_INSTALL_LIBDIR}/cmake/fusednn")

install(TARGETS fusednn EXPORT fusednnTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime NAMELINK_COMPONENT development
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT development
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/fusednn
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT development)
if(TARGET fusednn_cli)
  install(TARGETS fusednn_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime)
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

configure_file(${PROJECT_SOURCE_DIR}/cmake/fusednn.pc.in ${PROJECT_BINARY_DIR}/fusednn.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/fusednn.pc
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT development)
