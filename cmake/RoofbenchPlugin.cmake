# roofbench_add_plugin(NAME SOURCES a.cpp b.cu ... [CUDA] [LIBRARIES lib...] [TESTS test.cpp ...] [NO_INSTALL])
# Builds a plugin the host finds on its own: <build>/lib/roofbench/plugins/roofbench-NAME.so, installed
# to <prefix>/lib/roofbench/plugins (where an installed host looks, beside its bin/).
# SOURCES: the cases and the entry point (ROOFBENCH_PLUGIN). They are compiled once, with hidden
#   visibility and their folder on the include path, as the object library roofbench_NAME_cases, which
#   the plugin links and so does the test.
# CUDA: the plugin gets a probe (RoofbenchCudaProbe.cu) through which the host asks whether its kernels
#   have code for the device; the plugin is skipped, and said so, where CUDA is not available.
# LIBRARIES: linked by the cases (publicly: the test gets them too). roofbench::cuda_case_support is the
#   SDK for CUDA cases (include/roofbench/case_support: gates, timed candidates, format decoding), built
#   here from its sources.
# TESTS: GoogleTest sources of the test executable NAME_test, which drives the cases without loading the
#   plugin; CTest lists its tests one by one, labelled gpu for a CUDA plugin and cpu otherwise.
#
# The same file serves roofbench's own tree and, installed beside roofbenchConfig.cmake, out-of-tree
# plugin projects (find_package(roofbench)); there roofbench::plugin_api is the imported target.
include_guard(GLOBAL)

set(_ROOFBENCH_PLUGIN_CMAKE_DIR ${CMAKE_CURRENT_LIST_DIR})
if(NOT DEFINED ROOFBENCH_PLUGIN_DIR)
  set(ROOFBENCH_PLUGIN_DIR ${CMAKE_BINARY_DIR}/lib/roofbench/plugins)
endif()
# Not CMAKE_INSTALL_LIBDIR: the host looks in <bin>/../lib/roofbench/plugins whatever the platform's
# library folder is (lib/x86_64-linux-gnu under /usr on Debian).
if(NOT DEFINED ROOFBENCH_INSTALL_PLUGIN_DIR)
  set(ROOFBENCH_INSTALL_PLUGIN_DIR lib/roofbench/plugins)
endif()
# Prefix of the target names, so that the examples' plugins do not clash with plugins/ of the same name.
if(NOT DEFINED ROOFBENCH_PLUGIN_TARGET_PREFIX)
  set(ROOFBENCH_PLUGIN_TARGET_PREFIX roofbench_plugin_)
endif()

# Whether CUDA plugins can be built here: roofbench's own tree decides once (ROOFBENCH_HAVE_CUDA); an
# out-of-tree project has CUDA when it enabled the language (project(... LANGUAGES CXX CUDA)).
function(_roofbench_cuda_available out)
  if(DEFINED ROOFBENCH_HAVE_CUDA)
    set(${out} ${ROOFBENCH_HAVE_CUDA} PARENT_SCOPE)
    return()
  endif()
  get_property(languages GLOBAL PROPERTY ENABLED_LANGUAGES)
  if("CUDA" IN_LIST languages)
    set(${out} ON PARENT_SCOPE)
  else()
    set(${out} OFF PARENT_SCOPE)
  endif()
endfunction()

function(_roofbench_left_out what why)
  if(COMMAND roofbench_left_out)
    roofbench_left_out("${what}" "${why}")
  else()
    message(STATUS "roofbench: left out ${what}: ${why}")
  endif()
endfunction()

# A single-configuration build with no CMAKE_BUILD_TYPE compiles with no -O at all: a plugin measured
# so runs several times slower than the code it stands for. Such a plugin gets -O2 on its own target,
# unless CMAKE_CXX_FLAGS already names an optimisation level; any build type the user sets (Debug
# included) is left as it is.
# The message names the first target; the others (a plugin's cases) are its parts.
function(_roofbench_optimise_by_default target)
  get_property(multi_config GLOBAL PROPERTY GENERATOR_IS_MULTI_CONFIG)
  if(multi_config OR CMAKE_BUILD_TYPE OR CMAKE_CXX_FLAGS MATCHES "(^| )-O")
    return()
  endif()
  foreach(each IN ITEMS ${target} ${ARGN})
    target_compile_options(${each} PRIVATE $<$<COMPILE_LANGUAGE:CXX,CUDA>:-O2>)
  endforeach()
  message(STATUS "roofbench: ${target} built with -O2 (no CMAKE_BUILD_TYPE given; "
                 "-DCMAKE_BUILD_TYPE=Debug or another type overrides it)")
