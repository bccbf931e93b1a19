// dispatched_kernels(): the best kernel set this CPU runs, for every program that links
// `ptq::kernels` (CMake's `ptq::ptq` does). Compiled for the baseline ISA; the AVX2 and AVX-512
// sets come from their own TUs (PTQ_KERNELS_X86_SETS=1, set by src/kernels/CMakeLists.txt when it
// builds them).
#include "arch_sets.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {
namespace kernels {

namespace {
kernel_set best_kernel_set() noexcept {
#if PTQ_KERNELS_X86_SETS
  const auto cpu = xsimd::available_architectures();
  if (cpu.avx512f)
    return detail::avx512f_kernel_set();
  if (cpu.fma3_avx2)
    return detail::avx2_kernel_set();
#endif
  return make_kernel_set<xsimd::default_arch>();
}
}  // namespace

const kernel_set& dispatched_kernels() noexcept {
  static const kernel_set k = best_kernel_set();
  return k;
}

}  // namespace kernels
}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
