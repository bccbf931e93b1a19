# PTQ_BUILD_PYTHON (AUTO, ON, OFF): the Python module `ptq` (python/, docs/python.md), built with
# pybind11 against ptq::ptq. AUTO builds it when this is the top-level project and pybind11 and
# Python's headers are found (Debian: pybind11-dev, python3-dev), and says so when they are not.
# The interpreter defaults to Debian's /usr/bin/python3 (a python3 earlier on PATH, such as a
# pyenv shim, may not see Debian's numpy and torch); pass -DPython_EXECUTABLE to choose another.
# Sets ptq_python_enabled.
set(ptq_python_default OFF)
if(PROJECT_IS_TOP_LEVEL)
  set(ptq_python_default AUTO)
endif()
set(PTQ_BUILD_PYTHON
    ${ptq_python_default}
    CACHE STRING "Build the Python module: AUTO (when pybind11 is found), ON, OFF")
set_property(CACHE PTQ_BUILD_PYTHON PROPERTY STRINGS AUTO ON OFF)
if(NOT PTQ_BUILD_PYTHON MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "ptq: PTQ_BUILD_PYTHON must be AUTO, ON or OFF, not '${PTQ_BUILD_PYTHON}'")
endif()
set(ptq_python_enabled OFF)
if(NOT PTQ_BUILD_PYTHON STREQUAL "OFF")
  if(NOT DEFINED Python_EXECUTABLE AND EXISTS /usr/bin/python3)
    set(Python_EXECUTABLE /usr/bin/python3)
  endif()
  find_package(Python 3.8 QUIET COMPONENTS Interpreter Development.Module)
  if(Python_FOUND)
    find_package(pybind11 2.6 CONFIG QUIET)
  endif()
  if(Python_FOUND AND pybind11_FOUND)
    set(ptq_python_enabled ON)
    message(STATUS "ptq: the Python module is built for ${Python_EXECUTABLE} "
                   "(Python ${Python_VERSION}, pybind11 ${pybind11_VERSION})")
  elseif(PTQ_BUILD_PYTHON STREQUAL "ON")
    message(FATAL_ERROR "ptq: PTQ_BUILD_PYTHON=ON but pybind11 or Python's headers were not "
                        "found; install pybind11-dev python3-dev or configure with "
                        "-DPTQ_BUILD_PYTHON=OFF")
  else()
    message(STATUS "ptq: building without the Python module (PTQ_BUILD_PYTHON=AUTO: pybind11 or "
                   "Python's headers not found; Debian: pybind11-dev python3-dev)")
  endif()
endif()
