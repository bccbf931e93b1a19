// default_kernels() in two TUs compiled for different archs (this one for the baseline,
// default_kernels_avx2.cpp with -mavx2 -mfma). Built from the headers alone, each must get the
// kernels of its own arch: with an inline non-template default_kernels() both TUs would define
// one symbol differently and the linker would keep one of them for both (an ODR violation); as
// a template on the arch they are two functions. Linked with ptq::kernels (as this suite is,
// through ptq::ptq), both get the best set of the CPU.
#include <catch2/catch.hpp>

#include <string>

#include "ptq/kernels/kernel_set.hpp"

namespace ptq_test {
const ptq::kernels::kernel_set& header_only_kernels_of_avx2_tu();  // default_kernels_avx2.cpp
const ptq::kernels::kernel_set& default_kernels_of_avx2_tu();      // default_kernels_avx2.cpp
const char* default_arch_name_of_avx2_tu();                        // default_kernels_avx2.cpp
}  // namespace ptq_test

namespace {
/// What the CPU runs best among ptq's x86 sets, from xsimd's CPU check.
std::string best_arch_name() {
#if defined(__x86_64__)
  const auto cpu = xsimd::available_architectures();
  if (cpu.avx512f)
    return xsimd::avx512f::name();
  if (cpu.fma3_avx2)
    return xsimd::fma3<xsimd::avx2>::name();
#endif
  return xsimd::default_arch::name();
}
}  // namespace

TEST_CASE("headers only, default_kernels() is the arch of the TU that calls it", "[kernels][odr]") {
  const ptq::kernels::kernel_set& here =
      ptq::kernels::default_kernels<xsimd::default_arch, false>();
  CHECK(std::string(here.arch_name) == xsimd::default_arch::name());
  CHECK(here.minmax == &ptq::kernels::minmax_simd<xsimd::default_arch>);
#if defined(__x86_64__) && !defined(__AVX2__)
  // The other TU may run only on a CPU with AVX2 and FMA.
  if (xsimd::available_architectures().fma3_avx2) {
    const ptq::kernels::kernel_set& avx2 = ptq_test::header_only_kernels_of_avx2_tu();
    CHECK(std::string(avx2.arch_name) == ptq_test::default_arch_name_of_avx2_tu());
    CHECK(std::string(avx2.arch_name) != here.arch_name);
    CHECK(&avx2 != &here);
  }
#endif
}

TEST_CASE("linked with ptq::kernels, default_kernels() is the CPU's best set in every TU",
          "[kernels][dispatch]") {
  STATIC_REQUIRE(PTQ_KERNELS_DISPATCHED == 1);
  const ptq::kernels::kernel_set& here = ptq::kernels::default_kernels();
  CHECK(&here == &ptq::kernels::dispatched_kernels());
  CHECK(std::string(here.arch_name) == best_arch_name());
#if defined(__x86_64__) && !defined(__AVX2__)
  if (xsimd::available_architectures().fma3_avx2)
    CHECK(&ptq_test::default_kernels_of_avx2_tu() == &here);
#endif
}
