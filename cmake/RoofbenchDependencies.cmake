# Finds what roofbench builds against and records what was left out, so configure can say it.
# What was left out is a global property so plugin folders can add to it.
function(roofbench_left_out what why)
  set_property(GLOBAL APPEND PROPERTY ROOFBENCH_LEFT_OUT "${what}: ${why}")
endfunction()

find_package(benchmark REQUIRED)
find_package(Threads REQUIRED)
find_package(Boost 1.74 REQUIRED)  # header-only: Boost.DLL
if(ROOFBENCH_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()

# CPU BLAS for the cpu plugin's third matmul and the CPU GEMM ceiling; OpenBLAS preferred.
set(BLA_VENDOR OpenBLAS)
find_package(BLAS QUIET)
if(NOT BLAS_FOUND)
  unset(BLA_VENDOR)
  find_package(BLAS QUIET)
endif()
find_path(ROOFBENCH_CBLAS_INCLUDE_DIR cblas.h PATH_SUFFIXES openblas)
if(BLAS_FOUND AND ROOFBENCH_CBLAS_INCLUDE_DIR)
  add_library(roofbench_blas INTERFACE)
  target_link_libraries(roofbench_blas INTERFACE ${BLAS_LIBRARIES})
  target_include_directories(roofbench_blas INTERFACE ${ROOFBENCH_CBLAS_INCLUDE_DIR})
  target_compile_definitions(roofbench_blas INTERFACE ROOFBENCH_HAVE_CBLAS=1)
  set(ROOFBENCH_HAVE_BLAS ON)
else()
  set(ROOFBENCH_HAVE_BLAS OFF)
  roofbench_left_out("system BLAS (cpu/matmul_blas, CPU GEMM ceiling uses the blocked kernel)"
                     "no BLAS with cblas.h found (apt-get install libopenblas-dev)")
endif()

find_package(OpenMP QUIET)

set(ROOFBENCH_HAVE_CUDA OFF)
if(ROOFBENCH_WITH_CUDA)
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    enable_language(CUDA)
    # CMake 3.25 does not know that nvcc 13 speaks C++20 (generation fails with "requires the language
    # dialect CUDA20"): tell it the flag.
    if(NOT CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
      set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
      set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
    endif()
    set(CMAKE_CUDA_STANDARD 20)
    # One CUDA runtime in the process: the host and every plugin share libcudart.so, so streams,
    # errors and device resets mean the same thing on both sides.
    set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    find_package(CUDAToolkit REQUIRED)
    set(ROOFBENCH_HAVE_CUDA ON)
  else()
    roofbench_left_out("every CUDA part (GPU devices, micro, gpt, nccl plugins, GPU tests)" "no CUDA compiler found")
  endif()
else()
  roofbench_left_out("every CUDA part" "ROOFBENCH_WITH_CUDA=OFF")
endif()

# cuDNN and NCCL live under the toolkit on one machine and in the system paths on another.
# ROOFBENCH_CUDNN_ROOT names another cuDNN (a folder with include/ and lib/ or lib64/, such as the one a
# PyTorch wheel bundles) to build and run against instead: searched alone, its libcudnn.so.9 taken when
# the folder has no unversioned libcudnn.so, and its lib folder put in the cuDNN users' RPATH. The
# dispatcher libcudnn.so.9 dlopens its sub-libraries by soname and carries RUNPATH $ORIGIN, so they
# load from the same folder (no LD_LIBRARY_PATH needed, and one set there would win over $ORIGIN).
set(ROOFBENCH_CUDNN_ROOT "" CACHE PATH "A cuDNN to use instead of the one in the search paths (folder with include/ and lib/)")
if(ROOFBENCH_HAVE_CUDA)
  # The cached cuDNN paths belong to the root they were found under: a changed (or removed) root finds again.
  if(NOT "${ROOFBENCH_CUDNN_ROOT}" STREQUAL "${_ROOFBENCH_CUDNN_ROOT_FOUND}")
    unset(ROOFBENCH_CUDNN_INCLUDE_DIR CACHE)
    unset(ROOFBENCH_CUDNN_LIBRARY CACHE)
    set(_ROOFBENCH_CUDNN_ROOT_FOUND "${ROOFBENCH_CUDNN_ROOT}" CACHE INTERNAL "the ROOFBENCH_CUDNN_ROOT of the cached cuDNN paths")
  endif()
  set(roofbench_cuda_hints ${CUDAToolkit_LIBRARY_ROOT} ${CUDAToolkit_TARGET_DIR} /usr/local/cuda)
  foreach(lib IN ITEMS cudnn nccl)
    string(TOUPPER ${lib} LIB)
    if(lib STREQUAL "cudnn" AND ROOFBENCH_CUDNN_ROOT)
      find_path(ROOFBENCH_CUDNN_INCLUDE_DIR cudnn.h PATHS ${ROOFBENCH_CUDNN_ROOT} PATH_SUFFIXES include NO_DEFAULT_PATH)
      find_library(ROOFBENCH_CUDNN_LIBRARY NAMES cudnn libcudnn.so.9 PATHS ${ROOFBENCH_CUDNN_ROOT}
                   PATH_SUFFIXES lib64 lib NO_DEFAULT_PATH)
      if(NOT ROOFBENCH_CUDNN_INCLUDE_DIR OR NOT ROOFBENCH_CUDNN_LIBRARY)
        message(FATAL_ERROR "ROOFBENCH_CUDNN_ROOT=${ROOFBENCH_CUDNN_ROOT} has no include/cudnn.h or lib/libcudnn.so[.9] "
                            "(found '${ROOFBENCH_CUDNN_INCLUDE_DIR}', '${ROOFBENCH_CUDNN_LIBRARY}')")
      endif()
    endif()
    find_path(ROOFBENCH_${LIB}_INCLUDE_DIR ${lib}.h HINTS ${roofbench_cuda_hints} PATH_SUFFIXES include)
    find_library(ROOFBENCH_${LIB}_LIBRARY ${lib} HINTS ${roofbench_cuda_hints} PATH_SUFFIXES lib64 lib)
    if(ROOFBENCH_${LIB}_INCLUDE_DIR AND ROOFBENCH_${LIB}_LIBRARY)
      add_library(roofbench::${lib} INTERFACE IMPORTED)
      target_include_directories(roofbench::${lib} INTERFACE ${ROOFBENCH_${LIB}_INCLUDE_DIR})
      target_link_libraries(roofbench::${lib} INTERFACE ${ROOFBENCH_${LIB}_LIBRARY})
      set(ROOFBENCH_HAVE_${LIB} ON)
      message(STATUS "roofbench: ${lib} ${ROOFBENCH_${LIB}_LIBRARY}, headers in ${ROOFBENCH_${LIB}_INCLUDE_DIR}")
    else()
      set(ROOFBENCH_HAVE_${LIB} OFF)
      roofbench_left_out("${lib} parts" "${lib}.h or lib${lib} not found")
    endif()
  endforeach()
  if(ROOFBENCH_CUDNN_ROOT AND ROOFBENCH_HAVE_CUDNN)
    # The build tree's RPATH gets the folder of a library linked by full path; the installed plugins need it
    # too, or they would load the system's cuDNN.
    set(CMAKE_INSTALL_RPATH_USE_LINK_PATH ON)
  endif()
  if(NOT TARGET CUDA::cupti)
    roofbench_left_out("CUPTI profiling" "CUDA::cupti not found")
  endif()
endif()

function(roofbench_print_summary)
  message(STATUS "roofbench: build type ${CMAKE_BUILD_TYPE}, CUDA ${ROOFBENCH_HAVE_CUDA}"
                 " (architectures ${CMAKE_CUDA_ARCHITECTURES}), BLAS ${ROOFBENCH_HAVE_BLAS}")
  get_property(left_out GLOBAL PROPERTY ROOFBENCH_LEFT_OUT)
  if(left_out)
    foreach(item IN LISTS left_out)
      message(STATUS "roofbench: left out ${item}")
    endforeach()
  else()
    message(STATUS "roofbench: nothing left out")
  endif()
endfunction()

# Warnings for every roofbench target.
add_library(roofbench_warnings INTERFACE)
target_compile_options(roofbench_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra $<$<BOOL:${ROOFBENCH_WERROR}>:-Werror>>
  # The API's structs are meant to be filled with designated initializers that leave defaults out.
  $<$<COMPILE_LANGUAGE:CXX>:-Wno-missing-field-initializers>
  # GCC 12 reports -Wrestrict false positives inside std::string's operator+ (GCC bug 105329).
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<CXX_COMPILER_ID:GNU>,$<VERSION_LESS:$<CXX_COMPILER_VERSION>,13>>:-Wno-restrict>
  $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra,-Wno-missing-field-initializers --expt-relaxed-constexpr $<$<BOOL:${ROOFBENCH_WERROR}>:-Werror=all-warnings>>)

# ROOFBENCH_PYTHON: the interpreter the report tools and every Python test run under. The tools draw with
# Debian's python3-matplotlib and python3-plotly and find change points with python3-numpy, which apt puts
# under /usr/bin/python3; another python3 first on PATH (a pyenv shim, a virtual environment) may lack them.
find_package(Python3 COMPONENTS Interpreter)
set(ROOFBENCH_PYTHON "")
if(Python3_Interpreter_FOUND)
  foreach(candidate IN ITEMS ${Python3_EXECUTABLE} /usr/bin/python3)
    execute_process(COMMAND ${candidate} -c "import matplotlib, plotly, numpy" RESULT_VARIABLE missing_libraries
                    OUTPUT_QUIET ERROR_QUIET)
    if(missing_libraries EQUAL 0)
      set(ROOFBENCH_PYTHON ${candidate})
      break()
    endif()
  endforeach()
  if(NOT ROOFBENCH_PYTHON)
    message(WARNING "roofbench: no python3 with matplotlib, plotly and numpy: the report tools and their tests "
                    "will fail (apt-get install python3-matplotlib python3-plotly python3-numpy)")
    set(ROOFBENCH_PYTHON ${Python3_EXECUTABLE})
  endif()
endif()
