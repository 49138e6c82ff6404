# roofbench_add_plugin(NAME SOURCES a.cpp b.cu ... [LIBRARIES lib...] [CUDA] [NO_INSTALL])
# Builds a plugin the host finds on its own: <build>/lib/roofbench/plugins/roofbench-NAME.so, installed
# to <prefix>/lib/roofbench/plugins (where an installed host looks, beside its bin/).
# CUDA: the plugin gets a probe (RoofbenchCudaProbe.cu) through which the host asks whether its kernels
# have code for the device; the plugin is skipped, and said so, where CUDA is not available.
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
function(_roofbench_optimise_by_default target)
  get_property(multi_config GLOBAL PROPERTY GENERATOR_IS_MULTI_CONFIG)
  if(multi_config OR CMAKE_BUILD_TYPE OR CMAKE_CXX_FLAGS MATCHES "(^| )-O")
    return()
  endif()
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX,CUDA>:-O2>)
  message(STATUS "roofbench: ${target} built with -O2 (no CMAKE_BUILD_TYPE given; "
                 "-DCMAKE_BUILD_TYPE=Debug or another type overrides it)")
endfunction()

function(roofbench_add_plugin NAME)
  cmake_parse_arguments(ARG "CUDA;NO_INSTALL" "" "SOURCES;LIBRARIES" ${ARGN})
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
  set(target ${ROOFBENCH_PLUGIN_TARGET_PREFIX}${NAME})
  add_library(${target} MODULE ${ARG_SOURCES})
  set_target_properties(${target} PROPERTIES
    PREFIX "" OUTPUT_NAME "roofbench-${NAME}"
    LIBRARY_OUTPUT_DIRECTORY ${ROOFBENCH_PLUGIN_DIR}
    CXX_VISIBILITY_PRESET hidden CUDA_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON)
  target_link_libraries(${target} PRIVATE roofbench::plugin_api ${ARG_LIBRARIES})
  if(TARGET roofbench_warnings)
    target_link_libraries(${target} PRIVATE roofbench_warnings)
  endif()
  if(ARG_CUDA)
    target_sources(${target} PRIVATE ${_ROOFBENCH_PLUGIN_CMAKE_DIR}/RoofbenchCudaProbe.cu)
    # One CUDA runtime in the process: the host's and the plugin's streams must mean the same thing.
    set_target_properties(${target} PROPERTIES CUDA_RUNTIME_LIBRARY Shared)
    target_link_libraries(${target} PRIVATE CUDA::cudart)
    # The ABI fingerprint's CUDA runtime major, whichever headers the entry point's file includes.
    target_compile_definitions(${target} PRIVATE ROOFBENCH_CUDA_RUNTIME_MAJOR=${CUDAToolkit_VERSION_MAJOR})
  endif()
  _roofbench_optimise_by_default(${target})
  # An unresolved symbol must fail the link, not the host's load.
  target_link_options(${target} PRIVATE -Wl,--no-undefined)
  set_property(GLOBAL APPEND PROPERTY ROOFBENCH_PLUGIN_FILES
               "${ROOFBENCH_PLUGIN_DIR}/roofbench-${NAME}${CMAKE_SHARED_MODULE_SUFFIX}")
  if(NOT ARG_NO_INSTALL)
    install(TARGETS ${target} LIBRARY DESTINATION ${ROOFBENCH_INSTALL_PLUGIN_DIR})
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
