// The AVX2 + FMA kernels and baseline of the benchmarks (compiled with -mavx2 -mfma; runs only
// after xsimd's runtime check in dispatch.cpp).
#include "madd_peak.hpp"
#include "ptq/kernels/kernel_set.hpp"
#include "stream_read.hpp"

PTQ_KERNELS_INSTANTIATE_AVX2
template ptq_bench::stream_fns ptq_bench::stream_read_factory::operator()<xsimd::fma3<xsimd::avx2>>(
    xsimd::fma3<xsimd::avx2>) const noexcept;
template ptq_bench::madd_loop ptq_bench::madd_loop_factory::operator()<xsimd::fma3<xsimd::avx2>>(
    xsimd::fma3<xsimd::avx2>) const noexcept;
