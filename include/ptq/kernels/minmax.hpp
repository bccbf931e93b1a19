// Per-tensor min/max with NaN/Inf detection, absmax, and their per-row forms. Each SIMD kernel
// is a template on the xsimd arch; the scalar reference beside it defines the result.
// Depends on: core.
#pragma once

#include <cfloat>
#include <cmath>
#include <cstddef>

#include "ptq/core/abi.hpp"
#include "ptq/kernels/simd_support.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {
namespace kernels {

/// Result of a min/max scan. `first_bad` is the index of the first NaN or ±Inf, or n when every
/// element is finite; min/max are only meaningful when first_bad == n. An empty range gives
/// min = +inf, max = -inf. A zero result is always +0 (the sign of a zero min/max is dropped).
struct minmax_result {
  float min = HUGE_VALF;
  float max = -HUGE_VALF;
  std::size_t first_bad = 0;
};

[[nodiscard]] inline bool is_finite_value(float v) noexcept {
  return std::fabs(v) <= FLT_MAX;
}

/// Scalar reference: min, max and the first non-finite index.
[[nodiscard]] inline minmax_result minmax_ref(const float* x, std::size_t n) noexcept {
  minmax_result r;
  r.first_bad = n;
  for (std::size_t i = 0; i < n; ++i) {
    const float v = x[i];
    if (!is_finite_value(v)) {
      r.first_bad = i;
      return r;
    }
    r.min = v < r.min ? v : r.min;
    r.max = v > r.max ? v : r.max;
  }
  r.min += 0.0f;  // -0 -> +0
  r.max += 0.0f;
  return r;
}

/// Scalar reference: max |x| (0 for an empty range). Non-finite input is the caller's problem.
[[nodiscard]] inline float absmax_ref(const float* x, std::size_t n) noexcept {
  float m = 0.0f;
  for (std::size_t i = 0; i < n; ++i) {
    const float a = std::fabs(x[i]);
    m = a > m ? a : m;
  }
  return m;
}

namespace detail {

/// One batch `a` into the finiteness accumulator `z`, in one vector operation. With a fused
/// multiply-add, z = a·0 + z stays 0 until `a` holds a NaN or ±Inf, which make it NaN (xsimd's
/// own fma is two operations on avx512f, hence fused_madd). Without one (sse2) z = z + a, which
/// NaN and ±Inf make non-finite too, but which huge finite values can also overflow: the caller
/// then rescans with the reference, so that case costs time, never a wrong result.
template <class Arch>
[[nodiscard]] fbatch<Arch> finite_accumulate(const fbatch<Arch>& z, const fbatch<Arch>& a,
                                             const fbatch<Arch>& zero) noexcept {
  if constexpr (has_fused_madd<Arch>) {
    return fused_madd<Arch>(a, zero, z);
  } else {
    return z + a;
  }
}

}  // namespace detail

/// SIMD min/max + finiteness. Four independent accumulators per extreme so the loop runs at
/// memory bandwidth; non-finite values are caught by detail::finite_accumulate (one operation
/// per batch), and any doubt (a non-finite accumulator) is settled by the reference.
template <class Arch>
[[nodiscard]] minmax_result minmax_simd(const float* x, std::size_t n) noexcept {
  using B = detail::fbatch<Arch>;
  constexpr std::size_t W = B::size;
  constexpr std::size_t U = 4 * W;
  if (n < U)
    return minmax_ref(x, n);
  B mn0 = B::load_unaligned(x), mn1 = mn0, mn2 = mn0, mn3 = mn0;
  B mx0 = mn0, mx1 = mn0, mx2 = mn0, mx3 = mn0;
  const B zero(0.0f);
  B z0(0.0f), z1(0.0f), z2(0.0f), z3(0.0f);
  std::size_t i = 0;
  for (; i + U <= n; i += U) {
    const B a = detail::load_shared<Arch>(x + i), b = detail::load_shared<Arch>(x + i + W),
            c = detail::load_shared<Arch>(x + i + 2 * W),
            d = detail::load_shared<Arch>(x + i + 3 * W);
    mn0 = xsimd::min(mn0, a);
    mn1 = xsimd::min(mn1, b);
    mn2 = xsimd::min(mn2, c);
    mn3 = xsimd::min(mn3, d);
    mx0 = xsimd::max(mx0, a);
    mx1 = xsimd::max(mx1, b);
    mx2 = xsimd::max(mx2, c);
    mx3 = xsimd::max(mx3, d);
    z0 = detail::finite_accumulate<Arch>(z0, a, zero);
    z1 = detail::finite_accumulate<Arch>(z1, b, zero);
    z2 = detail::finite_accumulate<Arch>(z2, c, zero);
    z3 = detail::finite_accumulate<Arch>(z3, d, zero);
  }
  const B z = (z0 + z1) + (z2 + z3);
  // |z| <= FLT_MAX is false for NaN and ±Inf (an ordered compare)
  if (xsimd::any(!(xsimd::abs(z) <= B(FLT_MAX))))
    return minmax_ref(x, n);  // rescan: the first bad index, or the result if there is none
  const minmax_result tail = minmax_ref(x + i, n - i);
  if (tail.first_bad != n - i)
    return minmax_ref(x, n);
  minmax_result r;
  r.first_bad = n;
  float lo = detail::hmin<Arch>(xsimd::min(xsimd::min(mn0, mn1), xsimd::min(mn2, mn3)));
  float hi = detail::hmax<Arch>(xsimd::max(xsimd::max(mx0, mx1), xsimd::max(mx2, mx3)));
  lo = tail.min < lo ? tail.min : lo;
  hi = tail.max > hi ? tail.max : hi;
  r.min = lo + 0.0f;
  r.max = hi + 0.0f;
  return r;
}

/// SIMD absmax.
template <class Arch>
[[nodiscard]] float absmax_simd(const float* x, std::size_t n) noexcept {
  using B = detail::fbatch<Arch>;
  constexpr std::size_t W = B::size;
  constexpr std::size_t U = 4 * W;
  B m0(0.0f), m1(0.0f), m2(0.0f), m3(0.0f);
  std::size_t i = 0;
  for (; i + U <= n; i += U) {
    m0 = xsimd::max(m0, xsimd::abs(B::load_unaligned(x + i)));
    m1 = xsimd::max(m1, xsimd::abs(B::load_unaligned(x + i + W)));
    m2 = xsimd::max(m2, xsimd::abs(B::load_unaligned(x + i + 2 * W)));
    m3 = xsimd::max(m3, xsimd::abs(B::load_unaligned(x + i + 3 * W)));
  }
  const float m = detail::hmax<Arch>(xsimd::max(xsimd::max(m0, m1), xsimd::max(m2, m3)));
  const float t = absmax_ref(x + i, n - i);
  return t > m ? t : m;
}

}  // namespace kernels
}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
