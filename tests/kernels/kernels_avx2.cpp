// AVX2 + FMA kernels for the tests (compiled with -mavx2 -mfma; called after a runtime check).
#include "kernel_sets.hpp"

namespace ptq_test {
ptq::kernels::kernel_set avx2_kernel_set() {
  return ptq::kernels::make_kernel_set<xsimd::fma3<xsimd::avx2>>();
}
fused_madd_probe avx2_fused_madd_probe() {
  return probe_fused_madd<xsimd::fma3<xsimd::avx2>>();
}
}  // namespace ptq_test
