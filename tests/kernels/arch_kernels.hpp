// The kernel sets this test binary carries, each with whether its GEMM fuses the multiply-add
// (which reference it must equal): the baseline build (sse2 on x86-64) plus AVX2 and AVX-512 from
// their own translation units, each returned only when the CPU runs it.
#pragma once

#include <vector>

#include "ptq/kernels/kernel_set.hpp"

namespace ptq_layers_test {

struct arch_kernels {
  ptq::kernels::kernel_set set;
  bool fused = false;
};

arch_kernels avx2_kernels();    // arch_kernels_avx2.cpp
arch_kernels avx512_kernels();  // arch_kernels_avx512.cpp

/// Every SIMD kernel set the machine supports (never the scalar references).
inline std::vector<arch_kernels> available_kernels() {
  std::vector<arch_kernels> out;
  out.push_back({ptq::kernels::make_kernel_set<xsimd::default_arch>(),
                 ptq::kernels::gemm_uses_fma<xsimd::default_arch>});
  const auto cpu = xsimd::available_architectures();
  if (cpu.fma3_avx2)
    out.push_back(avx2_kernels());
  if (cpu.avx512f)
    out.push_back(avx512_kernels());
  return out;
}

}  // namespace ptq_layers_test
