// calibration_session.cpp compiled with -fno-exceptions: the definitions in ptq's
// -fno-exceptions ABI namespace (ptq/core/abi.hpp), for programs built that way.
#include "calibration_session.cpp"
