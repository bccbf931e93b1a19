// The machine's peak for the GEMM benchmarks: a plain multiply-add loop of the arch (12
// independent accumulator chains in registers, a fused multiply-add exactly where ptq's GEMM
// uses one), templated on the arch so each ISA translation unit instantiates its own symbol.
#pragma once

#include <xsimd/xsimd.hpp>

#include <cstddef>

#include "ptq/kernels/gemm.hpp"

namespace ptq_bench {

/// `iters` rounds of 12 independent acc = acc·m + c chains.
template <class Arch>
[[gnu::noinline]] float madd_loop_simd(std::size_t iters, float m, float c) noexcept {
  using B = xsimd::batch<float, Arch>;
  const B vm(m), vc(c);
  // Named accumulators (an array may live in memory): each a register, 12 independent chains.
  B a0(0.0f), a1(0.1f), a2(0.2f), a3(0.3f), a4(0.4f), a5(0.5f);
  B a6(0.6f), a7(0.7f), a8(0.8f), a9(0.9f), a10(1.0f), a11(1.1f);
  for (std::size_t i = 0; i < iters; ++i) {
    a0 = ptq::kernels::detail::gemm_madd<Arch>(a0, vm, vc);
    a1 = ptq::kernels::detail::gemm_madd<Arch>(a1, vm, vc);
    a2 = ptq::kernels::detail::gemm_madd<Arch>(a2, vm, vc);
    a3 = ptq::kernels::detail::gemm_madd<Arch>(a3, vm, vc);
    a4 = ptq::kernels::detail::gemm_madd<Arch>(a4, vm, vc);
    a5 = ptq::kernels::detail::gemm_madd<Arch>(a5, vm, vc);
    a6 = ptq::kernels::detail::gemm_madd<Arch>(a6, vm, vc);
    a7 = ptq::kernels::detail::gemm_madd<Arch>(a7, vm, vc);
    a8 = ptq::kernels::detail::gemm_madd<Arch>(a8, vm, vc);
    a9 = ptq::kernels::detail::gemm_madd<Arch>(a9, vm, vc);
    a10 = ptq::kernels::detail::gemm_madd<Arch>(a10, vm, vc);
    a11 = ptq::kernels::detail::gemm_madd<Arch>(a11, vm, vc);
  }
  const B s = ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7)) + ((a8 + a9) + (a10 + a11));
  return xsimd::hadd(s);
}

struct madd_loop {
  float (*run)(std::size_t, float, float) noexcept = nullptr;
  std::size_t lanes = 0;  ///< floats per batch: one round is 2·12·lanes flops
};

/// Functor for xsimd::dispatch: the peak loop of the arch it is called with.
struct madd_loop_factory {
  template <class Arch>
  madd_loop operator()(Arch) const noexcept;
};

template <class Arch>
madd_loop madd_loop_factory::operator()(Arch) const noexcept {
  return {&madd_loop_simd<Arch>, xsimd::batch<float, Arch>::size};
}

}  // namespace ptq_bench
