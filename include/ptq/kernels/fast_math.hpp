// exp and log as one template for a float and for an xsimd float batch, so a SIMD kernel and its
// scalar reference compute the same bits: the same IEEE operations in the same order, lane by
// lane (no FMA; the arch TUs build with -ffp-contract=off). std::exp / xsimd::exp would not give
// that: the scalar one comes from libm, the batch one from xsimd. The polynomials are the classic
// single-precision minimax ones (Cody–Waite range reduction); accuracy is about 2 ulp on the
// ranges below, which is all AdaRound's sigmoid and |x|^β need.
// Depends on: core and xsimd.
#pragma once

#include <xsimd/xsimd.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "ptq/core/abi.hpp"

// The polynomials must be inlined into the kernels' loops: an out-of-line call passes every
// batch through memory and costs more than the polynomial (GCC's size heuristics decline).
#if defined(__GNUC__) || defined(__clang__)
#define PTQ_ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define PTQ_ALWAYS_INLINE inline
#endif

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {
namespace kernels {
namespace fm {

// The primitives, once for float and once for a batch.
[[nodiscard]] inline float select(bool c, float a, float b) noexcept {
  return c ? a : b;
}
template <class A>
[[nodiscard]] xsimd::batch<float, A> select(const xsimd::batch_bool<float, A>& c,
                                            const xsimd::batch<float, A>& a,
                                            const xsimd::batch<float, A>& b) noexcept {
  return xsimd::select(c, a, b);
}
[[nodiscard]] inline float floor(float x) noexcept {
  return std::floor(x);
}
template <class A>
[[nodiscard]] xsimd::batch<float, A> floor(const xsimd::batch<float, A>& x) noexcept {
  return xsimd::floor(x);
}
[[nodiscard]] inline float sqrt(float x) noexcept {
  return std::sqrt(x);
}
template <class A>
[[nodiscard]] xsimd::batch<float, A> sqrt(const xsimd::batch<float, A>& x) noexcept {
  return xsimd::sqrt(x);
}
[[nodiscard]] inline float abs(float x) noexcept {
  return std::fabs(x);
}
template <class A>
[[nodiscard]] xsimd::batch<float, A> abs(const xsimd::batch<float, A>& x) noexcept {
  return xsimd::abs(x);
}
/// min / max as `b < a ? b : a` / `a < b ? b : a` (finite inputs).
[[nodiscard]] inline float min(float a, float b) noexcept {
  return b < a ? b : a;
}
template <class A>
[[nodiscard]] xsimd::batch<float, A> min(const xsimd::batch<float, A>& a,
                                         const xsimd::batch<float, A>& b) noexcept {
  return xsimd::select(b < a, b, a);
}
[[nodiscard]] inline float max(float a, float b) noexcept {
  return a < b ? b : a;
}
template <class A>
[[nodiscard]] xsimd::batch<float, A> max(const xsimd::batch<float, A>& a,
                                         const xsimd::batch<float, A>& b) noexcept {
  return xsimd::select(a < b, b, a);
}

/// 2^n for an integral n in [-126, 127].
[[nodiscard]] inline float pow2i(float n) noexcept {
  const auto bits = static_cast<std::uint32_t>(static_cast<std::int32_t>(n) + 127) << 23;
  float out;
  std::memcpy(&out, &bits, sizeof out);
  return out;
}
template <class A>
[[nodiscard]] xsimd::batch<float, A> pow2i(const xsimd::batch<float, A>& n) noexcept {
  const auto i = (xsimd::batch_cast<std::int32_t>(n) + xsimd::batch<std::int32_t, A>(127)) << 23;
  return xsimd::bitwise_cast<xsimd::batch<float, A>>(i);
}

/// x = m·2^e with m in [0.5, 1) for a positive normal x; e returned as a float.
inline void split(float x, float& m, float& e) noexcept {
  std::uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  e = static_cast<float>(static_cast<std::int32_t>(bits >> 23) - 126);
  bits = (bits & 0x007fffffU) | 0x3f000000U;
  std::memcpy(&m, &bits, sizeof m);
}
template <class A>
void split(const xsimd::batch<float, A>& x, xsimd::batch<float, A>& m,
           xsimd::batch<float, A>& e) noexcept {
  using I = xsimd::batch<std::int32_t, A>;
  const I bits = xsimd::bitwise_cast<I>(x);
  e = xsimd::batch_cast<float>((bits >> 23) - I(126));
  m = xsimd::bitwise_cast<xsimd::batch<float, A>>((bits & I(0x007fffff)) | I(0x3f000000));
}

}  // namespace fm

/// e^x, x clamped to [-87, 88] (so 2^n stays a normal float).
template <class V>
[[nodiscard]] PTQ_ALWAYS_INLINE V exp_approx(V x) noexcept {
  x = fm::min(fm::max(x, V(-87.0f)), V(88.0f));
  const V n = fm::floor(x * V(1.44269504088896341f) + V(0.5f));
  // r = x − n·ln 2 in two steps (ln 2 = 0.693359375 − 2.12194440e-4, the first part exact).
  V r = x - n * V(0.693359375f);
  r = r + n * V(2.12194440e-4f);
  const V r2 = r * r;
  V p = V(1.9875691500e-4f);
  p = p * r + V(1.3981999507e-3f);
  p = p * r + V(8.3334519073e-3f);
  p = p * r + V(4.1665795894e-2f);
  p = p * r + V(1.6666665459e-1f);
  p = p * r + V(5.0000001201e-1f);
  p = p * r2 + r + V(1.0f);
  return p * fm::pow2i(n);
}

/// ln x for a positive normal x.
template <class V>
[[nodiscard]] PTQ_ALWAYS_INLINE V log_approx(V x) noexcept {
  V m, e;
  fm::split(x, m, e);
  // m in [√½, √2) by moving one factor 2 into e: then ln(1 + f) with |f| < 0.42.
  const auto small = m < V(0.707106781186547524f);
  e = fm::select(small, e - V(1.0f), e);
  const V f = fm::select(small, m + m, m) - V(1.0f);
  const V z = f * f;
  V y = V(7.0376836292e-2f);
  y = y * f - V(1.1514610310e-1f);
  y = y * f + V(1.1676998740e-1f);
  y = y * f - V(1.2420140846e-1f);
  y = y * f + V(1.4249322787e-1f);
  y = y * f - V(1.6668057665e-1f);
  y = y * f + V(2.0000714765e-1f);
  y = y * f - V(2.4999993993e-1f);
  y = y * f + V(3.3333331174e-1f);
  y = y * f * z;
  y = y - e * V(2.12194440e-4f);
  y = y - V(0.5f) * z;
  return (f + y) + e * V(0.693359375f);
}

}  // namespace kernels
}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
