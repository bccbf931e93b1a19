// The element-wise passes of one AdaRound iteration (docs/ada.md, Optimisation), as kernels with
// their scalar references: the soft weight clamp(base + h(α), −128, 127)·s with h the rectified
// sigmoid (ζ = 1.1, γ = −0.1), and the step that turns ∂recon/∂W into ∂loss/∂α (with the rounding
// regulariser reg·Σ(1 − |2h − 1|^β)) and applies Adam. The references define the kernels: both
// are one template over float / xsimd batch (fast_math.hpp), so they agree bit for bit. The
// regulariser's sum goes to 16 float lanes (element i to lane i % 16), added in lane order at
// the end, the same on every arch.
// Depends on: core and xsimd.
#pragma once

#include <xsimd/xsimd.hpp>

#include <algorithm>
#include <cstddef>

#include "ptq/core/abi.hpp"
#include "ptq/kernels/fast_math.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {
namespace kernels {

/// The per-weight state of AdaRound (structure of arrays, n entries each).
struct ada_arrays {
  const float* base = nullptr;   ///< floor(W/s)
  const float* scale = nullptr;  ///< s of the weight's channel
  float* alpha = nullptr;
  float* m = nullptr;    ///< Adam first moment
  float* v = nullptr;    ///< Adam second moment
  float* sig = nullptr;  ///< sigmoid(α), written by the soft-weight pass for the step
};

/// The constants of one step.
struct ada_step_params {
  float reg_param = 0.0f;
  float beta = 0.0f;  ///< the regulariser is off when β = 0 (warm start)
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float epsilon = 1e-8f;
  float step_size = 1e-3f;  ///< lr / (1 − β₁^t)
  float sqrt_bias2 = 1.0f;  ///< sqrt(1 − β₂^t)
};

inline constexpr std::size_t ada_sum_lanes = 16;

/// The rectified sigmoid's stretch: h(α) = clamp(sigmoid(α)·(ζ − γ) + γ, 0, 1).
inline constexpr float ada_zeta = 1.1f;
inline constexpr float ada_gamma = -0.1f;

namespace detail {

inline constexpr float ada_stretch = ada_zeta - ada_gamma;
inline constexpr float ada_shift = ada_gamma;

// e^-α capped at e^80, so sigmoid(α) >= 1.8e-35 stays a normal float (subnormal operands cost
// a microcode assist per operation on x86).
template <class V>
[[nodiscard]] PTQ_ALWAYS_INLINE V ada_sigmoid(V alpha) noexcept {
  return V(1.0f) / (V(1.0f) + exp_approx(fm::min(V(0.0f) - alpha, V(80.0f))));
}

template <class V>
[[nodiscard]] PTQ_ALWAYS_INLINE V ada_soft(V sig, V base, V scale) noexcept {
  const V h = fm::min(fm::max(sig * V(ada_stretch) + V(ada_shift), V(0.0f)), V(1.0f));
  return fm::min(fm::max(base + h, V(-128.0f)), V(127.0f)) * scale;
}

// |2h − 1|^(β−1) of one lane group, taken as 0 below e^-60 (its terms are then below float
// resolution, and every product stays a normal float: subnormal operands cost a microcode assist
// per operation on x86) and at 2h = 1.
template <class V>
[[nodiscard]] PTQ_ALWAYS_INLINE V ada_reg_power(V sig, float beta) noexcept {
  const V h = fm::min(fm::max(sig * V(ada_stretch) + V(ada_shift), V(0.0f)), V(1.0f));
  const V a = fm::abs(h + h - V(1.0f));
  const auto nonzero = a > V(0.0f);
  const V t = V(beta - 1.0f) * log_approx(fm::select(nonzero, a, V(1.0f)));
  return fm::select(nonzero & (t > V(-60.0f)), exp_approx(t), V(0.0f));
}

// ∂loss/∂α of one lane group, with p1 = ada_reg_power(sig) when regularising (then
// 1 − |2h − 1|^β is added to `round`).
template <class V, bool Regularise>
[[nodiscard]] PTQ_ALWAYS_INLINE V ada_alpha_grad(V sig, V base, V scale, V gw, float reg_param,
                                                 float beta, V p1, V& round) noexcept {
  const V raw = sig * V(ada_stretch) + V(ada_shift);
  const V h = fm::min(fm::max(raw, V(0.0f)), V(1.0f));
  const V q = base + h;
  // torch's clamp passes the gradient where min <= x <= max (both ends included).
  V g_h = fm::select((q >= V(-128.0f)) & (q <= V(127.0f)), gw * scale, V(0.0f));
  if constexpr (Regularise) {
    const V d = h + h - V(1.0f);
    round = round + (V(1.0f) - p1 * fm::abs(d));
    // ∂/∂h of reg·(1 − |2h − 1|^β) = −2·reg·β·|2h − 1|^(β−1)·sign(2h − 1); 0 at 2h = 1.
    const V dp = V(2.0f * reg_param * beta) * p1;
    g_h = g_h - fm::select(d > V(0.0f), dp, V(0.0f) - dp);
  }
  return fm::select((raw >= V(0.0f)) & (raw <= V(1.0f)),
                    g_h * V(ada_stretch) * sig * (V(1.0f) - sig), V(0.0f));
}

// The gradient of one lane group and its Adam update.
template <class V, bool Regularise>
PTQ_ALWAYS_INLINE void ada_step_one(V& alpha, V& m, V& v, V sig, V base, V scale, V gw, V p1,
                                    const ada_step_params& p, V& round) noexcept {
  const V g = ada_alpha_grad<V, Regularise>(sig, base, scale, gw, p.reg_param, p.beta, p1, round);
  m = V(p.beta1) * m + V(1.0f - p.beta1) * g;
  v = V(p.beta2) * v + V(1.0f - p.beta2) * g * g;
  const V denom = fm::sqrt(v) / V(p.sqrt_bias2) + V(p.epsilon);
  alpha = alpha - V(p.step_size) * (m / denom);
}

template <bool Regularise>
void ada_step_scalar(const ada_arrays& s, std::size_t begin, std::size_t end, const float* gw,
                     const ada_step_params& p, float* lanes) noexcept {
  for (std::size_t i = begin; i < end; ++i) {
    const float p1 = Regularise ? ada_reg_power(s.sig[i], p.beta) : 0.0f;
    ada_step_one<float, Regularise>(s.alpha[i], s.m[i], s.v[i], s.sig[i], s.base[i], s.scale[i],
                                    gw[i], p1, p, lanes[i % ada_sum_lanes]);
  }
}

[[nodiscard]] inline double ada_finish_lanes(const float* lanes) noexcept {
  double sum = 0.0;
  for (std::size_t l = 0; l < ada_sum_lanes; ++l)
    sum += static_cast<double>(lanes[l]);
  return sum;
}

}  // namespace detail

/// ∂loss/∂α of one weight (`sig` = sigmoid(α), `gw` = ∂recon/∂W), the rounding regulariser
/// included when `beta` > 0, in which case 1 − |2h − 1|^β is added to `round`.
[[nodiscard]] inline float ada_alpha_gradient(float sig, float base, float scale, float gw,
                                              float reg_param, float beta, float& round) noexcept {
  if (beta > 0.0f) {
    return detail::ada_alpha_grad<float, true>(sig, base, scale, gw, reg_param, beta,
                                               detail::ada_reg_power(sig, beta), round);
  }
  return detail::ada_alpha_grad<float, false>(sig, base, scale, gw, reg_param, beta, 0.0f, round);
}

/// sigmoid(α) as the kernels compute it.
[[nodiscard]] inline float ada_sigmoid(float alpha) noexcept {
  return detail::ada_sigmoid(alpha);
}

/// w[i] = clamp(base + h(α), −128, 127)·s and sig[i] = sigmoid(α), for i in [0, n).
inline void ada_soft_weight_ref(const ada_arrays& s, std::size_t n, float* w) noexcept {
  for (std::size_t i = 0; i < n; ++i) {
    s.sig[i] = detail::ada_sigmoid(s.alpha[i]);
    w[i] = detail::ada_soft(s.sig[i], s.base[i], s.scale[i]);
  }
}

template <class Arch>
void ada_soft_weight_simd(const ada_arrays& s, std::size_t n, float* w) noexcept {
  using B = xsimd::batch<float, Arch>;
  constexpr std::size_t W = B::size;
  std::size_t i = 0;
  for (; i + W <= n; i += W) {
    const B sig = detail::ada_sigmoid(B::load_unaligned(s.alpha + i));
    sig.store_unaligned(s.sig + i);
    detail::ada_soft(sig, B::load_unaligned(s.base + i), B::load_unaligned(s.scale + i))
        .store_unaligned(w + i);
  }
  ada_arrays rest = s;
  rest.base += i;
  rest.scale += i;
  rest.alpha += i;
  rest.sig += i;
  ada_soft_weight_ref(rest, n - i, w + i);
}

/// ∂loss/∂α from ∂recon/∂W (`gw`) and one Adam step for i in [0, n); returns Σ(1 − |2h − 1|^β)
/// (0 when p.beta is 0: the regulariser is off). Needs sig from ada_soft_weight.
inline double ada_step_ref(const ada_arrays& s, std::size_t n, const float* gw,
                           const ada_step_params& p) noexcept {
  float lanes[ada_sum_lanes] = {};
  if (p.beta > 0.0f) {
    detail::ada_step_scalar<true>(s, 0, n, gw, p, lanes);
  } else {
    detail::ada_step_scalar<false>(s, 0, n, gw, p, lanes);
  }
  return detail::ada_finish_lanes(lanes);
}

namespace detail {

// In chunks of 256 weights: first |2h − 1|^(β−1) of the chunk into an L1 buffer (a short loop,
// whose log and exp the CPU overlaps across iterations), then the gradient and Adam. The values
// are those of the one-pass reference; only the instruction order differs.
template <class Arch, bool Regularise>
double ada_step_simd_impl(const ada_arrays& s, std::size_t n, const float* gw,
                          const ada_step_params& p) noexcept {
  using B = xsimd::batch<float, Arch>;
  constexpr std::size_t W = B::size;
  static_assert(ada_sum_lanes % W == 0, "the lane count must be a multiple of the batch width");
  constexpr std::size_t G = ada_sum_lanes / W;  // batches per 16 lanes
  constexpr std::size_t chunk = 256;
  alignas(64) float power[chunk];
  B acc[G];
  for (auto& a : acc)
    a = B(0.0f);
  const std::size_t full = n - n % ada_sum_lanes;
  for (std::size_t c = 0; c < full; c += chunk) {
    const std::size_t len = std::min(chunk, full - c);
    if constexpr (Regularise) {
      for (std::size_t k = 0; k < len; k += W)
        ada_reg_power(B::load_unaligned(s.sig + c + k), p.beta).store_aligned(power + k);
    }
    for (std::size_t k = 0; k < len; k += ada_sum_lanes) {
      for (std::size_t g = 0; g < G; ++g) {
        const std::size_t j = c + k + g * W;
        B alpha = B::load_unaligned(s.alpha + j);
        B m = B::load_unaligned(s.m + j);
        B v = B::load_unaligned(s.v + j);
        const B p1 = Regularise ? B::load_aligned(power + k + g * W) : B(0.0f);
        ada_step_one<B, Regularise>(alpha, m, v, B::load_unaligned(s.sig + j),
                                    B::load_unaligned(s.base + j), B::load_unaligned(s.scale + j),
                                    B::load_unaligned(gw + j), p1, p, acc[g]);
        alpha.store_unaligned(s.alpha + j);
        m.store_unaligned(s.m + j);
        v.store_unaligned(s.v + j);
      }
    }
  }
  float lanes[ada_sum_lanes];
  for (std::size_t g = 0; g < G; ++g)
    acc[g].store_unaligned(lanes + g * W);
  ada_step_scalar<Regularise>(s, full, n, gw, p, lanes);  // the tail continues lane i % 16
  return ada_finish_lanes(lanes);
}

}  // namespace detail

template <class Arch>
double ada_step_simd(const ada_arrays& s, std::size_t n, const float* gw,
                     const ada_step_params& p) noexcept {
  return p.beta > 0.0f ? detail::ada_step_simd_impl<Arch, true>(s, n, gw, p)
                       : detail::ada_step_simd_impl<Arch, false>(s, n, gw, p);
}

}  // namespace kernels
}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
