// FORCE_FP16_QUANT scale rounding (docs/numerics.md, FORCE_FP16_QUANT).
// Depends on: the standard library.
#pragma once

#include <cmath>

#include "ptq/core/abi.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {

/// Largest finite binary16 value and smallest normal binary16 value.
inline constexpr double fp16_max = 65504.0;
inline constexpr double fp16_min_normal = 6.103515625e-05;  // 2^-14

/// `x` rounded to the nearest binary16 value (ties to even, subnormals kept, overflow to inf),
/// returned as a double. Rounds once, straight from double.
[[nodiscard]] inline double round_to_fp16(double x) noexcept {
  if (!std::isfinite(x) || x == 0.0)
    return x;
  int e = 0;
  (void)std::frexp(x, &e);  // |x| = m·2^e, m in [0.5, 1)
  // binary16 has 11 significant bits; the quantum of [2^(e-1), 2^e) is 2^(e-11), at least 2^-24.
  int q = e - 11;
  if (q < -24)
    q = -24;
  const double r = std::ldexp(std::nearbyint(std::ldexp(x, -q)), q);
  if (std::fabs(r) > fp16_max)
    return x > 0 ? HUGE_VAL : -HUGE_VAL;
  return r;
}

/// scale_d as recorded under FORCE_FP16_QUANT: outside the fp16 normal range
/// (scale > 65504 or scale < 2^-14) r = fp16(sqrt(scale)) with the root taken in double and
/// scale = r·r in float32; otherwise scale = fp16(scale).
[[nodiscard]] inline float fp16_scale(float scale) noexcept {
  const auto s = static_cast<double>(scale);
  if (s > fp16_max || s < fp16_min_normal) {
    const auto r = static_cast<float>(round_to_fp16(std::sqrt(s)));
    return r * r;
  }
  return static_cast<float>(round_to_fp16(s));
}

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
