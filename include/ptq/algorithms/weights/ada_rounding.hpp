// The scalar pieces of AdaRound around its kernels (docs/ada.md, Optimisation): the rectified
// sigmoid h(α) with ζ = 1.1, γ = −0.1, the α that reproduces a fractional part, the annealed β of
// the rounding regulariser, Adam's settings and per-step constants (PyTorch's defaults; the
// update itself is in kernels/ada_update.hpp), and the reconstruction loss's sum of squares.
// Depends on: core and kernels.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>

#include "ptq/core/abi.hpp"
#include "ptq/kernels/ada_update.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {
namespace detail {

inline constexpr float ada_zeta = kernels::ada_zeta;
inline constexpr float ada_gamma = kernels::ada_gamma;

/// h(α) = clamp(sigmoid(α)·(ζ − γ) + γ, 0, 1), with the kernels' sigmoid.
[[nodiscard]] inline float ada_rectified_sigmoid(float alpha) noexcept {
  return std::clamp(kernels::ada_sigmoid(alpha) * (ada_zeta - ada_gamma) + ada_gamma, 0.0f, 1.0f);
}

/// α₀ with h(α₀) = frac for frac in [0, 1): α₀ = −log((ζ − γ)/(frac − γ) − 1).
[[nodiscard]] inline float ada_alpha_init(float frac) noexcept {
  return -std::log((ada_zeta - ada_gamma) / (frac - ada_gamma) - 1.0f);
}

/// β(t) of the rounding regulariser: cosine decay from `start` to `end` over the iterations after
/// the warm start w·T, for t ≥ w·T: β_end + ½(β_start − β_end)(1 + cos(π(t − wT)/(T − wT))).
[[nodiscard]] inline float ada_beta(std::size_t t, double warm, std::size_t total, float start,
                                    float end) noexcept {
  const double span = static_cast<double>(total) - warm;
  const double progress = span > 0.0 ? (static_cast<double>(t) - warm) / span : 0.0;
  const double pi = 3.14159265358979323846;
  return static_cast<float>(end + 0.5 * (start - end) * (1.0 + std::cos(pi * progress)));
}

/// Adam (torch.optim.Adam defaults: β₁ 0.9, β₂ 0.999, ε 1e-8, no weight decay), one parameter.
struct adam_params {
  float learning_rate = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float epsilon = 1e-8f;
};

/// The per-step constants of Adam at step `step` (1-based): torch's bias corrections.
struct adam_step_constants {
  float step_size = 0.0f;   ///< lr / (1 − β₁^t)
  float sqrt_bias2 = 0.0f;  ///< sqrt(1 − β₂^t)
};

[[nodiscard]] inline adam_step_constants adam_constants(const adam_params& p,
                                                        std::size_t step) noexcept {
  const double b1 = 1.0 - std::pow(static_cast<double>(p.beta1), static_cast<double>(step));
  const double b2 = 1.0 - std::pow(static_cast<double>(p.beta2), static_cast<double>(step));
  return {static_cast<float>(p.learning_rate / b1), static_cast<float>(std::sqrt(b2))};
}

/// Σ d[i]² in double, in a fixed order: eight running sums over i mod 8, then added 0 to 7. Eight
/// sums, not one, so that the adds do not wait on each other (one sum in element order took 3 %
/// of a Conv2d AdaRound iteration); the order does not depend on anything but n.
[[nodiscard]] inline double sum_of_squares(const float* d, std::size_t n) noexcept {
  constexpr std::size_t lanes = 8;
  double part[lanes] = {};
  std::size_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    for (std::size_t l = 0; l < lanes; ++l)
      part[l] += static_cast<double>(d[i + l]) * static_cast<double>(d[i + l]);
  }
  for (; i < n; ++i)
    part[i % lanes] += static_cast<double>(d[i]) * static_cast<double>(d[i]);
  double sum = 0.0;
  for (const double p : part)
    sum += p;
  return sum;
}

}  // namespace detail

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
