// DMQ balancer (docs/numerics.md, DMQ): per-input-channel factors s_c = a_c^α / w_c^(1-α) from the
// activation and weight absmax, with the toolkit's zero-channel rule and the range check, and the
// functions that apply them (X' = X / s, W' = W · s along Cin).
// Depends on: core and kernels.
#pragma once

#include <cfloat>
#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

#include "ptq/algorithms/layer/tensor.hpp"
#include "ptq/core/error.hpp"
#include "ptq/kernels/kernel_set.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {

/// DMQ settings (JSON `dmq_balancer_param`).
struct dmq_settings {
  double migration_strength = 0.5;  ///< α in [0.2, 0.8]
};

/// Input-channel count and the activation's channel axis for a layer kind.
[[nodiscard]] constexpr bool dmq_channel_last(layer_type op) noexcept {
  return op == layer_type::linear;
}

/// Per input channel max|X| (axis 1 for convolutions, the last axis for Linear).
[[nodiscard]] inline result<std::vector<float>> activation_channel_absmax(
    const tensor_view& x, layer_type op,
    const kernels::kernel_set& k = kernels::default_kernels()) {
  if (auto st = check_tensor_view(x); !st)
    return st.error();
  std::vector<float> scratch;
  const float* data = float_values(x, scratch);
  auto mm = checked_minmax(x.name, data, x.size(), k.minmax);
  if (!mm)
    return mm.error();
  if (dmq_channel_last(op)) {
    if (x.shape.empty()) {
      return make_error(errc::shape_mismatch, x.name + ": a scalar activation");
    }
    const std::size_t cin = x.shape.back();
    const std::size_t rows = x.size() / cin;
    std::vector<float> a(cin, 0.0f);
    for (std::size_t r = 0; r < rows; ++r) {
      const float* row = data + r * cin;
      for (std::size_t c = 0; c < cin; ++c) {
        const float v = std::fabs(row[c]);
        a[c] = v > a[c] ? v : a[c];
      }
    }
    return a;
  }
  if (x.shape.size() < 2) {
    return make_error(
        errc::shape_mismatch,
        x.name + ": a convolution input needs shape [N, C, ...], got " + shape_string(x.shape));
  }
  const std::size_t n = x.shape[0], cin = x.shape[1];
  const std::size_t inner = x.size() / (n * cin);
  std::vector<float> a(cin, 0.0f);
  for (std::size_t b = 0; b < n; ++b) {
    for (std::size_t c = 0; c < cin; ++c) {
      const float m = k.absmax(data + (b * cin + c) * inner, inner);
      a[c] = m > a[c] ? m : a[c];
    }
  }
  return a;
}

/// Per input channel max|W| (weight in native layout; the Cin-first view of docs/numerics.md).
[[nodiscard]] inline result<std::vector<float>> weight_channel_absmax(
    const tensor_view& w, layer_type op, std::size_t groups,
    const kernels::kernel_set& k = kernels::default_kernels()) {
  if (auto st = check_tensor_view(w); !st)
    return st.error();
  auto geo = output_channels(w.shape, op, groups, w.name);  // validates rank, groups, emptiness
  if (!geo)
    return geo.error();
  std::vector<float> scratch;
  const float* data = float_values(w, scratch);
  auto mm = checked_minmax(w.name, data, w.size(), k.minmax);
  if (!mm)
    return mm.error();
  const auto& s = w.shape;
  if (is_conv_transpose(op)) {  // [Cin, Cout/g, k...]: Cin is axis 0
    const std::size_t cin = s[0], row = w.size() / cin;
    std::vector<float> a(cin);
    for (std::size_t c = 0; c < cin; ++c)
      a[c] = k.absmax(data + c * row, row);
    return a;
  }
  if (op == layer_type::linear) {  // [Cout, Cin]
    const std::size_t cout = s[0], cin = s[1];
    std::vector<float> a(cin, 0.0f);
    for (std::size_t o = 0; o < cout; ++o) {
      for (std::size_t c = 0; c < cin; ++c) {
        const float v = std::fabs(data[o * cin + c]);
        a[c] = v > a[c] ? v : a[c];
      }
    }
    return a;
  }
  // Conv [Cout, Cin/g, k...]: global input channel gi·(Cin/g) + ci, gi = o / (Cout/g).
  const std::size_t cout = s[0], cin_g = s[1], ksz = w.size() / (cout * cin_g);
  const std::size_t cout_g = cout / groups;
  std::vector<float> a(cin_g * groups, 0.0f);
  for (std::size_t o = 0; o < cout; ++o) {
    const std::size_t gi = o / cout_g;
    for (std::size_t ci = 0; ci < cin_g; ++ci) {
      const float m = k.absmax(data + (o * cin_g + ci) * ksz, ksz);
      float& dst = a[gi * cin_g + ci];
      dst = m > dst ? m : dst;
    }
  }
  return a;
}

