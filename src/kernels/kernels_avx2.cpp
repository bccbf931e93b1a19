// The AVX2 + FMA kernel set of `ptq::kernels` (compiled with -mavx2 -mfma -ffp-contract=off;
// runs only after dispatch.cpp's CPU check).
#include "arch_sets.hpp"

ptq::kernels::kernel_set ptq::kernels::detail::avx2_kernel_set() noexcept {
  return make_kernel_set<xsimd::fma3<xsimd::avx2>>();
}
