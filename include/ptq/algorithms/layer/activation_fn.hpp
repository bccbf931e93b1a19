// The activation that follows a layer (AdaRound optimizes a layer together with it, docs/ada.md,
// Activations): its description, and elementwise forward and backward (dz = dy·act'(z)) of every
// kind with PyTorch's formulas and its derivative conventions at the kinks. Layout n × channels ×
// spatial (Linear: spatial 1); only PReLU looks at the channel. Float32, scalar, one fixed
// formula per kind (no reassociation), so results are deterministic.
// Depends on: core.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "ptq/core/error.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {

/// The activation that follows a layer (needed by AdaRound; PyTorch module names).
enum class activation_kind : std::uint8_t {
  none,
  relu,
  relu6,
  sigmoid,
  tanh,
  leaky_relu,
  prelu,
  gelu,
  rrelu,
};

struct activation_desc {
  activation_kind kind = activation_kind::none;
  float negative_slope = 0.01f;     ///< LeakyReLU
  std::vector<float> prelu_weight;  ///< PReLU (1 or C values)
  bool gelu_tanh = false;           ///< GELU(approximate="tanh")
  float rrelu_lower = 1.0f / 8.0f;  ///< RReLU, eval form: slope (lower + upper) / 2
  float rrelu_upper = 1.0f / 3.0f;
};

/// The PyTorch module name of a kind ("none" for none).
[[nodiscard]] constexpr std::string_view to_string(activation_kind k) noexcept {
  switch (k) {
    case activation_kind::none:
      return "none";
    case activation_kind::relu:
      return "ReLU";
    case activation_kind::relu6:
      return "ReLU6";
    case activation_kind::sigmoid:
      return "Sigmoid";
    case activation_kind::tanh:
      return "Tanh";
    case activation_kind::leaky_relu:
      return "LeakyReLU";
    case activation_kind::prelu:
      return "PReLU";
    case activation_kind::gelu:
      return "GELU";
    case activation_kind::rrelu:
      return "RReLU";
  }
  return "unknown";
}

/// RReLU's eval-mode slope: torch computes (lower + upper) / 2 in double, then uses it as float.
[[nodiscard]] inline float rrelu_eval_slope(const activation_desc& a) noexcept {
  return static_cast<float>((static_cast<double>(a.rrelu_lower) + a.rrelu_upper) / 2.0);
}

/// Checks a description against the channel count of the tensors it will see: PReLU needs 1 or
/// `channels` weights; the parameters the kind uses must be finite; RReLU needs lower <= upper
/// (torch's check). Parameters of other kinds are ignored.
[[nodiscard]] inline result<> check_activation(const activation_desc& a, std::size_t channels) {
  const auto fail = [&](const std::string& what) {
    return make_error(errc::invalid_argument, std::string(to_string(a.kind)) + ": " + what);
  };
  switch (a.kind) {
    case activation_kind::none:
    case activation_kind::relu:
    case activation_kind::relu6:
    case activation_kind::sigmoid:
    case activation_kind::tanh:
    case activation_kind::gelu:
      return {};
    case activation_kind::leaky_relu:
      if (!std::isfinite(a.negative_slope))
        return fail("negative_slope is not finite");
      return {};
    case activation_kind::prelu: {
      const std::size_t m = a.prelu_weight.size();
      if (m != 1 && m != channels) {
        return fail("weight has " + std::to_string(m) + " values, expected 1 or " +
                    std::to_string(channels) + " (channels)");
      }
      for (std::size_t c = 0; c < m; ++c) {
        if (!std::isfinite(a.prelu_weight[c]))
          return fail("weight " + std::to_string(c) + " is not finite");
      }
      return {};
    }
    case activation_kind::rrelu:
      if (!std::isfinite(a.rrelu_lower) || !std::isfinite(a.rrelu_upper))
        return fail("lower/upper are not finite");
      if (!(a.rrelu_lower <= a.rrelu_upper))
        return fail("lower is greater than upper");
      return {};
  }
  return make_error(errc::invalid_argument, "unknown activation kind");
}

