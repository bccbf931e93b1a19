// The AVX2 + FMA kernel set of the ptq tool (this file is compiled with -mavx2 -mfma and only
// runs after xsimd's runtime check).
#include "ptq/kernels/kernel_set.hpp"

PTQ_KERNELS_INSTANTIATE_AVX2
