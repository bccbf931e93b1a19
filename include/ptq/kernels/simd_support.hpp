// Small xsimd 8.1 helpers shared by the kernels: horizontal finishes (xsimd 8.1 has no
// reduce_max / reduce_add), float -> double widening per ISA, and the fixed "virtual lane" width
// that keeps summation order identical on every arch.
// Depends on: core and xsimd.
#pragma once

#include <xsimd/xsimd.hpp>

#include <algorithm>
#include <cstddef>
#include <type_traits>

#include "ptq/core/abi.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {
namespace kernels {

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

/// Whether fused_madd / fused_nmadd exist for Arch: one rounding for x·y + z. xsimd 8.1 fuses
/// xsimd::fma only on the fma3 arches; on avx512f its fma and fnma are a multiply then an add
/// (found by running the AVX-512 tests under emulation, tools/avx512-emulate.sh), so avx512f
/// takes the intrinsics.
template <class Arch>
inline constexpr bool has_fused_madd =
    is_avx512<Arch> || std::is_base_of<xsimd::fma3<xsimd::sse4_2>, Arch>::value ||
    std::is_base_of<xsimd::fma3<xsimd::avx>, Arch>::value ||
    std::is_base_of<xsimd::fma3<xsimd::avx2>, Arch>::value;

/// x·y + z, rounded once.
template <class Arch>
[[nodiscard]] fbatch<Arch> fused_madd(const fbatch<Arch>& x, const fbatch<Arch>& y,
                                      const fbatch<Arch>& z) noexcept {
#if XSIMD_WITH_AVX512F
  if constexpr (is_avx512<Arch>) {
    return fbatch<Arch>(_mm512_fmadd_ps(x, y, z));
  } else
#endif
  {
    static_assert(has_fused_madd<Arch>, "fused_madd: no fused multiply-add on this arch");
    return xsimd::fma(x, y, z);
  }
}

/// z - x·y, rounded once.
template <class Arch>
[[nodiscard]] fbatch<Arch> fused_nmadd(const fbatch<Arch>& x, const fbatch<Arch>& y,
                                       const fbatch<Arch>& z) noexcept {
#if XSIMD_WITH_AVX512F
  if constexpr (is_avx512<Arch>) {
    return fbatch<Arch>(_mm512_fnmadd_ps(x, y, z));
  } else
#endif
  {
    static_assert(has_fused_madd<Arch>, "fused_nmadd: no fused multiply-add on this arch");
    return xsimd::fnma(x, y, z);
  }
}

/// A batch loaded for several uses. GCC folds a loaded value into every instruction that uses
/// it as a memory operand, so a batch used three times is loaded three times (min/max with the
/// finiteness check: 12 loads per 4 batches), and on AVX-512 each unaligned 64-byte load of a
/// 16-byte aligned buffer crosses a cache line: per-channel ARQ ran at half its read baseline.
/// On AVX-512 the empty asm statement makes the value one register that the uses share; with
/// the 16 registers of AVX2 and SSE2 pinning it spills an accumulator, so there it is a plain load.
template <class Arch>
[[nodiscard]] fbatch<Arch> load_shared(const float* p) noexcept {
  typename fbatch<Arch>::register_type r = fbatch<Arch>::load_unaligned(p);
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
  if constexpr (is_avx512<Arch>)
    asm("" : "+v"(r));
#endif
  return fbatch<Arch>(r);
}

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
}  // namespace kernels
}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
