// The other half of test_default_kernels.cpp: a TU compiled with -mavx2 -mfma (by its name, see
// ptq_arch_sources) that calls default_kernels() too. Called after a runtime check.
#include "ptq/kernels/kernel_set.hpp"

namespace ptq_test {
const ptq::kernels::kernel_set& header_only_kernels_of_avx2_tu() {
  return ptq::kernels::default_kernels<xsimd::default_arch, false>();
}
const ptq::kernels::kernel_set& default_kernels_of_avx2_tu() {
  return ptq::kernels::default_kernels();
}
const char* default_arch_name_of_avx2_tu() {
  return xsimd::default_arch::name();
}
}  // namespace ptq_test
