# Functions roofbench's own tree uses besides roofbench_add_plugin (which is public: RoofbenchPlugin.cmake).

# roofbench_add_test(NAME SOURCES ... [LIBRARIES ...] LABELS cpu|gpu [CUDA])
# A GoogleTest executable whose tests CTest lists one by one. GPU tests skip themselves (GTEST_SKIP with
# the reason) where no GPU is present, so they are labelled gpu but still run everywhere.
function(roofbench_add_test NAME)
  cmake_parse_arguments(ARG "CUDA" "" "SOURCES;LIBRARIES;LABELS;PROPERTIES" ${ARGN})
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
  gtest_discover_tests(${NAME} PROPERTIES LABELS "${ARG_LABELS}" ${ARG_PROPERTIES} DISCOVERY_TIMEOUT 120)
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

# The CUDA architectures to build for when the user names none: those of the GPUs this machine has
# (nvidia-smi), else Hopper (sm_90). Called before project(), since CUDA must know them when enabled.
function(roofbench_default_cuda_architectures)
  if(DEFINED CMAKE_CUDA_ARCHITECTURES OR DEFINED ENV{CUDAARCHS})
    return()
  endif()
  set(architectures 90)
  set(why "no GPU found at configure time")
  find_program(ROOFBENCH_NVIDIA_SMI nvidia-smi)
  if(ROOFBENCH_NVIDIA_SMI)
    execute_process(COMMAND ${ROOFBENCH_NVIDIA_SMI} --query-gpu=compute_cap --format=csv,noheader
                    OUTPUT_VARIABLE capabilities RESULT_VARIABLE status ERROR_QUIET TIMEOUT 20)
    string(REGEX MATCHALL "[0-9]+\\.[0-9]+" capabilities "${capabilities}")
    if(status EQUAL 0 AND capabilities)
      list(TRANSFORM capabilities REPLACE "\\." "")
      list(REMOVE_DUPLICATES capabilities)
      list(SORT capabilities COMPARE NATURAL)
      set(architectures ${capabilities})
      set(why "the GPUs found at configure time (nvidia-smi)")
    endif()
  endif()
  set(CMAKE_CUDA_ARCHITECTURES "${architectures}" CACHE STRING
      "CUDA architectures (default: ${why}; e.g. 80;90 for A100 and H100)")
  message(STATUS "roofbench: CUDA architectures ${architectures}: ${why}; -DCMAKE_CUDA_ARCHITECTURES=... to change")
endfunction()
