# PTQ_WITH_MPI (AUTO, ON, OFF): MPI for the tool's `ptq calibrate --mpi`, examples/mpi, the
# header check of ptq/mpi.hpp and the mpirun tests. The header-only library never needs MPI.
# Sets ptq_mpi_enabled (ON when MPI's C++-usable C API was found) and PTQ_MPIEXEC (mpirun).
set(PTQ_WITH_MPI
    AUTO
    CACHE STRING "Build MPI sharding into ptq's tool, examples and tests: AUTO (when found), ON, OFF")
set_property(CACHE PTQ_WITH_MPI PROPERTY STRINGS AUTO ON OFF)
set(ptq_mpi_enabled OFF)
if(NOT PTQ_WITH_MPI MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "ptq: PTQ_WITH_MPI must be AUTO, ON or OFF, not '${PTQ_WITH_MPI}'")
endif()
if(NOT PTQ_WITH_MPI STREQUAL "OFF" AND (PTQ_BUILD_TOOLS OR PTQ_BUILD_EXAMPLES OR PTQ_BUILD_TESTS))
  find_package(MPI QUIET COMPONENTS CXX)
  if(MPI_CXX_FOUND)
    set(ptq_mpi_enabled ON)
    message(STATUS "ptq: MPI ${MPI_CXX_VERSION} found (${MPIEXEC_EXECUTABLE}); "
                   "`ptq calibrate --mpi` and examples/mpi are built")
  elseif(PTQ_WITH_MPI STREQUAL "ON")
    message(FATAL_ERROR "ptq: PTQ_WITH_MPI=ON but MPI was not found; install libopenmpi-dev "
                        "openmpi-bin or configure with -DPTQ_WITH_MPI=OFF")
  endif()
endif()
# Said only where MPI would be used: a consumer that builds none of the tool, examples or tests
# configures quietly.
if(NOT ptq_mpi_enabled AND (PTQ_BUILD_TOOLS OR PTQ_BUILD_EXAMPLES OR PTQ_BUILD_TESTS))
  message(STATUS "ptq: building without MPI (PTQ_WITH_MPI=${PTQ_WITH_MPI}); "
                 "`ptq calibrate --mpi` will say so")
endif()
