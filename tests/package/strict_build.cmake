# cmake -DCXX=<compiler> -DSTD=<17|20> -DOPT=<-O2|-O3|-DNDEBUG> -DSOURCE_DIR=<ptq source>
#       -DSOURCES=<a|b|...> -DOUT_DIR=<dir> -P strict_build.cmake
# Compiles each source as a consumer with the strictest ordinary flags would, through a plain
# -I (not SYSTEM, so ptq's headers get no shelter from the warnings): -std=c++STD OPT -Wall
# -Wextra -Wpedantic -Wconversion -Wshadow -Werror. A warning from a ptq header fails the test.
foreach(var CXX STD OPT SOURCE_DIR SOURCES OUT_DIR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "strict_build.cmake: ${var} is not set")
  endif()
endforeach()
string(REPLACE "|" ";" sources "${SOURCES}")
string(REPLACE "|" ";" opt "${OPT}")
file(MAKE_DIRECTORY "${OUT_DIR}")
set(failed "")
foreach(src IN LISTS sources)
  string(MAKE_C_IDENTIFIER "${src}" stem)
  execute_process(
    COMMAND "${CXX}" -std=c++${STD} ${opt} -Wall -Wextra -Wpedantic -Wconversion -Wshadow -Werror
            "-I${SOURCE_DIR}/include" -c "${SOURCE_DIR}/${src}" -o "${OUT_DIR}/${stem}.o"
    RESULT_VARIABLE rc
    OUTPUT_VARIABLE out
    ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message("${CXX} -std=c++${STD} ${OPT}: ${src} does not build cleanly:\n${out}")
    list(APPEND failed "${src}")
  else()
    message(STATUS "${CXX} -std=c++${STD} ${OPT}: ${src}: clean")
  endif()
endforeach()
if(failed)
  message(FATAL_ERROR "not clean with ${CXX} -std=c++${STD} ${OPT}: ${failed}")
endif()
