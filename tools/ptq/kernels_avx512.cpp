// The AVX-512 kernel set of the ptq tool (this file is compiled with the AVX-512 flags and only
// runs after xsimd's runtime check).
//
// GCC 12's own avx512fintrin.h trips -W(maybe-)uninitialized on the `_mm512_undefined_*` helpers
// that xsimd 8.1 inlines; the warnings are about the compiler's header, not this code.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include "ptq/kernels/kernel_set.hpp"

PTQ_KERNELS_INSTANTIATE_AVX512
