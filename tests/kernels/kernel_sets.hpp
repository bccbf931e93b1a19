// The kernel sets this test binary carries: the baseline build (sse2 on x86-64) plus AVX2 and
// AVX-512 from their own translation units, each returned only when the CPU runs it.
#pragma once

#include <vector>

#include "ptq/kernels/kernel_set.hpp"

namespace ptq_test {

ptq::kernels::kernel_set avx2_kernel_set();    // kernels_avx2.cpp
ptq::kernels::kernel_set avx512_kernel_set();  // kernels_avx512.cpp

/// The two results of detail::fused_madd / fused_nmadd on x = y = 1 + 2^-12 (x·y = 1 + 2^-11 +
/// 2^-24, a tie that rounds to 1 + 2^-11) with z = ∓(1 + 2^-11): ±2^-24 when the multiply-add is
/// fused, 0 when it is a multiply then an add (as xsimd 8.1's fma is on avx512f).
struct fused_madd_probe {
  float madd = 0.0f;
  float nmadd = 0.0f;
};
template <class Arch>
fused_madd_probe probe_fused_madd() {
  using B = xsimd::batch<float, Arch>;
  const B x(1.0f + 0x1p-12f);
  const B z(1.0f + 0x1p-11f);
  const B madd = ptq::kernels::detail::fused_madd<Arch>(x, x, -z);
  const B nmadd = ptq::kernels::detail::fused_nmadd<Arch>(x, x, z);
  return {ptq::kernels::detail::hmin<Arch>(madd), ptq::kernels::detail::hmax<Arch>(nmadd)};
}
fused_madd_probe avx2_fused_madd_probe();    // kernels_avx2.cpp
fused_madd_probe avx512_fused_madd_probe();  // kernels_avx512.cpp

/// Every SIMD kernel set the machine supports (never the scalar references).
inline std::vector<ptq::kernels::kernel_set> available_kernel_sets() {
  std::vector<ptq::kernels::kernel_set> out;
  out.push_back(ptq::kernels::make_kernel_set<xsimd::default_arch>());
  const auto cpu = xsimd::available_architectures();
  if (cpu.fma3_avx2)
    out.push_back(avx2_kernel_set());
  if (cpu.avx512f)
    out.push_back(avx512_kernel_set());
  return out;
}

}  // namespace ptq_test
