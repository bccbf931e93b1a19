// The kernel sets this test binary carries, each with whether its GEMM fuses the multiply-add
// (which reference it must equal): the baseline build (sse2 on x86-64) plus AVX2 and AVX-512
// from kernels_avx2.cpp / kernels_avx512.cpp (kernel_sets.hpp), each returned only when the CPU
// runs it. Whether an arch fuses is a constant of its type, so it needs no code of that ISA.
#pragma once

#include <vector>

#include "kernel_sets.hpp"
#include "ptq/kernels/kernel_set.hpp"

namespace ptq_layers_test {

struct arch_kernels {
  ptq::kernels::kernel_set set;
  bool fused = false;
};

/// Every SIMD kernel set the machine supports (never the scalar references).
inline std::vector<arch_kernels> available_kernels() {
  std::vector<arch_kernels> out;
  out.push_back({ptq::kernels::make_kernel_set<xsimd::default_arch>(),
                 ptq::kernels::gemm_uses_fma<xsimd::default_arch>});
  const auto cpu = xsimd::available_architectures();
  if (cpu.fma3_avx2)
    out.push_back(
        {ptq_test::avx2_kernel_set(), ptq::kernels::gemm_uses_fma<xsimd::fma3<xsimd::avx2>>});
  if (cpu.avx512f)
    out.push_back({ptq_test::avx512_kernel_set(), ptq::kernels::gemm_uses_fma<xsimd::avx512f>});
  return out;
}

}  // namespace ptq_layers_test
