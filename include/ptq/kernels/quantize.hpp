// Fake-quantization and quantization to int8 / int16 into caller buffers (docs/numerics.md):
//     q = clamp(nearbyint(x / scale) + offset, qmin, qmax)       (float32, ties to even)
//     fake_quant: out = (q - offset) * scale;   quantize: out = int(q)
// `out` may alias `x` for fake_quant (in-place). Caller checks finiteness and scale > 0.
// Depends on: core.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "ptq/core/abi.hpp"
#include "ptq/kernels/simd_support.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {
namespace kernels {

/// The affine quantizer of one tensor or one channel.
struct quantizer {
  float scale = 1.0f;
  float offset = 0.0f;  ///< integer-valued
  float qmin = -128.0f;
  float qmax = 127.0f;
};

[[nodiscard]] inline float quant_code(float x, const quantizer& qz) noexcept {
  float q = std::nearbyint(x / qz.scale) + qz.offset;  // + offset also turns -0 into +0
  q = q > qz.qmin ? q : qz.qmin;
  q = q < qz.qmax ? q : qz.qmax;
  return q;
}

inline void fake_quant_ref(const float* x, std::size_t n, const quantizer& qz,
                           float* out) noexcept {
  for (std::size_t i = 0; i < n; ++i)
    out[i] = (quant_code(x[i], qz) - qz.offset) * qz.scale;
}

template <class Int>
inline void quantize_ref(const float* x, std::size_t n, const quantizer& qz, Int* out) noexcept {
  for (std::size_t i = 0; i < n; ++i)
    out[i] = static_cast<Int>(quant_code(x[i], qz));
}

/// The quantizer's constants for quant_steps_simd: the code's range less the offset, [qmin -
/// offset, qmax - offset] (integers, exact in float32).
template <class Arch>
struct quant_consts {
  detail::fbatch<Arch> scale, step_lo, step_hi;
  xsimd::batch<std::int32_t, Arch> offset;
  explicit quant_consts(const quantizer& qz) noexcept
      : scale(qz.scale),
        step_lo(qz.qmin - qz.offset),
        step_hi(qz.qmax - qz.offset),
        offset(static_cast<std::int32_t>(qz.offset)) {}
};

/// quant_code(x) - offset as int32, in the order that needs no float rounding instruction:
/// clamping x / s to [qmin - offset, qmax - offset] before rounding gives the same integer as
/// clamping after (nearbyint is monotone and keeps integers), and the clamped quotient converts
/// to int32 with the CPU's rounding, to nearest even as std::nearbyint (SSE2 has no float
/// round; xsimd emulates it in several operations).
template <class Arch>
[[nodiscard]] xsimd::batch<std::int32_t, Arch> quant_steps_simd(
    const detail::fbatch<Arch>& v, const quant_consts<Arch>& k) noexcept {
  return xsimd::nearbyint_as_int(xsimd::min(xsimd::max(v / k.scale, k.step_lo), k.step_hi));
}

/// (quant_code(x) - offset) * scale: the steps through int32, so a -0 quotient gives +0 as the
/// reference's `+ offset` does.
template <class Arch>
void fake_quant_simd(const float* x, std::size_t n, const quantizer& qz, float* out) noexcept {
  using B = detail::fbatch<Arch>;
  constexpr std::size_t W = B::size;
  const quant_consts<Arch> k(qz);
  std::size_t i = 0;
  for (; i + W <= n; i += W) {
    const B steps = xsimd::batch_cast<float>(quant_steps_simd<Arch>(B::load_unaligned(x + i), k));
    (steps * k.scale).store_unaligned(out + i);
  }
  fake_quant_ref(x + i, n - i, qz, out + i);
}

namespace detail {

/// Stores the W int32 codes of q, already within Int's range, as W values of Int (int8_t or
/// int16_t) with the arch's packing instructions: the scalar narrowing loop this replaced was
/// the int8 kernel's bottleneck on AVX2 and SSE2.
template <class Arch, class Int>
void store_narrow(const xsimd::batch<std::int32_t, Arch>& q, Int* out) noexcept {
  static_assert(std::is_same<Int, std::int8_t>::value || std::is_same<Int, std::int16_t>::value,
                "store_narrow: int8_t or int16_t");
  constexpr bool bytes = sizeof(Int) == 1;
#if XSIMD_WITH_AVX512F
  if constexpr (is_avx512<Arch>) {
    if constexpr (bytes) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm512_cvtsepi32_epi8(q));
    } else {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), _mm512_cvtsepi32_epi16(q));
    }
    return;
  }
#endif
#if XSIMD_WITH_AVX
  if constexpr (is_avx<Arch>) {
    const __m256i v = q;
    const __m128i p16 = _mm_packs_epi32(_mm256_castsi256_si128(v), _mm256_extractf128_si256(v, 1));
    if constexpr (bytes) {
      _mm_storel_epi64(reinterpret_cast<__m128i*>(out), _mm_packs_epi16(p16, p16));
    } else {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out), p16);
    }
    return;
  }
#endif
#if XSIMD_WITH_SSE2
  if constexpr (is_sse2<Arch>) {
    const __m128i p16 = _mm_packs_epi32(q, q);
    if constexpr (bytes) {
      const std::int32_t four = _mm_cvtsi128_si32(_mm_packs_epi16(p16, p16));
      std::memcpy(out, &four, sizeof four);
    } else {
      _mm_storel_epi64(reinterpret_cast<__m128i*>(out), p16);
    }
    return;
  }
#endif
  alignas(Arch::alignment()) std::int32_t tmp[xsimd::batch<std::int32_t, Arch>::size];
  q.store_aligned(tmp);
  for (std::size_t l = 0; l < xsimd::batch<std::int32_t, Arch>::size; ++l)
    out[l] = static_cast<Int>(tmp[l]);
}

}  // namespace detail

template <class Arch, class Int>
void quantize_simd(const float* x, std::size_t n, const quantizer& qz, Int* out) noexcept {
  using B = detail::fbatch<Arch>;
  constexpr std::size_t W = B::size;
  const quant_consts<Arch> k(qz);
  std::size_t i = 0;
  for (; i + W <= n; i += W) {
    detail::store_narrow<Arch>(quant_steps_simd<Arch>(B::load_unaligned(x + i), k) + k.offset,
                               out + i);
  }
  quantize_ref(x + i, n - i, qz, out + i);
}

}  // namespace kernels
}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
