# cmake -DPTQ_BUILD_DIR=<build> -DPTQ_SOURCE_DIR=<src> -DPTQ_PREFIX=<dir> -DPTQ_CMAKEDIR=<rel>
#       -P install_tree.cmake
# Installs the build tree into a fresh PTQ_PREFIX and checks what landed there.
foreach(var PTQ_BUILD_DIR PTQ_SOURCE_DIR PTQ_PREFIX PTQ_CMAKEDIR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "install_tree.cmake: ${var} is not set")
  endif()
endforeach()

file(REMOVE_RECURSE "${PTQ_PREFIX}")
execute_process(COMMAND "${CMAKE_COMMAND}" --install "${PTQ_BUILD_DIR}" --prefix "${PTQ_PREFIX}"
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cmake --install failed (${rc})")
endif()

foreach(file ptqConfig.cmake ptqConfigVersion.cmake ptqTargets.cmake)
  if(NOT EXISTS "${PTQ_PREFIX}/${PTQ_CMAKEDIR}/${file}")
    message(FATAL_ERROR "not installed: ${PTQ_CMAKEDIR}/${file}")
  endif()
endforeach()

# Every public header is installed, and nothing else lands under include/.
file(GLOB_RECURSE src_headers RELATIVE "${PTQ_SOURCE_DIR}/include" "${PTQ_SOURCE_DIR}/include/*")
file(GLOB_RECURSE dst_headers RELATIVE "${PTQ_PREFIX}/include" "${PTQ_PREFIX}/include/*")
list(FILTER src_headers INCLUDE REGEX "\\.hpp$")
list(SORT src_headers)
list(SORT dst_headers)
if(NOT src_headers STREQUAL dst_headers)
  message(FATAL_ERROR "installed headers differ from include/:\n"
                      "  source:    ${src_headers}\n  installed: ${dst_headers}")
endif()
list(LENGTH dst_headers n)
message(STATUS "installed ${n} headers and the package config into ${PTQ_PREFIX}")
