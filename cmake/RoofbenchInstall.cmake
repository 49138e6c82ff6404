# What `cmake --install` gives plugin authors besides the host: roofbenchConfig.cmake and its version
# file (find_package(roofbench) -> roofbench::plugin_api and roofbench_add_plugin), and roofbench.pc.
include(CMakePackageConfigHelpers)

set(ROOFBENCH_INSTALL_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/roofbench)

function(roofbench_install_sdk)
  # file(STRINGS) keeps the line's ';' escaped, so only the number is matched.
  file(STRINGS ${PROJECT_SOURCE_DIR}/include/roofbench/detail/abi.hpp abi_line REGEX "kAbiVersion = [0-9]+;")
  if(NOT abi_line MATCHES "kAbiVersion = ([0-9]+)")
    message(FATAL_ERROR "roofbench: no kAbiVersion = N; in include/roofbench/detail/abi.hpp")
  endif()
  set(ROOFBENCH_ABI_VERSION ${CMAKE_MATCH_1})
  install(EXPORT roofbenchTargets NAMESPACE roofbench:: DESTINATION ${ROOFBENCH_INSTALL_CMAKE_DIR})
  configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/roofbenchConfig.cmake.in
    ${PROJECT_BINARY_DIR}/sdk/roofbenchConfig.cmake
    INSTALL_DESTINATION ${ROOFBENCH_INSTALL_CMAKE_DIR}
    PATH_VARS CMAKE_INSTALL_INCLUDEDIR CMAKE_INSTALL_BINDIR)
  # The plugin ABI changes with the minor version while roofbench is 0.x; the host refuses any other
  # ABI anyway (kAbiVersion), so only the same minor version is compatible.
  write_basic_package_version_file(${PROJECT_BINARY_DIR}/sdk/roofbenchConfigVersion.cmake
    VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion ARCH_INDEPENDENT)
  install(FILES ${PROJECT_BINARY_DIR}/sdk/roofbenchConfig.cmake ${PROJECT_BINARY_DIR}/sdk/roofbenchConfigVersion.cmake
                ${PROJECT_SOURCE_DIR}/cmake/RoofbenchPlugin.cmake ${PROJECT_SOURCE_DIR}/cmake/RoofbenchCudaProbe.cu
          DESTINATION ${ROOFBENCH_INSTALL_CMAKE_DIR})
  # The CUDA SDK's sources: roofbench_add_plugin builds roofbench::cuda_case_support from them.
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/sdk/case_support/ DESTINATION ${ROOFBENCH_INSTALL_CMAKE_DIR}/case_support
          FILES_MATCHING PATTERN "*.cpp" PATTERN "*.cu" PATTERN "*.hpp" PATTERN "tests" EXCLUDE)

  # pkg-config: relative to the .pc file, so the installed tree can be moved.
  set(pc_dir ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
  file(RELATIVE_PATH pc_to_prefix /${pc_dir} /)
  string(REGEX REPLACE "/$" "" pc_to_prefix "${pc_to_prefix}")
  configure_file(${PROJECT_SOURCE_DIR}/cmake/roofbench.pc.in ${PROJECT_BINARY_DIR}/sdk/roofbench.pc @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/sdk/roofbench.pc DESTINATION ${pc_dir})
endfunction()
