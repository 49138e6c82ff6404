# roofbench_add_plugin(NAME SOURCES a.cpp b.cu ... [LIBRARIES lib...] [CUDA] [NO_INSTALL])
# Builds a plugin the host finds on its own: <build>/lib/roofbench/plugins/roofbench-NAME.so.
# CUDA: skipped (and said so at configure time) when no CUDA toolkit was found.
set(ROOFBENCH_PLUGIN_DIR ${CMAKE_BINARY_DIR}/lib/roofbench/plugins)
set(ROOFBENCH_INSTALL_PLUGIN_DIR ${CMAKE_INSTALL_LIBDIR}/roofbench/plugins)

function(roofbench_add_plugin NAME)
  cmake_parse_arguments(ARG "CUDA;NO_INSTALL" "" "SOURCES;LIBRARIES" ${ARGN})
  if(ARG_CUDA AND NOT ROOFBENCH_HAVE_CUDA)
    roofbench_left_out("plugin ${NAME}" "needs CUDA")
    return()
  endif()
  set(target roofbench_plugin_${NAME})
  add_library(${target} MODULE ${ARG_SOURCES})
  set_target_properties(${target} PROPERTIES
    PREFIX "" OUTPUT_NAME "roofbench-${NAME}"
    LIBRARY_OUTPUT_DIRECTORY ${ROOFBENCH_PLUGIN_DIR}
    CXX_VISIBILITY_PRESET hidden CUDA_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON)
  target_link_libraries(${target} PRIVATE roofbench::plugin_api roofbench_warnings ${ARG_LIBRARIES})
  # An unresolved symbol must fail the link, not the host's load.
  target_link_options(${target} PRIVATE -Wl,--no-undefined)
  if(NOT ARG_NO_INSTALL)
    install(TARGETS ${target} LIBRARY DESTINATION ${ROOFBENCH_INSTALL_PLUGIN_DIR})
  endif()
endfunction()

# roofbench_add_test(NAME SOURCES ... [LIBRARIES ...] LABELS cpu|gpu [CUDA])
# A GoogleTest executable whose tests CTest lists one by one. GPU tests skip themselves (GTEST_SKIP with
# the reason) where no GPU is present, so they are labelled gpu but still run everywhere.
function(roofbench_add_test NAME)
  cmake_parse_arguments(ARG "CUDA" "" "SOURCES;LIBRARIES;LABELS" ${ARGN})
  if(NOT ROOFBENCH_BUILD_TESTS)
    return()
  endif()
  if(ARG_CUDA AND NOT ROOFBENCH_HAVE_CUDA)
    roofbench_left_out("test ${NAME}" "needs CUDA")
    return()
  endif()
  add_executable(${NAME} ${ARG_SOURCES})
  target_link_libraries(${NAME} PRIVATE GTest::gtest_main roofbench_warnings ${ARG_LIBRARIES})
  include(GoogleTest)
  gtest_discover_tests(${NAME} PROPERTIES LABELS "${ARG_LABELS}" DISCOVERY_TIMEOUT 120)
endfunction()

# roofbench_add_cuda_kernels(NAME SOURCES a.cu ... TEST test.cpp)
# A folder of kernels/ shared by plugins: the static library roofbench_kernels_NAME (headers in
# include/), linked against the one shared CUDA runtime, and its GPU test. Left out without CUDA.
function(roofbench_add_cuda_kernels NAME)
  cmake_parse_arguments(ARG "" "TEST" "SOURCES" ${ARGN})
  if(NOT ROOFBENCH_HAVE_CUDA)
    roofbench_left_out("kernels/${NAME}" "needs CUDA")
    return()
  endif()
  set(target roofbench_kernels_${NAME})
  add_library(${target} STATIC ${ARG_SOURCES})
  add_library(roofbench::kernels_${NAME} ALIAS ${target})
  target_include_directories(${target} PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/include)
  target_link_libraries(${target} PUBLIC roofbench::plugin_api CUDA::cudart PRIVATE roofbench_warnings)
  if(ARG_TEST)
    roofbench_add_test(${NAME}_test CUDA SOURCES ${ARG_TEST} LIBRARIES ${target} LABELS gpu)
  endif()
endfunction()
