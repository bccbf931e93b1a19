// Runtime choice of the benchmarks' arch (baseline ISA; the AVX2 / AVX-512 code lives in
// kernels_avx2.cpp / kernels_avx512.cpp).
#include "dispatch.hpp"

#include "stream_read.hpp"

PTQ_KERNELS_EXTERN_AVX2
PTQ_KERNELS_EXTERN_AVX512
extern template ptq_bench::stream_read_fn ptq_bench::stream_read_factory::operator()<
    xsimd::fma3<xsimd::avx2>>(xsimd::fma3<xsimd::avx2>) const noexcept;
extern template ptq_bench::stream_read_fn
ptq_bench::stream_read_factory::operator()<xsimd::avx512f>(xsimd::avx512f) const noexcept;

namespace ptq_bench {

const ptq::kernels::kernel_set& kernels() noexcept {
  static const ptq::kernels::kernel_set k =
      ptq::kernels::dispatch_kernel_set<ptq::kernels::x86_archs>();
  return k;
}

float stream_read(const float* x, std::size_t n) noexcept {
  static const stream_read_fn f = xsimd::dispatch<ptq::kernels::x86_archs>(stream_read_factory{})();
  return f(x, n);
}

}  // namespace ptq_bench