endfunction()

# The SDK's sources for roofbench::cuda_case_support: sdk/case_support in roofbench's tree, case_support/
# beside this file where installed.
if(EXISTS ${_ROOFBENCH_PLUGIN_CMAKE_DIR}/case_support/gate.cpp)
  set(_ROOFBENCH_CASE_SUPPORT_DIR ${_ROOFBENCH_PLUGIN_CMAKE_DIR}/case_support)
else()
  set(_ROOFBENCH_CASE_SUPPORT_DIR ${_ROOFBENCH_PLUGIN_CMAKE_DIR}/../sdk/case_support)
endif()

# roofbench::cuda_case_support, once per project: a static library of hidden symbols (it holds a kernel,
# so the project must have CUDA enabled).
function(roofbench_cuda_case_support)
  if(TARGET roofbench_cuda_case_support)
    return()
  endif()
  if(NOT TARGET CUDA::cudart)
    find_package(CUDAToolkit REQUIRED)
  endif()
  set(dir ${_ROOFBENCH_CASE_SUPPORT_DIR})
  add_library(roofbench_cuda_case_support STATIC
    ${dir}/formats.cpp ${dir}/gate.cpp ${dir}/launch_timing.cpp ${dir}/nonfinite.cu)
  add_library(roofbench::cuda_case_support ALIAS roofbench_cuda_case_support)
  set_target_properties(roofbench_cuda_case_support PROPERTIES
    POSITION_INDEPENDENT_CODE ON CUDA_RUNTIME_LIBRARY Shared
    CXX_VISIBILITY_PRESET hidden CUDA_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON)
  target_link_libraries(roofbench_cuda_case_support PUBLIC roofbench::plugin_api CUDA::cudart)
  if(TARGET roofbench_warnings)
    target_link_libraries(roofbench_cuda_case_support PRIVATE roofbench_warnings)
  endif()
  _roofbench_optimise_by_default(roofbench_cuda_case_support)
endfunction()

# NAME_test from the TESTS sources and the cases: through roofbench_add_test in roofbench's tree, with
# GoogleTest found by find_package elsewhere.
function(_roofbench_plugin_test NAME cases cuda)
  set(label cpu)
  if(cuda)
    set(label gpu)
  endif()
  if(COMMAND roofbench_add_test)
    roofbench_add_test(${NAME}_test SOURCES ${ARGN} LIBRARIES ${cases} LABELS ${label})
    return()
  endif()
  find_package(GTest QUIET)
  if(NOT GTest_FOUND)
    _roofbench_left_out("test ${NAME}_test" "GoogleTest not found")
    return()
  endif()
  add_executable(${NAME}_test ${ARGN})
  target_link_libraries(${NAME}_test PRIVATE GTest::gtest_main ${cases})
  include(GoogleTest)
  gtest_discover_tests(${NAME}_test PROPERTIES LABELS ${label})
endfunction()

# The object library roofbench_NAME_cases of the plugin's sources, with the compile settings of a plugin.
function(_roofbench_plugin_cases NAME cuda)
  set(cases ${ROOFBENCH_PLUGIN_TARGET_PREFIX}${NAME}_cases)
  add_library(${cases} OBJECT ${ARGN})
  set_target_properties(${cases} PROPERTIES
    POSITION_INDEPENDENT_CODE ON CXX_VISIBILITY_PRESET hidden CUDA_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON)
  target_include_directories(${cases} PUBLIC ${CMAKE_CURRENT_SOURCE_DIR})
  target_link_libraries(${cases} PUBLIC roofbench::plugin_api)
  if(TARGET roofbench_warnings)
    target_link_libraries(${cases} PRIVATE roofbench_warnings)
  endif()
  if(cuda)
    set_target_properties(${cases} PROPERTIES CUDA_RUNTIME_LIBRARY Shared)
    target_link_libraries(${cases} PUBLIC CUDA::cudart)
    # The ABI fingerprint's CUDA runtime major, whichever headers the entry point's file includes.
    target_compile_definitions(${cases} PRIVATE ROOFBENCH_CUDA_RUNTIME_MAJOR=${CUDAToolkit_VERSION_MAJOR})
  endif()
