// The AVX-512 kernels and baseline of the benchmarks (compiled with the AVX-512 flags; runs only
// after xsimd's runtime check in dispatch.cpp).
//
// GCC 12's own avx512fintrin.h trips -W(maybe-)uninitialized on the `_mm512_undefined_*` helpers
// that xsimd 8.1 inlines; the warnings are about the compiler's header, not this code.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include "madd_peak.hpp"
#include "ptq/kernels/kernel_set.hpp"
#include "stream_read.hpp"

PTQ_KERNELS_INSTANTIATE_AVX512
template ptq_bench::stream_fns ptq_bench::stream_read_factory::operator()<xsimd::avx512f>(
    xsimd::avx512f) const noexcept;
template ptq_bench::madd_loop ptq_bench::madd_loop_factory::operator()<xsimd::avx512f>(
    xsimd::avx512f) const noexcept;
