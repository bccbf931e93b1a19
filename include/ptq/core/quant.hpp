// The n-bit integer grid, quantization parameters, the min/max kernel and process_scale
// (docs/numerics.md, Conventions). Float32 arithmetic throughout, rounding half to even.
// Depends on: the standard library.
#pragma once

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>

#include "ptq/core/error.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {

/// FLT_EPSILON as the toolkit spells it (1.192092896e-7 == 2^-23).
inline constexpr float flt_epsilon = FLT_EPSILON;

/// Round half to even (the current FE mode must be the default, round-to-nearest).
[[nodiscard]] inline float round_half_even(float x) noexcept {
  return std::nearbyint(x);
}
[[nodiscard]] inline double round_half_even(double x) noexcept {
  return std::nearbyint(x);
}

/// The signed n-bit grid [-2^(n-1), 2^(n-1)-1]; asymmetric schemes fold into it via the offset.
struct quant_grid {
  int bits = 8;
  std::int32_t qmin = -128;
  std::int32_t qmax = 127;
};

[[nodiscard]] constexpr bool valid_bits(int bits) noexcept {
  return bits >= 2 && bits <= 16;
}

/// The grid of `bits` (2..16).
[[nodiscard]] constexpr quant_grid make_grid(int bits) noexcept {
  const std::int32_t half = std::int32_t{1} << (bits - 1);
  return quant_grid{bits, -half, half - 1};
}

/// Scale and offset of one tensor (or one channel): q = clamp(round(x / scale) + offset).
struct quant_params {
  float scale = 1.0f;
  std::int32_t offset = 0;
  int bits = 8;
};

[[nodiscard]] inline bool operator==(const quant_params& a, const quant_params& b) noexcept {
  return a.scale == b.scale && a.offset == b.offset && a.bits == b.bits;
}

/// process_scale on a float offset that is not rounded yet: a scale below
/// FLT_EPSILON becomes 1 (and an asymmetric offset becomes -2^(n-1)); a scale that is not finite,
/// or whose reciprocal is not finite, is an error. Returns the rounded offset.
[[nodiscard]] inline result<quant_params> process_scale(float scale, float offset, bool asymmetric,
                                                        int bits) {
  const quant_grid g = make_grid(bits);
  if (scale < flt_epsilon) {
    scale = 1.0f;
    if (asymmetric)
      offset = static_cast<float>(g.qmin);
  }
  if (!std::isfinite(scale) || !std::isfinite(1.0f / scale)) {
    return make_error(errc::invalid_scale,
                      "scale has an invalid value (inf, nan or zero): " + std::to_string(scale));
  }
  if (!std::isfinite(offset)) {
    return make_error(errc::invalid_scale, "offset is not finite");
  }
  return quant_params{scale, static_cast<std::int32_t>(round_half_even(offset)), bits};
}

/// The divisor of the symmetric scale: 2^(n-1)-1, or 2^(n-1) when |min| > |max| (a tie divides
/// by 2^(n-1)-1, as the toolkit's Python does).
[[nodiscard]] inline float symmetric_divisor(float mx, float mn, int bits) noexcept {
  const bool neg = std::fabs(mx) < std::fabs(mn);
  return static_cast<float>((std::int32_t{1} << (bits - 1)) - 1 + (neg ? 1 : 0));
}

/// The min/max kernel: scale and offset from a (max, min) range, then process_scale.
/// Asymmetric: the range is widened to contain 0, scale = (max-min)/(2^n-1),
/// offset = round(-2^(n-1) - min/scale). Symmetric: scale = max(|max|,|min|)/divisor, offset 0.
[[nodiscard]] inline result<quant_params> min_max_params(float mx, float mn, int bits,
                                                         bool asymmetric) {
  if (!valid_bits(bits)) {
    return make_error(errc::invalid_argument,
                      "bits must be in [2, 16], got " + std::to_string(bits));
  }
  if (asymmetric) {
    mx = mx > 0.0f ? mx : 0.0f;
    mn = mn < 0.0f ? mn : 0.0f;
    const auto levels = static_cast<float>((std::int32_t{1} << bits) - 1);
    const float scale = (mx - mn) / levels;
    const auto half = static_cast<float>(std::int32_t{1} << (bits - 1));
    const float offset = mx != mn ? -half - mn / scale : -half;
    return process_scale(scale, offset, true, bits);
  }
  const float amx = std::fabs(mx);
  const float amn = std::fabs(mn);
  const float boundary = amx > amn ? amx : amn;
  const float scale = boundary / symmetric_divisor(mx, mn, bits);
  return process_scale(scale, 0.0f, false, bits);
}

/// The float range an activation quantizer covers (returned, not recorded, by IFMR and HFMG):
/// clip_max = (2^(n-1)-1 - offset)·scale, clip_min = -(2^(n-1) + offset)·scale, in float32.
struct clip_range {
  float clip_min = 0.0f;
  float clip_max = 0.0f;
};

[[nodiscard]] inline clip_range clip_range_of(const quant_params& p) noexcept {
  const quant_grid g = make_grid(p.bits);
  const float hi = (static_cast<float>(g.qmax) - static_cast<float>(p.offset)) * p.scale;
  const float lo = (static_cast<float>(-g.qmin) + static_cast<float>(p.offset)) * -p.scale;
  return clip_range{lo, hi};
}

/// The deploy "s19" truncation of a dequant scale (FORCE_FP16_QUANT): float32 bits AND 0xFFFFE000,
/// keeping the sign, the exponent and the top 10 mantissa bits.
[[nodiscard]] inline float truncate_s19(float x) noexcept {
  std::uint32_t bits = 0;
  std::memcpy(&bits, &x, sizeof bits);
  bits &= 0xFFFFE000u;
  float out = 0.0f;
  std::memcpy(&out, &bits, sizeof out);
  return out;
}

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
