// Small xsimd 8.1 helpers shared by the kernels: horizontal finishes (xsimd 8.1 has no
// reduce_max / reduce_add), float -> double widening per ISA, and the fixed "virtual lane" width
// that keeps summation order identical on every arch. Depends on xsimd only.
#pragma once

#include <xsimd/xsimd.hpp>

#include <algorithm>
#include <cstddef>
#include <type_traits>

namespace ptq::kernels {

/// Every double-accumulating kernel sums into this many striped lanes (element i goes to lane
/// i % 16) and then adds the lanes in order 0..15. sse2, avx2 and avx512 all map onto it, so the
/// result is the same bit for bit on every arch and equal to the scalar reference.
inline constexpr std::size_t virtual_lanes = 16;

namespace detail {

template <class Arch>
using fbatch = xsimd::batch<float, Arch>;
template <class Arch>
using dbatch = xsimd::batch<double, Arch>;

/// Lane-wise minimum / maximum of a batch, finished in scalar code.
template <class Arch>
[[nodiscard]] float hmin(const fbatch<Arch>& v) noexcept {
  alignas(Arch::alignment()) float lanes[fbatch<Arch>::size];
  v.store_aligned(lanes);
  float m = lanes[0];
  for (std::size_t i = 1; i < fbatch<Arch>::size; ++i)
    m = lanes[i] < m ? lanes[i] : m;
  return m;
}
template <class Arch>
[[nodiscard]] float hmax(const fbatch<Arch>& v) noexcept {
  alignas(Arch::alignment()) float lanes[fbatch<Arch>::size];
  v.store_aligned(lanes);
  float m = lanes[0];
  for (std::size_t i = 1; i < fbatch<Arch>::size; ++i)
    m = lanes[i] > m ? lanes[i] : m;
  return m;
}

template <class Arch>
inline constexpr bool is_avx512 = std::is_base_of<xsimd::avx512f, Arch>::value;
template <class Arch>
inline constexpr bool is_avx = !is_avx512<Arch> && std::is_base_of<xsimd::avx, Arch>::value;
template <class Arch>
inline constexpr bool is_sse2 =
    !is_avx512<Arch> && !is_avx<Arch> && std::is_base_of<xsimd::sse2, Arch>::value;
/// Whether widen_lo/widen_hi exist for Arch (x86 only; other arches take the scalar path).
template <class Arch>
inline constexpr bool can_widen = is_avx512<Arch> || is_avx<Arch> || is_sse2<Arch>;

/// Lower / upper half of a float batch converted exactly to double.
template <class Arch>
[[nodiscard]] dbatch<Arch> widen_lo(const fbatch<Arch>& v) noexcept {
#if XSIMD_WITH_AVX512F
  if constexpr (is_avx512<Arch>) {
    return dbatch<Arch>(_mm512_cvtps_pd(_mm512_castps512_ps256(v)));
  } else
#endif
#if XSIMD_WITH_AVX
      if constexpr (is_avx<Arch>) {
    return dbatch<Arch>(_mm256_cvtps_pd(_mm256_castps256_ps128(v)));
  } else
#endif
#if XSIMD_WITH_SSE2
      if constexpr (is_sse2<Arch>) {
    return dbatch<Arch>(_mm_cvtps_pd(v));
  } else
#endif
  {
    static_assert(can_widen<Arch>, "widen_lo: unsupported arch");
    return dbatch<Arch>(0.0);
  }
}
template <class Arch>
[[nodiscard]] dbatch<Arch> widen_hi(const fbatch<Arch>& v) noexcept {
#if XSIMD_WITH_AVX512F
  if constexpr (is_avx512<Arch>) {
    return dbatch<Arch>(
        _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1))));
  } else
#endif
#if XSIMD_WITH_AVX
      if constexpr (is_avx<Arch>) {
    return dbatch<Arch>(_mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
  } else
#endif
#if XSIMD_WITH_SSE2
      if constexpr (is_sse2<Arch>) {
    const __m128 m = v;
    return dbatch<Arch>(_mm_cvtps_pd(_mm_movehl_ps(m, m)));
  } else
#endif
  {
    static_assert(can_widen<Arch>, "widen_hi: unsupported arch");
    return dbatch<Arch>(0.0);
  }
}

}  // namespace detail
}  // namespace ptq::kernels