/// DMQ factors from per-channel absmax values (the toolkit's rule, docs/numerics.md, DMQ).
[[nodiscard]] inline result<std::vector<float>> dmq_factors_from_absmax(const std::vector<float>& a,
                                                                        const std::vector<float>& w,
                                                                        const dmq_settings& s) {
  const double alpha = s.migration_strength;
  if (!(alpha >= 0.2 && alpha <= 0.8)) {
    return make_error(errc::invalid_argument,
                      "migration_strength must be in [0.2, 0.8], got " + std::to_string(alpha));
  }
  if (a.size() != w.size()) {
    return make_error(errc::shape_mismatch, "activation has " + std::to_string(a.size()) +
                                                " input channels but the weight has " +
                                                std::to_string(w.size()));
  }
  const std::size_t cin = a.size();
  const float eps = FLT_EPSILON;
  float amax = 0.0f, wmax = 0.0f;
  for (std::size_t c = 0; c < cin; ++c) {
    amax = a[c] > amax ? a[c] : amax;
    wmax = w[c] > wmax ? w[c] : wmax;
  }
  std::vector<float> f(cin, 1.0f);
  if (amax < eps || wmax < eps)
    return f;  // the toolkit crashes here; all ones
  std::vector<float> raw(cin, 0.0f);
  for (std::size_t c = 0; c < cin; ++c) {
    if (w[c] < eps)
      continue;
    const auto pa = static_cast<float>(std::pow(static_cast<double>(a[c]), alpha));
    const auto pw = static_cast<float>(std::pow(static_cast<double>(w[c]), 1.0 - alpha));
    raw[c] = pa / pw;
  }
  float act_outlier = 0.0f, wts_outlier = 0.0f;
  for (std::size_t c = 0; c < cin; ++c) {
    if (raw[c] < eps)
      continue;
    const float ao = a[c] / raw[c];
    const float wo = w[c] * raw[c];
    act_outlier = ao > act_outlier ? ao : act_outlier;
    wts_outlier = wo > wts_outlier ? wo : wts_outlier;
  }
  for (std::size_t c = 0; c < cin; ++c) {
    const bool az = a[c] < eps, wz = w[c] < eps;
    if (az && wz) {
      f[c] = 1.0f;
    } else if (az) {
      f[c] = wts_outlier / w[c];
    } else if (wz) {
      f[c] = a[c] / act_outlier;
    } else {
      f[c] = raw[c];
    }
  }
  for (std::size_t c = 0; c < cin; ++c) {
    if (!(f[c] >= eps && f[c] <= 1.0f / eps)) {
      return make_error(errc::out_of_range, "tensor_balance_factor[" + std::to_string(c) +
                                                "] = " + std::to_string(f[c]) +
                                                " is outside [FLT_EPSILON, 1/FLT_EPSILON]");
    }
  }
  return f;
}

/// DMQ factors (tensor_balance_factor, length Cin) of one layer.
[[nodiscard]] inline result<std::vector<float>> dmq_factors(
    const tensor_view& act, const tensor_view& weight, layer_type op, std::size_t groups,
    const dmq_settings& s, const kernels::kernel_set& k = kernels::default_kernels()) {
  if (op == layer_type::avg_pool2d) {
    return make_error(errc::invalid_argument, "DMQ does not support AvgPool2d");
  }
  auto a = activation_channel_absmax(act, op, k);
  if (!a)
    return a.error();
  auto w = weight_channel_absmax(weight, op, groups, k);
  if (!w)
    return w.error();
  return dmq_factors_from_absmax(a.value(), w.value(), s);
}

/// W' = W · s along the input-channel axis (in place, native layout).
[[nodiscard]] inline result<> dmq_apply_to_weight(float* w, const std::vector<std::size_t>& shape,
                                                  layer_type op, std::size_t groups,
                                                  const std::vector<float>& f) {
  auto geo = output_channels(shape, op, groups);
  if (!geo)
    return geo.error();
  std::size_t n = 1;
  for (auto d : shape)
    n *= d;
  if (is_conv_transpose(op)) {
    if (f.size() != shape[0]) {
      return make_error(errc::shape_mismatch, "factor count != Cin");
    }
    const std::size_t row = n / shape[0];
    for (std::size_t c = 0; c < shape[0]; ++c) {
      for (std::size_t i = 0; i < row; ++i)
        w[c * row + i] *= f[c];
    }
    return {};
  }
  if (op == layer_type::linear) {
    if (f.size() != shape[1]) {
      return make_error(errc::shape_mismatch, "factor count != Cin");
    }
    for (std::size_t o = 0; o < shape[0]; ++o) {
      for (std::size_t c = 0; c < shape[1]; ++c)
        w[o * shape[1] + c] *= f[c];
    }
    return {};
  }
  const std::size_t cout = shape[0], cin_g = shape[1], ksz = n / (cout * cin_g);
  const std::size_t cout_g = cout / groups;
  if (f.size() != cin_g * groups) {
    return make_error(errc::shape_mismatch, "factor count != Cin");
  }
  for (std::size_t o = 0; o < cout; ++o) {
    const std::size_t gi = o / cout_g;
    for (std::size_t ci = 0; ci < cin_g; ++ci) {
      const float s = f[gi * cin_g + ci];
      float* p = w + (o * cin_g + ci) * ksz;
      for (std::size_t i = 0; i < ksz; ++i)
        p[i] *= s;
    }
  }
  return {};
}

/// X' = X / s along the activation's input-channel axis (in place).
[[nodiscard]] inline result<> dmq_apply_to_activation(float* x,
                                                      const std::vector<std::size_t>& shape,
                                                      layer_type op, const std::vector<float>& f) {
  std::size_t n = 1;
  for (auto d : shape)
    n *= d;
  if (dmq_channel_last(op)) {
    if (shape.empty() || shape.back() != f.size()) {
      return make_error(errc::shape_mismatch, "factor count != Cin");
    }
    const std::size_t cin = f.size();
    for (std::size_t i = 0; i < n; ++i)
      x[i] /= f[i % cin];
    return {};
  }
  if (shape.size() < 2 || shape[1] != f.size()) {
    return make_error(errc::shape_mismatch, "factor count != Cin");
  }
  const std::size_t inner = n / (shape[0] * shape[1]);
  for (std::size_t b = 0; b < shape[0]; ++b) {
    for (std::size_t c = 0; c < shape[1]; ++c) {
      float* p = x + (b * shape[1] + c) * inner;
      for (std::size_t i = 0; i < inner; ++i)
        p[i] /= f[c];
    }
  }
  return {};
}

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
