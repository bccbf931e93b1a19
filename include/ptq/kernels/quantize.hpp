// Fake-quantization and quantization to int8 / int16 into caller buffers (docs/numerics.md):
//     q = clamp(nearbyint(x / scale) + offset, qmin, qmax)       (float32, ties to even)
//     fake_quant: out = (q - offset) * scale;   quantize: out = int(q)
// `out` may alias `x` for fake_quant (in-place). Caller checks finiteness and scale > 0.
// Depends on: core.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

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

template <class Arch>
[[nodiscard]] detail::fbatch<Arch> quant_code_simd(const detail::fbatch<Arch>& v,
                                                   const detail::fbatch<Arch>& s,
                                                   const detail::fbatch<Arch>& off,
                                                   const detail::fbatch<Arch>& lo,
                                                   const detail::fbatch<Arch>& hi) noexcept {
  return xsimd::min(xsimd::max(xsimd::nearbyint(v / s) + off, lo), hi);
}

template <class Arch>
void fake_quant_simd(const float* x, std::size_t n, const quantizer& qz, float* out) noexcept {
  using B = detail::fbatch<Arch>;
  constexpr std::size_t W = B::size;
  const B s(qz.scale), off(qz.offset), lo(qz.qmin), hi(qz.qmax);
  std::size_t i = 0;
  for (; i + W <= n; i += W) {
    const B q = quant_code_simd<Arch>(B::load_unaligned(x + i), s, off, lo, hi);
    ((q - off) * s).store_unaligned(out + i);
  }
  fake_quant_ref(x + i, n - i, qz, out + i);
}

template <class Arch, class Int>
void quantize_simd(const float* x, std::size_t n, const quantizer& qz, Int* out) noexcept {
  using B = detail::fbatch<Arch>;
  using I = xsimd::batch<std::int32_t, Arch>;
  constexpr std::size_t W = B::size;
  const B s(qz.scale), off(qz.offset), lo(qz.qmin), hi(qz.qmax);
  alignas(Arch::alignment()) std::int32_t tmp[W];
  std::size_t i = 0;
  for (; i + W <= n; i += W) {
    const I q = xsimd::batch_cast<std::int32_t>(
        quant_code_simd<Arch>(B::load_unaligned(x + i), s, off, lo, hi));
    q.store_aligned(tmp);
    for (std::size_t l = 0; l < W; ++l)
      out[i + l] = static_cast<Int>(tmp[l]);
  }
  quantize_ref(x + i, n - i, qz, out + i);
}

}  // namespace kernels
}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
