# cmake -DPROGRAM=fp8wb_man_fields -DTEMPLATE=fp8wb.1.in -DOUTPUT=fp8wb.1 -P
# generate_man_page.cmake: writes the manual page from its template, the line that holds
# @FP8WB_CONFIG_FIELDS@ replaced by the config field list that PROGRAM prints (roff, from the
# field table in core/include/fp8wb/core/config/run_config.h). A field added to the table is
# in the page at the next build.
foreach(var PROGRAM TEMPLATE OUTPUT)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "generate_man_page.cmake: -D${var}=... is missing")
  endif()
endforeach()
execute_process(COMMAND ${PROGRAM}
                OUTPUT_VARIABLE fields ERROR_VARIABLE errors RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR fields STREQUAL "")
  message(FATAL_ERROR "${PROGRAM} failed (${rc}): ${errors}")
endif()
file(READ ${TEMPLATE} page)
string(REGEX MATCHALL "[^\n]*@FP8WB_CONFIG_FIELDS@[^\n]*\n" markers "${page}")
list(LENGTH markers count)
if(NOT count EQUAL 1)
  message(FATAL_ERROR "${TEMPLATE}: ${count} lines hold @FP8WB_CONFIG_FIELDS@, not one")
endif()
# A literal replacement: REGEX REPLACE would read roff's backslashes as its own escapes.
string(REPLACE "${markers}" "${fields}" page "${page}")
file(WRITE ${OUTPUT}.tmp "${page}")
file(RENAME ${OUTPUT}.tmp ${OUTPUT})
