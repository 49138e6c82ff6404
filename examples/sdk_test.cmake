# cmake -DSOURCE_DIR=<roofbench source> -DWORK_DIR=<scratch> [-DGENERATOR=Ninja] [-DLAUNCHER=ccache]
#       [-DCUDA_COMPILER=nvcc -DCUDA_ARCHITECTURES=90] -P sdk_test.cmake
# What a plugin author does, end to end, as the README says it. Out of tree: install roofbench's CPU
# parts into a prefix, build examples/scale with find_package(roofbench) and, separately, with nothing
# but `pkg-config --cflags roofbench`, and run both through the installed host. In tree: add
# plugins/scale to a copy of the source, build (no explicit re-configure), run it, delete the folder,
# build, and see the plugin gone. The copy and its build are kept in WORK_DIR between runs (incremental);
# the prefix and the example's build are made afresh each time.
cmake_minimum_required(VERSION 3.25)
foreach(required SOURCE_DIR WORK_DIR)
  if(NOT ${required})
    message(FATAL_ERROR "sdk_test.cmake needs -D${required}=...")
  endif()
endforeach()

set(source_copy ${WORK_DIR}/source)
set(inner_build ${WORK_DIR}/roofbench-build)
set(prefix ${WORK_DIR}/prefix)
set(example_build ${WORK_DIR}/example-build)
set(results ${WORK_DIR}/results)
file(REMOVE_RECURSE ${prefix} ${example_build} ${WORK_DIR}/example-debug-build ${WORK_DIR}/pkg-config-plugin
     ${results})

function(step what)
  message(STATUS "sdk test: ${what}")
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE status OUTPUT_VARIABLE output ERROR_VARIABLE output)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "sdk test: ${what} failed (${status}):\n${output}")
  endif()
  set(step_output "${output}" PARENT_SCOPE)
endfunction()

set(generator_args)
if(GENERATOR)
  set(generator_args -G ${GENERATOR})
endif()
set(launcher_args)
if(LAUNCHER)
  set(launcher_args -DCMAKE_CXX_COMPILER_LAUNCHER=${LAUNCHER})
endif()
cmake_host_system_information(RESULT cores QUERY NUMBER_OF_LOGICAL_CORES)

# Only what the source distribution holds: build folders inside the checkout stay out.
file(REMOVE_RECURSE ${source_copy}/plugins/scale)
foreach(entry CMakeLists.txt CTestConfig.cmake README.md cmake core include sdk kernels plugins examples reports suites tests)
  file(COPY ${SOURCE_DIR}/${entry} DESTINATION ${source_copy} PATTERN __pycache__ EXCLUDE)
endforeach()
file(REMOVE_RECURSE ${source_copy}/plugins/scale)  # one the user made in their checkout

step("configure roofbench (CPU parts)" ${CMAKE_COMMAND} -S ${source_copy} -B ${inner_build} ${generator_args}
     -DCMAKE_BUILD_TYPE=Release -DROOFBENCH_WITH_CUDA=OFF -DROOFBENCH_BUILD_TESTS=OFF
     -DCMAKE_INSTALL_PREFIX=${prefix} ${launcher_args})
step("build roofbench" ${CMAKE_COMMAND} --build ${inner_build} -j ${cores})
step("install roofbench" ${CMAKE_COMMAND} --install ${inner_build})

