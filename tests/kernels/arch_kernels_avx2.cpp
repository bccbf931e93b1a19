// AVX2 + FMA kernel sets with their GEMM fused flag (arch_kernels.hpp); compiled with -mavx2
// -mfma, called after a runtime check.
#include "arch_kernels.hpp"

namespace ptq_layers_test {
arch_kernels avx2_kernels() {
  using arch = xsimd::fma3<xsimd::avx2>;
  return {ptq::kernels::make_kernel_set<arch>(), ptq::kernels::gemm_uses_fma<arch>};
}
}  // namespace ptq_layers_test
