# cmake -DSOURCE=<dir> -DBINARY=<dir> -DGENERATOR=<g> -DCONFIGURE_OPTIONS=<a|b|...>
#       -P quiet_configure.cmake
# Configures the consumer project SOURCE into a fresh BINARY and fails if ptq printed a status
# line of its own ("ptq: ...") or any CMake warning.
file(REMOVE_RECURSE "${BINARY}")
string(REPLACE "|" ";" options "${CONFIGURE_OPTIONS}")
execute_process(COMMAND "${CMAKE_COMMAND}" -S "${SOURCE}" -B "${BINARY}" -G "${GENERATOR}"
                        ${options}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "configure failed (${rc}):\n${out}\n${err}")
endif()
if(out MATCHES "(^|\n)-- ptq:[^\n]*" OR err MATCHES "CMake Warning")
  message(FATAL_ERROR "a consumer's configure is not quiet:\n${out}\n${err}")
endif()
message(STATUS "the consumer configured without a word from ptq")
