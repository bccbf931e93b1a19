# mpi_unavailable: a ptq built without MPI refuses --mpi with E1106 and writes nothing.
#   cmake -DPTQ=<ptq> -DEXAMPLES=<examples dir> -P check_unavailable.cmake
set(out "${CMAKE_CURRENT_BINARY_DIR}/mpi_unavailable.txt")
file(REMOVE "${out}")
execute_process(
  COMMAND "${PTQ}" calibrate "${EXAMPLES}/configs/quant.cfg" --model
          "${EXAMPLES}/digits/manifest.json" --weights "${EXAMPLES}/digits/model.safetensors"
          --batches "${EXAMPLES}/digits/batch0.safetensors" "${EXAMPLES}/digits/batch1.safetensors"
          --record "${out}" --mpi
  RESULT_VARIABLE rc
  ERROR_VARIABLE err)
set(want "ptq calibrate: error: this ptq was built without MPI: --mpi is not available [E1106]\n\
note: install libopenmpi-dev openmpi-bin and rebuild (PTQ_WITH_MPI, docs/scale-out.md)\n")
if(NOT rc EQUAL 1 OR NOT err STREQUAL want OR EXISTS "${out}")
  message(FATAL_ERROR "mpi_unavailable: exit ${rc}, stderr:\n${err}\nwanted exit 1 and:\n${want}")
endif()
execute_process(
  COMMAND "${PTQ}" observe --algo hfmg --mpi
          "${EXAMPLES}/../tests/data/numeric-cases/001_ifmr_normal-1b-asym8/batch0.npy"
  RESULT_VARIABLE rc
  OUTPUT_VARIABLE out
  ERROR_VARIABLE err)
string(REPLACE "ptq calibrate:" "ptq observe:" want "${want}")
if(NOT rc EQUAL 1 OR NOT err STREQUAL want OR NOT out STREQUAL "")
  message(FATAL_ERROR "mpi_unavailable (observe): exit ${rc}, stderr:\n${err}\nwanted exit 1 and:\n${want}")
endif()
