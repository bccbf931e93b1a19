// kernels_avx2.cpp compiled with -fno-exceptions: its functions land in ptq's -fno-exceptions ABI
// namespace (ptq/core/abi.hpp), the ones that programs built with -fno-exceptions call.
#include "kernels_avx2.cpp"