namespace detail {

// Scalar forms, written as torch's CPU scalar kernels compute them (float opmath).
inline constexpr float gelu_sqrt1_2 = 0.70710678118654752440f;       // 1/√2
inline constexpr float gelu_inv_sqrt_2pi = 0.39894228040143267794f;  // 1/√(2π)
inline constexpr float gelu_tanh_beta = 0.79788456080286535588f;     // √(2/π)
inline constexpr float gelu_tanh_kappa = 0.044715f;

// ReLU: NaN propagates (torch's clamp_min does), -0 becomes +0: z is kept exactly when
// !(z <= 0) (z > 0 or NaN), else +0. Written as a mask on the bits because g++ 12 -O2 compiles
// every select form of it (z < 0 ? 0 : z, with or without + 0) to a branch, which inputs of
// random sign mispredict half the time (10 % of a Conv2d AdaRound iteration, 21 % of a
// depthwise one); this is a compare, a borrow and an and.
[[nodiscard]] inline float relu_f(float z) noexcept {
  std::uint32_t bits = 0;
  std::memcpy(&bits, &z, sizeof bits);
  bits &= 0U - static_cast<std::uint32_t>(!(z <= 0.0f));
  float r = 0.0f;
  std::memcpy(&r, &bits, sizeof r);
  return r;
}
[[nodiscard]] inline float relu6_f(float z) noexcept {
  return z > 6.0f ? 6.0f : relu_f(z);
}
[[nodiscard]] inline float leaky_f(float z, float slope) noexcept {
  return z > 0.0f ? z : z * slope;
}
[[nodiscard]] inline float sigmoid_f(float z) noexcept {
  return 1.0f / (1.0f + std::exp(-z));
}
[[nodiscard]] inline float gelu_erf_f(float z) noexcept {
  return z * 0.5f * (1.0f + std::erf(z * gelu_sqrt1_2));
}
[[nodiscard]] inline float gelu_tanh_f(float z) noexcept {
  const float cube = z * z * z;
  const float inner = gelu_tanh_beta * (z + gelu_tanh_kappa * cube);
  return 0.5f * z * (1.0f + std::tanh(inner));
}

// Derivatives times dy, with torch's conventions: threshold_backward (ReLU: z <= 0 → 0),
// hardtanh_backward (ReLU6: 0 unless 0 < z < 6), leaky_relu_backward and the PReLU kernel
// (z > 0 → dy, else slope·dy, so the kink takes the slope), sigmoid/tanh from the output y.
[[nodiscard]] inline float relu_b(float z, float dy) noexcept {
  return z <= 0.0f ? 0.0f : dy;
}
[[nodiscard]] inline float relu6_b(float z, float dy) noexcept {
  return z <= 0.0f || z >= 6.0f ? 0.0f : dy;
}
[[nodiscard]] inline float leaky_b(float z, float dy, float slope) noexcept {
  return z > 0.0f ? dy : dy * slope;
}
[[nodiscard]] inline float sigmoid_b(float z, float dy) noexcept {
  const float y = sigmoid_f(z);
  return dy * (1.0f - y) * y;
}
[[nodiscard]] inline float tanh_b(float z, float dy) noexcept {
  const float y = std::tanh(z);
  return dy * (1.0f - y * y);
}
[[nodiscard]] inline float gelu_erf_b(float z, float dy) noexcept {
  const float cdf = 0.5f * (1.0f + std::erf(z * gelu_sqrt1_2));
  const float pdf = gelu_inv_sqrt_2pi * std::exp(z * z * -0.5f);
  return dy * (cdf + z * pdf);
}
[[nodiscard]] inline float gelu_tanh_b(float z, float dy) noexcept {
  const float sq = z * z;
  const float cube = sq * z;
  const float inner = gelu_tanh_beta * (z + gelu_tanh_kappa * cube);
  const float t = std::tanh(inner);
  const float left = 0.5f * z;
  const float right = 1.0f + t;
  const float d_left = 0.5f * right;
  const float d_tanh = 1.0f - t * t;
  const float d_inner = gelu_tanh_beta * (1.0f + 3.0f * gelu_tanh_kappa * sq);
  return dy * (d_left + left * d_tanh * d_inner);
}

/// y[i] = f(z[i]) over a contiguous range (one kind per call, so the loop body has no switch).
template <class F>
void map1(const float* z, float* y, std::size_t count, F f) noexcept {
  for (std::size_t i = 0; i < count; ++i)
    y[i] = f(z[i]);
}

/// dz[i] = f(z[i], dy[i]).
template <class F>
void map2(const float* z, const float* dy, float* dz, std::size_t count, F f) noexcept {
  for (std::size_t i = 0; i < count; ++i)
    dz[i] = f(z[i], dy[i]);
}

}  // namespace detail