endfunction()

function(roofbench_add_plugin NAME)
  cmake_parse_arguments(ARG "CUDA;NO_INSTALL" "" "SOURCES;LIBRARIES;TESTS" ${ARGN})
  if(ARG_CUDA)
    _roofbench_cuda_available(have_cuda)
    if(NOT have_cuda)
      _roofbench_left_out("plugin ${NAME}" "needs CUDA (enable the CUDA language before roofbench_add_plugin)")
      return()
    endif()
    if(NOT TARGET CUDA::cudart)
      find_package(CUDAToolkit REQUIRED)
    endif()
  endif()
  if("roofbench::cuda_case_support" IN_LIST ARG_LIBRARIES OR "roofbench_cuda_case_support" IN_LIST ARG_LIBRARIES)
    roofbench_cuda_case_support()
  endif()
  set(target ${ROOFBENCH_PLUGIN_TARGET_PREFIX}${NAME})
  set(cases ${target}_cases)
  _roofbench_plugin_cases(${NAME} "${ARG_CUDA}" ${ARG_SOURCES})
  target_link_libraries(${cases} PUBLIC ${ARG_LIBRARIES})
  add_library(${target} MODULE)
  set_target_properties(${target} PROPERTIES
    PREFIX "" OUTPUT_NAME "roofbench-${NAME}"
    LIBRARY_OUTPUT_DIRECTORY ${ROOFBENCH_PLUGIN_DIR}
    CXX_VISIBILITY_PRESET hidden CUDA_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON)
  target_link_libraries(${target} PRIVATE ${cases})
  if(ARG_CUDA)
    target_sources(${target} PRIVATE ${_ROOFBENCH_PLUGIN_CMAKE_DIR}/RoofbenchCudaProbe.cu)
    # One CUDA runtime in the process: the host's and the plugin's streams must mean the same thing.
    set_target_properties(${target} PROPERTIES CUDA_RUNTIME_LIBRARY Shared)
  endif()
  _roofbench_optimise_by_default(${target} ${cases})
  # An unresolved symbol must fail the link, not the host's load.
  target_link_options(${target} PRIVATE -Wl,--no-undefined)
  set_property(GLOBAL APPEND PROPERTY ROOFBENCH_PLUGIN_FILES
               "${ROOFBENCH_PLUGIN_DIR}/roofbench-${NAME}${CMAKE_SHARED_MODULE_SUFFIX}")
  if(NOT ARG_NO_INSTALL)
    install(TARGETS ${target} LIBRARY DESTINATION ${ROOFBENCH_INSTALL_PLUGIN_DIR})
  endif()
  if(ARG_TESTS)
    _roofbench_plugin_test(${NAME} ${cases} "${ARG_CUDA}" ${ARG_TESTS})
  endif()
endfunction()

# Removes plugin files from FOLDERS that no roofbench_add_plugin of this configuration builds: a plugin
# whose folder was deleted must not keep loading from an old build.
function(roofbench_remove_stale_plugins)
  get_property(built GLOBAL PROPERTY ROOFBENCH_PLUGIN_FILES)
  foreach(folder IN LISTS ARGN)
    file(GLOB present ${folder}/roofbench-*${CMAKE_SHARED_MODULE_SUFFIX})
    foreach(file IN LISTS present)
      if(NOT file IN_LIST built)
        message(STATUS "roofbench: removing ${file}: no plugin of this configuration builds it")
        file(REMOVE ${file})
      endif()
    endforeach()
  endforeach()
endfunction()
