// The AVX-512 kernel set of `ptq::kernels` (compiled with -mavx512f ... -ffp-contract=off;
// runs only after dispatch.cpp's CPU check).
//
// GCC 12's own avx512fintrin.h trips -W(maybe-)uninitialized on the `_mm512_undefined_*` helpers
// that xsimd 8.1 inlines; the warnings are about the compiler's header, not this code.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include "arch_sets.hpp"

ptq::kernels::kernel_set ptq::kernels::detail::avx512f_kernel_set() noexcept {
  return make_kernel_set<xsimd::avx512f>();
}
