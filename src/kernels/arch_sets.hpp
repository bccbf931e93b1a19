// The kernel sets of the compiled `ptq::kernels` library, one function per ISA. Each is defined
// in a translation unit compiled for its ISA (kernels_avx2.cpp, kernels_avx512.cpp) and called
// by dispatch.cpp only after the CPU check. Plain functions with one definition each: nothing
// inline is shared between TUs of different ISAs.
#pragma once

#include "ptq/kernels/kernel_set.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {
namespace kernels::detail {

[[nodiscard]] kernel_set avx2_kernel_set() noexcept;     // kernels_avx2.cpp
[[nodiscard]] kernel_set avx512f_kernel_set() noexcept;  // kernels_avx512.cpp

}  // namespace kernels::detail
}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
