// The kernel sets this test binary carries: the baseline build (sse2 on x86-64) plus AVX2 and
// AVX-512 from their own translation units, each returned only when the CPU runs it.
#pragma once

#include <vector>

#include "ptq/kernels/kernel_set.hpp"

namespace ptq_test {

ptq::kernels::kernel_set avx2_kernel_set();    // kernels_avx2.cpp
ptq::kernels::kernel_set avx512_kernel_set();  // kernels_avx512.cpp

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
