# cmake -DPROGRAM=<exe> -DEXPECTED=<exact stderr line> -P check_abort.cmake
# Runs PROGRAM, which must fail (abort) and print exactly EXPECTED on stderr.
execute_process(COMMAND "${PROGRAM}" RESULT_VARIABLE rc ERROR_VARIABLE err OUTPUT_QUIET)
if(rc EQUAL 0)
  message(FATAL_ERROR "${PROGRAM} succeeded; it must abort")
endif()
string(STRIP "${err}" err)
if(NOT err STREQUAL EXPECTED)
  message(FATAL_ERROR "${PROGRAM} printed\n  ${err}\nexpected\n  ${EXPECTED}")
endif()
message(STATUS "${PROGRAM}: failed (${rc}) with: ${err}")
