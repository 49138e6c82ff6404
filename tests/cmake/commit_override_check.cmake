# cmake/RoofbenchCommit.cmake takes ROOFBENCH_COMMIT from the environment over git's answer, and writes
# the header again when the name changes. Run with -DSOURCE_DIR, -DOUT (a scratch file) and -DSCRIPT.
foreach(name abc123 "def456-dirty")
  set(ENV{ROOFBENCH_COMMIT} "${name}")
  include(${SCRIPT})
  file(READ ${OUT} written)
  string(FIND "${written}" "#define ROOFBENCH_COMMIT \"${name}\"" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "ROOFBENCH_COMMIT=${name} gave:\n${written}")
  endif()
endforeach()
