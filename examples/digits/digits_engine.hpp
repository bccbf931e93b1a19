// A minimal inference engine for sequential CNNs (conv, BatchNorm, activation, average pooling,
// linear) over xtensor, as an engine that embeds ptq would have. Plain loops: the digits model
// is small, and clarity matters more here than speed.
#pragma once

#include <xtensor/xarray.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

namespace digits {

using tensor = xt::xarray<float>;

/// PyTorch activations after a layer (eval forms).
struct activation {
  std::string kind;              ///< "", ReLU, ReLU6, Sigmoid, Tanh, LeakyReLU, PReLU, GELU, RReLU
  float negative_slope = 0.01f;  ///< LeakyReLU; RReLU uses (lower + upper) / 2
  std::vector<float> prelu;      ///< PReLU weight (1 or C values)
  bool gelu_tanh = false;        ///< GELU approximate="tanh"
};

inline float apply_scalar(const activation& a, float x, std::size_t channel) {
  const std::string& k = a.kind;
  if (k.empty())
    return x;
  if (k == "ReLU")
    return x > 0.0f ? x : 0.0f;
  if (k == "ReLU6")
    return std::min(std::max(x, 0.0f), 6.0f);
  if (k == "Sigmoid")
    return 1.0f / (1.0f + std::exp(-x));
  if (k == "Tanh")
    return std::tanh(x);
  if (k == "LeakyReLU" || k == "RReLU")
    return x >= 0.0f ? x : x * a.negative_slope;
  if (k == "PReLU") {
    const float w = a.prelu.size() == 1 ? a.prelu[0] : a.prelu[channel];
    return x >= 0.0f ? x : x * w;
  }
  if (k == "GELU") {
    if (a.gelu_tanh) {
      const float c = 0.7978845608028654f;  // sqrt(2/pi)
      return 0.5f * x * (1.0f + std::tanh(c * (x + 0.044715f * x * x * x)));
    }
    return 0.5f * x * (1.0f + std::erf(x * 0.7071067811865476f));
  }
  return x;
}

/// Applies `a` in place; channel axis 1.
inline void apply_activation(const activation& a, tensor& x) {
  if (a.kind.empty())
    return;
  const std::size_t n = x.shape()[0];
  const std::size_t c = x.dimension() > 1 ? x.shape()[1] : 1;
  const std::size_t inner = x.size() / std::max<std::size_t>(n * c, 1);
  float* p = x.data();
  for (std::size_t b = 0; b < n; ++b) {
    for (std::size_t ch = 0; ch < c; ++ch) {
      for (std::size_t i = 0; i < inner; ++i, ++p)
        *p = apply_scalar(a, *p, ch);
    }
  }
}

/// 2-D convolution, NCHW, weight [Cout, Cin/groups, kh, kw].
inline tensor conv2d(const tensor& x, const tensor& w, const std::vector<float>& bias,
                     std::array<std::size_t, 2> stride, std::array<std::size_t, 2> pad,
                     std::array<std::size_t, 2> dil, std::size_t groups) {
  const std::size_t n = x.shape()[0], cin = x.shape()[1], h = x.shape()[2], wd = x.shape()[3];
  const std::size_t cout = w.shape()[0], cpg = w.shape()[1], kh = w.shape()[2], kw = w.shape()[3];
  const std::size_t oh = (h + 2 * pad[0] - dil[0] * (kh - 1) - 1) / stride[0] + 1;
  const std::size_t ow = (wd + 2 * pad[1] - dil[1] * (kw - 1) - 1) / stride[1] + 1;
  const std::size_t opg = cout / groups;
  tensor y = tensor::from_shape({n, cout, oh, ow});
  for (std::size_t b = 0; b < n; ++b) {
    for (std::size_t o = 0; o < cout; ++o) {
      const std::size_t g = o / opg;
      for (std::size_t i = 0; i < oh; ++i) {
        for (std::size_t j = 0; j < ow; ++j) {
          float acc = bias.empty() ? 0.0f : bias[o];
          for (std::size_t c = 0; c < cpg; ++c) {
            const std::size_t ci = g * cpg + c;
            for (std::size_t u = 0; u < kh; ++u) {
              const long yi =
                  static_cast<long>(i * stride[0] + u * dil[0]) - static_cast<long>(pad[0]);
              if (yi < 0 || yi >= static_cast<long>(h))
                continue;
              for (std::size_t v = 0; v < kw; ++v) {
                const long xj =
                    static_cast<long>(j * stride[1] + v * dil[1]) - static_cast<long>(pad[1]);
                if (xj < 0 || xj >= static_cast<long>(wd))
                  continue;
                acc += x(b, ci, static_cast<std::size_t>(yi), static_cast<std::size_t>(xj)) *
                       w(o, c, u, v);
              }
            }
          }
          y(b, o, i, j) = acc;
        }
      }
    }
  }
  (void)cin;
  return y;
}

/// Eval-mode BatchNorm over axis 1, in place.
inline void batch_norm(tensor& x, const std::vector<float>& gamma, const std::vector<float>& beta,
                       const std::vector<float>& mean, const std::vector<float>& var, float eps) {
  const std::size_t n = x.shape()[0], c = x.shape()[1];
  const std::size_t inner = x.size() / (n * c);
  float* p = x.data();
  for (std::size_t b = 0; b < n; ++b) {
    for (std::size_t ch = 0; ch < c; ++ch) {
      const float r = 1.0f / std::sqrt(var[ch] + eps);
      for (std::size_t i = 0; i < inner; ++i, ++p)
        *p = (*p - mean[ch]) * r * gamma[ch] + beta[ch];
    }
  }
}

/// Average pooling, NCHW, no padding.
inline tensor avg_pool2d(const tensor& x, std::array<std::size_t, 2> k,
                         std::array<std::size_t, 2> s) {
  const std::size_t n = x.shape()[0], c = x.shape()[1], h = x.shape()[2], w = x.shape()[3];
  const std::size_t oh = (h - k[0]) / s[0] + 1, ow = (w - k[1]) / s[1] + 1;
  tensor y = tensor::from_shape({n, c, oh, ow});
  const float inv = 1.0f / static_cast<float>(k[0] * k[1]);
  for (std::size_t b = 0; b < n; ++b) {
    for (std::size_t ch = 0; ch < c; ++ch) {
      for (std::size_t i = 0; i < oh; ++i) {
        for (std::size_t j = 0; j < ow; ++j) {
          float acc = 0.0f;
          for (std::size_t u = 0; u < k[0]; ++u) {
            for (std::size_t v = 0; v < k[1]; ++v)
              acc += x(b, ch, i * s[0] + u, j * s[1] + v);
          }
          y(b, ch, i, j) = acc * inv;
        }
      }
    }
  }
  return y;
}

/// y = x W^T + b with x [N, Cin] (flattened), W [Cout, Cin].
inline tensor linear(const tensor& x, const tensor& w, const std::vector<float>& bias) {
  const std::size_t n = x.shape()[0];
  const std::size_t cin = x.size() / n;
  const std::size_t cout = w.shape()[0];
  tensor y = tensor::from_shape({n, cout});
  for (std::size_t b = 0; b < n; ++b) {
    for (std::size_t o = 0; o < cout; ++o) {
      float acc = bias.empty() ? 0.0f : bias[o];
      for (std::size_t i = 0; i < cin; ++i)
        acc += x.data()[b * cin + i] * w.data()[o * cin + i];
      y(b, o) = acc;
    }
  }
  return y;
}

/// Activation fake quantization as the toolkit's quant op computes it:
/// q = clamp(round(x * (1/scale)) + offset, lo, hi), x_hat = (q - offset) * scale.
inline void fake_quantize(tensor& x, float scale, int offset, int bits) {
  const float inv = 1.0f / scale;
  const float lo = -std::ldexp(1.0f, bits - 1);
  const float hi = std::ldexp(1.0f, bits - 1) - 1.0f;
  const float off = static_cast<float>(offset);
  for (auto& v : x) {
    const float q = std::min(std::max(std::nearbyint(v * inv) + off, lo), hi);
    v = (q - off) * scale;
  }
}

}  // namespace digits