foreach(installed include/roofbench/plugin.hpp include/roofbench/detail/abi.hpp include/roofbench/cuda.hpp bin/roofbench
        lib/cmake/roofbench/roofbenchConfig.cmake lib/cmake/roofbench/roofbenchConfigVersion.cmake
        lib/cmake/roofbench/roofbenchTargets.cmake lib/cmake/roofbench/RoofbenchPlugin.cmake
        include/roofbench/case_support/gate.hpp lib/cmake/roofbench/case_support/gate.cpp
        lib/cmake/roofbench/case_support/nonfinite.cu
        lib/pkgconfig/roofbench.pc lib/roofbench/plugins/roofbench-cpu.so bin/roofbench-report bin/roofbench-compare)
  if(NOT EXISTS ${prefix}/${installed})
    file(GLOB_RECURSE everything RELATIVE ${prefix} ${prefix}/*)
    message(FATAL_ERROR "sdk test: cmake --install did not install ${installed}; it installed:\n${everything}")
  endif()
endforeach()

# The ABI version in the package config and the .pc file is the number alone.
file(STRINGS ${SOURCE_DIR}/include/roofbench/detail/abi.hpp abi_line REGEX "kAbiVersion = [0-9]+;")
string(REGEX REPLACE ".*kAbiVersion = ([0-9]+).*" "\\1" abi_version "${abi_line}")
file(READ ${prefix}/lib/cmake/roofbench/roofbenchConfig.cmake config_text)
file(READ ${prefix}/lib/pkgconfig/roofbench.pc pc_text)
if(NOT config_text MATCHES "set\\(ROOFBENCH_ABI_VERSION ${abi_version}\\)"
   OR NOT pc_text MATCHES "\nabi_version=${abi_version}\n")
  message(FATAL_ERROR "sdk test: the installed ABI version is not ${abi_version}:\n${config_text}\n${pc_text}")
endif()

# expect_optimisation(<build folder> <YES|NO>): whether compile_commands.json compiles scale.cpp with
# an -O level other than -O0.
function(expect_optimisation build_dir wanted)
  file(READ ${build_dir}/compile_commands.json commands)
  string(JSON count LENGTH "${commands}")
  math(EXPR last "${count} - 1")
  set(scale_command "")
  foreach(index RANGE ${last})
    string(JSON file GET "${commands}" ${index} file)
    if(file MATCHES "scale\\.cpp$")
      string(JSON scale_command GET "${commands}" ${index} command)
    endif()
  endforeach()
  string(REGEX MATCHALL " -O[^ ]*" levels "${scale_command}")
  list(POP_BACK levels last_level)  # the last -O on the line is the one the compiler uses
  if(last_level MATCHES "^ -O(1|2|3|s|z|fast|)$")
    set(optimised YES)
  else()
    set(optimised NO)
  endif()
  if(NOT optimised STREQUAL wanted)
    message(FATAL_ERROR "sdk test: ${build_dir}: optimised ${optimised}, expected ${wanted}; "
                        "scale.cpp is compiled with:\n${scale_command}")
  endif()
endfunction()

# Configured as the README says, with no build type: the plugin must still be optimised.
step("configure examples/scale against the install" ${CMAKE_COMMAND} -S ${SOURCE_DIR}/examples/scale
     -B ${example_build} ${generator_args} -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_INSTALL_PREFIX=${prefix}
     -DCMAKE_EXPORT_COMPILE_COMMANDS=ON ${launcher_args})
if(NOT step_output MATCHES "roofbench: [^ ]+ built with -O2")
  message(FATAL_ERROR "sdk test: configuring with no build type does not say it builds with -O2:\n${step_output}")
endif()
expect_optimisation(${example_build} YES)
step("build examples/scale" ${CMAKE_COMMAND} --build ${example_build})
# A build type the user names is theirs: Debug stays unoptimised (and shows the check above can fail).
step("configure examples/scale as a Debug build" ${CMAKE_COMMAND} -S ${SOURCE_DIR}/examples/scale
     -B ${WORK_DIR}/example-debug-build ${generator_args} -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=Debug
     -DCMAKE_EXPORT_COMPILE_COMMANDS=ON)
expect_optimisation(${WORK_DIR}/example-debug-build NO)
set(built_plugin ${example_build}/lib/roofbench/plugins/roofbench-scale.so)
if(NOT EXISTS ${built_plugin})
  message(FATAL_ERROR "sdk test: the example did not build ${built_plugin}")
endif()

# A host that measures: its own ceilings cache, so the user's is left alone.
set(run_env ${CMAKE_COMMAND} -E env ROOFBENCH_CACHE_DIR=${WORK_DIR}/ceilings-cache --unset=ROOFBENCH_PLUGIN_PATH)
# run_scale(<what> <the plugin file that must have run> [roofbench arguments...])
function(run_scale what plugin_file)
  string(MAKE_C_IDENTIFIER "${what}" run_name)
  set(run_results ${results}/${run_name})
  step("${what}" ${run_env} ${prefix}/bin/roofbench --device cpu --max-time 0.05 --results-dir ${run_results}
       ${ARGN} --benchmark_filter=^scale/scale/n:1024/)
  file(READ ${run_results}/latest.json document)
  string(JSON benchmark GET "${document}" benchmarks 0 name)
  string(JSON loaded GET "${document}" context roofbench plugins)
  if(NOT benchmark MATCHES "^scale/scale/n:1024" OR NOT loaded MATCHES "${plugin_file}")
    message(FATAL_ERROR "sdk test: ${what}: expected scale/scale/n:1024 from ${plugin_file}; ran ${benchmark} "
                        "with plugins ${loaded}")
  endif()
endfunction()

run_scale("run the built plugin through the installed host" ${built_plugin}
          --plugin-dir ${example_build}/lib/roofbench/plugins)

find_program(PKG_CONFIG pkg-config)
find_program(CXX_COMPILER NAMES c++ g++)
if(PKG_CONFIG AND CXX_COMPILER)
  set(ENV{PKG_CONFIG_PATH} ${prefix}/lib/pkgconfig)
  step("pkg-config --cflags roofbench" ${PKG_CONFIG} --cflags roofbench)
  separate_arguments(cflags UNIX_COMMAND "${step_output}")
  set(plugin_dir ${WORK_DIR}/pkg-config-plugin)
  file(MAKE_DIRECTORY ${plugin_dir})
  step("build examples/scale with pkg-config's flags" ${CXX_COMPILER} ${cflags} -O2 -shared -fPIC
       -fvisibility=hidden -Wl,--no-undefined ${SOURCE_DIR}/examples/scale/scale.cpp
       -o ${plugin_dir}/roofbench-scale.so)
  run_scale("run the pkg-config-built plugin" ${plugin_dir}/roofbench-scale.so --plugin-dir ${plugin_dir})
else()
  message(STATUS "sdk test: pkg-config or a C++ compiler not found: the pkg-config build is not checked")
endif()

# A CUDA plugin out of tree (where the outer build has CUDA): it builds, exports the architecture probe
# and the CPU-only installed host lists it (running it needs a GPU).
if(CUDA_COMPILER)
  set(cuda_build ${WORK_DIR}/example-cuda-build)
  file(REMOVE_RECURSE ${cuda_build})
  step("configure examples/scale_cuda against the install" ${CMAKE_COMMAND} -S ${SOURCE_DIR}/examples/scale_cuda
       -B ${cuda_build} ${generator_args} -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_CUDA_COMPILER=${CUDA_COMPILER}
       -DCMAKE_CUDA_ARCHITECTURES=${CUDA_ARCHITECTURES})
  step("build examples/scale_cuda" ${CMAKE_COMMAND} --build ${cuda_build})
  set(cuda_plugin ${cuda_build}/lib/roofbench/plugins/roofbench-scale_cuda.so)
  if(NOT EXISTS ${cuda_plugin})
    message(FATAL_ERROR "sdk test: the CUDA example did not build ${cuda_plugin}")
  endif()
  step("list examples/scale_cuda" ${run_env} ${prefix}/bin/roofbench --list --plugin-dir ${cuda_build}/lib/roofbench/plugins)
  # The listing wraps a long path onto the next line: the plugin's name, then its path in brackets.
  if(NOT step_output MATCHES "scale_cuda[ \n]+\\(${cuda_plugin}\\)")
    message(FATAL_ERROR "sdk test: the installed host does not list ${cuda_plugin}:\n${step_output}")
  endif()
  find_program(NM nm)
  if(NM)
    step("the CUDA plugin exports its architecture probe" ${NM} -D --defined-only ${cuda_plugin})
    if(NOT step_output MATCHES "roofbench_cuda_probe")
      message(FATAL_ERROR "sdk test: ${cuda_plugin} does not export roofbench_cuda_probe")
    endif()
  endif()
endif()

step("install examples/scale into roofbench's prefix" ${CMAKE_COMMAND} --install ${example_build})
run_scale("run the installed plugin, found by the installed host on its own"
          ${prefix}/lib/roofbench/plugins/roofbench-scale.so)
# In tree, as the README's walkthrough: a folder and a one-line CMakeLists.txt, then build.
file(MAKE_DIRECTORY ${source_copy}/plugins/scale)
file(COPY ${SOURCE_DIR}/examples/scale/scale.cpp DESTINATION ${source_copy}/plugins/scale)
file(WRITE ${source_copy}/plugins/scale/CMakeLists.txt "roofbench_add_plugin(scale SOURCES scale.cpp)\n")
step("build with plugins/scale added" ${CMAKE_COMMAND} --build ${inner_build} -j ${cores})
set(in_tree_plugin ${inner_build}/lib/roofbench/plugins/roofbench-scale.so)
set(prefix ${inner_build})  # run_scale runs ${prefix}/bin/roofbench: now the build tree's host
run_scale("run the in-tree plugin from the build tree" ${in_tree_plugin})
file(REMOVE_RECURSE ${source_copy}/plugins/scale)
step("build with plugins/scale removed" ${CMAKE_COMMAND} --build ${inner_build} -j ${cores})
if(EXISTS ${in_tree_plugin})
  message(FATAL_ERROR "sdk test: ${in_tree_plugin} is still there after plugins/scale was removed")
endif()
step("list plugins after the removal" ${run_env} ${inner_build}/bin/roofbench --list)
if(step_output MATCHES "roofbench-scale")
  message(FATAL_ERROR "sdk test: the removed plugin still loads:\n${step_output}")
endif()
message(STATUS "sdk test: passed")
