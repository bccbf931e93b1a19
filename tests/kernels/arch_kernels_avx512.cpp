// AVX-512 kernel sets with their GEMM fused flag (arch_kernels.hpp); compiled with the AVX-512
// flags, called after a runtime check.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include "arch_kernels.hpp"

namespace ptq_layers_test {
arch_kernels avx512_kernels() {
  return {ptq::kernels::make_kernel_set<xsimd::avx512f>(),
          ptq::kernels::gemm_uses_fma<xsimd::avx512f>};
}
}  // namespace ptq_layers_test
