# cmake -DROOFBENCH=<roofbench> -DDOC=<docs/cli.md> -P cli_doc_check.cmake
# docs/cli.md is what `roofbench --help-markdown` prints from the options table the parser uses.
execute_process(COMMAND ${ROOFBENCH} --help-markdown RESULT_VARIABLE status OUTPUT_VARIABLE generated)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "roofbench --help-markdown failed (${status})")
endif()
if(NOT EXISTS ${DOC})
  message(FATAL_ERROR "${DOC} is missing: roofbench --help-markdown > ${DOC}")
endif()
file(READ ${DOC} written)
if(NOT written STREQUAL generated)
  message(FATAL_ERROR "${DOC} differs from the options table: regenerate it with roofbench --help-markdown > ${DOC}")
endif()