/// y = act(z) elementwise over n × channels × spatial values. y may alias z. Errors: the ones of
/// check_activation (nothing is written then).
[[nodiscard]] inline result<> activation_forward(const activation_desc& a, const float* z, float* y,
                                                 std::size_t n, std::size_t channels,
                                                 std::size_t spatial) {
  auto st = check_activation(a, channels);
  if (!st)
    return st;
  const std::size_t count = n * channels * spatial;
  switch (a.kind) {
    case activation_kind::none:
      detail::map1(z, y, count, [](float v) { return v; });
      break;
    case activation_kind::relu:
      detail::map1(z, y, count, detail::relu_f);
      break;
    case activation_kind::relu6:
      detail::map1(z, y, count, detail::relu6_f);
      break;
    case activation_kind::sigmoid:
      detail::map1(z, y, count, detail::sigmoid_f);
      break;
    case activation_kind::tanh:
      detail::map1(z, y, count, [](float v) { return std::tanh(v); });
      break;
    case activation_kind::leaky_relu:
    case activation_kind::rrelu: {
      const float s = a.kind == activation_kind::rrelu ? rrelu_eval_slope(a) : a.negative_slope;
      detail::map1(z, y, count, [s](float v) { return detail::leaky_f(v, s); });
      break;
    }
    case activation_kind::prelu: {
      const bool shared = a.prelu_weight.size() == 1;
      for (std::size_t b = 0; b < n; ++b) {
        for (std::size_t c = 0; c < channels; ++c) {
          const float s = a.prelu_weight[shared ? 0 : c];
          const std::size_t off = (b * channels + c) * spatial;
          detail::map1(z + off, y + off, spatial, [s](float v) { return detail::leaky_f(v, s); });
        }
      }
      break;
    }
    case activation_kind::gelu:
      if (a.gelu_tanh) {
        detail::map1(z, y, count, detail::gelu_tanh_f);
      } else {
        detail::map1(z, y, count, detail::gelu_erf_f);
      }
      break;
  }
  return {};
}

/// dz = dy · act'(z) elementwise over n × channels × spatial values (z is the activation's
/// input). dz may alias dy or z. At the kinks: ReLU'(0) = 0, ReLU6' = 1 only on (0, 6),
/// LeakyReLU/RReLU/PReLU'(0) = slope.
[[nodiscard]] inline result<> activation_backward(const activation_desc& a, const float* z,
                                                  const float* dy, float* dz, std::size_t n,
                                                  std::size_t channels, std::size_t spatial) {
  auto st = check_activation(a, channels);
  if (!st)
    return st;
  const std::size_t count = n * channels * spatial;
  switch (a.kind) {
    case activation_kind::none:
      detail::map2(z, dy, dz, count, [](float, float g) { return g; });
      break;
    case activation_kind::relu:
      detail::map2(z, dy, dz, count, detail::relu_b);
      break;
    case activation_kind::relu6:
      detail::map2(z, dy, dz, count, detail::relu6_b);
      break;
    case activation_kind::sigmoid:
      detail::map2(z, dy, dz, count, detail::sigmoid_b);
      break;
    case activation_kind::tanh:
      detail::map2(z, dy, dz, count, detail::tanh_b);
      break;
    case activation_kind::leaky_relu:
    case activation_kind::rrelu: {
      const float s = a.kind == activation_kind::rrelu ? rrelu_eval_slope(a) : a.negative_slope;
      detail::map2(z, dy, dz, count, [s](float v, float g) { return detail::leaky_b(v, g, s); });
      break;
    }
    case activation_kind::prelu: {
      const bool shared = a.prelu_weight.size() == 1;
      for (std::size_t b = 0; b < n; ++b) {
        for (std::size_t c = 0; c < channels; ++c) {
          const float s = a.prelu_weight[shared ? 0 : c];
          const std::size_t off = (b * channels + c) * spatial;
          detail::map2(z + off, dy + off, dz + off, spatial,
                       [s](float v, float g) { return detail::leaky_b(v, g, s); });
        }
      }
      break;
    }
    case activation_kind::gelu:
      if (a.gelu_tanh) {
        detail::map2(z, dy, dz, count, detail::gelu_tanh_b);
      } else {
        detail::map2(z, dy, dz, count, detail::gelu_erf_b);
      }
      break;
  }
  return {};
}

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
