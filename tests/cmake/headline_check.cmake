# cmake -DTOOL=<roofbench_figures> -DSCRIPT=<ctest_measurements.py> -P headline_check.cmake
# The CTest measurements' fixed counters are the host's headline figures (core/src/summaries.cpp).
execute_process(COMMAND ${TOOL} headline RESULT_VARIABLE status OUTPUT_VARIABLE names)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "${TOOL} headline failed (${status})")
endif()
string(STRIP "${names}" names)
string(REPLACE "\n" "\", \"" quoted "${names}")
set(expected "HEADLINE_COUNTERS = (\"${quoted}\")")
file(STRINGS ${SCRIPT} written REGEX "^HEADLINE_COUNTERS = ")
if(NOT written STREQUAL expected)
  message(FATAL_ERROR "${SCRIPT} says\n  ${written}\nbut the host's headline figures make\n  ${expected}")
endif()
