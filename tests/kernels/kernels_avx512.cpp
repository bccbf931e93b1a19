// AVX-512 kernels for the tests (compiled with the AVX-512 flags; called after a runtime check).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include "kernel_sets.hpp"

namespace ptq_test {
ptq::kernels::kernel_set avx512_kernel_set() {
  return ptq::kernels::make_kernel_set<xsimd::avx512f>();
}
fused_madd_probe avx512_fused_madd_probe() {
  return probe_fused_madd<xsimd::avx512f>();
}
}  // namespace ptq_test
