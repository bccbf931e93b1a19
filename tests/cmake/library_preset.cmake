# cmake -DPTQ_SOURCE_DIR=<src> -DBINARY=<dir> -DPREFIX=<dir> -P library_preset.cmake
# The README's library install, as written there: configure with the `library` preset, build,
# install; then checks what landed (the two compiled libraries, the package config, no tool).
file(REMOVE_RECURSE "${BINARY}" "${PREFIX}")
foreach(step "--preset;library;-B;${BINARY}" "--build;${BINARY}"
             "--install;${BINARY};--prefix;${PREFIX}")
  execute_process(COMMAND "${CMAKE_COMMAND}" ${step} WORKING_DIRECTORY "${PTQ_SOURCE_DIR}"
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "cmake ${step} failed (${rc}):\n${out}\n${err}")
  endif()
endforeach()
foreach(lib ptq_kernels ptq_session)
  file(GLOB_RECURSE found "${PREFIX}/*/lib${lib}.a")
  if(NOT found)
    message(FATAL_ERROR "the library install has no lib${lib}.a")
  endif()
endforeach()
foreach(file "include/ptq/ptq.hpp"
             "share/cmake/ptq/ptqConfig.cmake" "share/cmake/ptq/ptqTargets.cmake")
  if(NOT EXISTS "${PREFIX}/${file}")
    message(FATAL_ERROR "the library install has no ${file}")
  endif()
endforeach()
if(EXISTS "${PREFIX}/bin/ptq")
  message(FATAL_ERROR "the library preset installed the tool")
endif()
message(STATUS "cmake --preset library, --build, --install: the library is in ${PREFIX}")
