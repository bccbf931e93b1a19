# ptq_example_mpi under mpirun -np 1, 2, 3 prints the record of the one-process digits example.
#   cmake -DMPIEXEC=... -DMPI_EXAMPLE=... -DDIGITS_EXAMPLE=... -DDIGITS=... -DCONFIG=... -P <this>
execute_process(COMMAND "${DIGITS_EXAMPLE}" "${DIGITS}" "${CONFIG}" RESULT_VARIABLE rc
                OUTPUT_VARIABLE one ERROR_QUIET)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "ptq_example_digits failed (exit ${rc})")
endif()
string(REGEX REPLACE "#[^\n]*\n" "" want "${one}")
foreach(ranks 1 2 3)
  execute_process(
    COMMAND "${MPIEXEC}" --allow-run-as-root --oversubscribe --mca btl self,tcp --mca
            btl_tcp_if_include lo -np ${ranks} "${MPI_EXAMPLE}" "${DIGITS}" "${CONFIG}"
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 120)
  string(REGEX REPLACE "#[^\n]*\n" "" got "${out}")
  if(NOT rc EQUAL 0 OR NOT got STREQUAL want OR want STREQUAL "")
    message(FATAL_ERROR "-np ${ranks}: exit ${rc}\n${err}\nrecord:\n${got}\nwanted:\n${want}")
  endif()
  message(STATUS "-np ${ranks}: the one-process record")
endforeach()
