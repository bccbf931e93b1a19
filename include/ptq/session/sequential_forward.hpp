// The reference forward pass of a sequential model manifest (docs/calibrate.md, The model
// manifest): Conv2d and Linear on the library's layer_compute with the unfused reference GEMM,
// AvgPool2d, an eval-mode BatchNorm after a layer and its activation, layer after layer. It is
// the engine of `ptq calibrate` on the bundled digits model, of the examples and of the tests, so
// that one forward pass produces every figure they publish (the bundled model: FP32 99.26 %,
// quantized 99.07 %). Every output is the bias plus the products added in k order, one rounding
// each; a fused multiply-add GEMM would move the figures in the last bits.
// Depends on: core, kernels, io (the batches are its float tensors) and algorithms.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "ptq/algorithms/layer/activation_fn.hpp"
#include "ptq/algorithms/layer/layer_compute.hpp"
#include "ptq/algorithms/layer/tensor.hpp"
#include "ptq/core/error.hpp"
#include "ptq/io/safetensors.hpp"
#include "ptq/kernels/kernel_set.hpp"
#include "ptq/session/checks.hpp"
#include "ptq/session/model_manifest.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {

/// A view of a batch (NCHW, or [N, features] after a flatten) for the session's feed,
/// feed_dmq and quantize_ada; valid while `x` lives.
[[nodiscard]] inline tensor_view batch_view(const io::float_tensor& x, std::string name) {
  return view_of(x.data.data(), x.shape, std::move(name));
}

namespace detail {

/// Conv2d or Linear through layer_compute with the reference kernels.
[[nodiscard]] inline result<io::float_tensor> run_gemm_layer(const layer_desc& d,
                                                             const io::float_tensor& x,
                                                             unsigned threads) {
  static const kernels::kernel_set reference = kernels::reference_kernel_set();
  const std::string at = d.name + " input " + shape_string(x.shape) + ": ";
  layer_geometry g;
  g.type = d.type;
  g.in_channels = layer_input_channels(d);
  g.out_channels = layer_output_channels(d);
  set_conv_attributes(g, d.conv);
  const std::size_t n = x.shape.empty() ? 0 : x.shape[0];
  if (d.type == layer_type::conv2d) {
    if (x.shape.size() != 4 || x.shape[1] != g.in_channels) {
      return make_error(errc::shape_mismatch,
                        at + "expected [N, " + std::to_string(g.in_channels) + ", H, W]");
    }
    g.in_h = x.shape[2];
    g.in_w = x.shape[3];
    g.kernel_h = d.weight.shape[2];
    g.kernel_w = d.weight.shape[3];
  } else if (x.shape.size() != 2 || x.shape[1] != g.in_channels) {
    return make_error(errc::shape_mismatch,
                      at + "expected [N, " + std::to_string(g.in_channels) + "]");
  }
  layer_compute lc(g, threads, reference);
  io::float_tensor y;
  y.shape = d.type == layer_type::conv2d
                ? std::vector<std::size_t>{n, g.out_channels, lc.out_h(), lc.out_w()}
                : std::vector<std::size_t>{n, g.out_channels};
  y.data.resize(n * lc.output_size());
  std::vector<float> weight_copy, bias_copy;  // for views that are not float32 in C order
  const float* bias = d.bias ? float_values(*d.bias, bias_copy) : nullptr;
  if (auto st =
          lc.forward(x.data.data(), n, float_values(d.weight, weight_copy), bias, y.data.data());
      !st) {
    return make_error(st.error().code, at + st.error().message);
  }
  return y;
}

/// Average pooling, NCHW, no padding: the window's sum in row order, times 1 / (kh kw).
[[nodiscard]] inline io::float_tensor avg_pool2d(const io::float_tensor& x,
                                                 std::array<std::size_t, 2> k,
                                                 std::array<std::size_t, 2> s) {
  const std::size_t n = x.shape[0], c = x.shape[1], h = x.shape[2], w = x.shape[3];
  const std::size_t oh = (h - k[0]) / s[0] + 1, ow = (w - k[1]) / s[1] + 1;
  io::float_tensor y{{n, c, oh, ow}, std::vector<float>(n * c * oh * ow)};
  const float inv = 1.0f / static_cast<float>(k[0] * k[1]);
  float* out = y.data.data();
  for (std::size_t p = 0; p < n * c; ++p) {
    const float* plane = x.data.data() + p * h * w;
    for (std::size_t i = 0; i < oh; ++i) {
      for (std::size_t j = 0; j < ow; ++j) {
        float acc = 0.0f;
        for (std::size_t u = 0; u < k[0]; ++u) {
          for (std::size_t v = 0; v < k[1]; ++v)
            acc += plane[(i * s[0] + u) * w + j * s[1] + v];
        }
        *out++ = acc * inv;
      }
    }
  }
  return y;
}

/// The manifest's AvgPool2d on `x`, its window checked against the input.
[[nodiscard]] inline result<io::float_tensor> run_pool_layer(const manifest_layer& m,
                                                             const io::float_tensor& x) {
  std::array<std::size_t, 2> k{}, s{};
  attribute_pair(m.kernel_size, 2, k[0], k[1]);
  attribute_pair(m.pool_stride.empty() ? m.kernel_size : m.pool_stride, 2, s[0], s[1]);
  if (x.shape.size() != 4 || x.shape[2] < k[0] || x.shape[3] < k[1] || s[0] == 0 || s[1] == 0) {
    return make_error(errc::shape_mismatch, m.desc.name + " input " + shape_string(x.shape) +
                                                ": the pooling window does not fit");
  }
  return avg_pool2d(x, k, s);
}

/// Eval-mode BatchNorm over axis 1, in place: (x - mean) / sqrt(var + eps) * gamma + beta.
/// Errors: parameters that are not one per channel.
[[nodiscard]] inline result<> batch_norm(io::float_tensor& x, const batch_norm_params& bn,
                                         const std::string& layer) {
  const std::size_t n = x.shape[0], c = x.shape[1];
  for (const auto* v : {&bn.weight, &bn.bias, &bn.running_mean, &bn.running_var}) {
    if (v->size() != c) {
      return make_error(errc::shape_mismatch, layer + ": its BatchNorm has " +
                                                  std::to_string(v->size()) + " values for " +
                                                  std::to_string(c) + " channels");
    }
  }
  if (n * c == 0)
    return {};
  const std::size_t inner = x.data.size() / (n * c);
  float* p = x.data.data();
  for (std::size_t b = 0; b < n; ++b) {
    for (std::size_t ch = 0; ch < c; ++ch) {
      const float r = 1.0f / std::sqrt(bn.running_var[ch] + bn.eps);
      for (std::size_t i = 0; i < inner; ++i, ++p)
        *p = (*p - bn.running_mean[ch]) * r * bn.weight[ch] + bn.bias[ch];
    }
  }
  return {};
}

}  // namespace detail

/// Layer `m` of a sequential manifest run with the description `d` (its weights, BatchNorm and
/// activation as the session holds them: fused, balanced, fake-quantized). Errors: a layer type
/// other than Conv2d, Linear and AvgPool2d, a description that does not hold together (E801, as
/// the session checks it), an input that does not fit the layer.
[[nodiscard]] inline result<io::float_tensor> run_sequential_layer(const manifest_layer& m,
                                                                   const layer_desc& d,
                                                                   const io::float_tensor& x,
                                                                   unsigned threads) {
  const bool gemm = d.type == layer_type::conv2d || d.type == layer_type::linear;
  if (!gemm && d.type != layer_type::avg_pool2d) {
    return make_error(errc::invalid_argument,
                      d.name + ": the sequential forward runs Conv2d, Linear and AvgPool2d only");
  }
  if (auto st = check_layer_desc(d); !st)
    return st.error();
  auto y = gemm ? detail::run_gemm_layer(d, x, threads) : detail::run_pool_layer(m, x);
  if (!y)
    return y;
  io::float_tensor& out = y.value();
  if (d.batch_norm) {
    if (auto st = detail::batch_norm(out, *d.batch_norm, d.name); !st)
      return st.error();
  }
  const std::size_t n = out.shape[0], c = out.shape[1];
  if (auto st = activation_forward(d.activation, out.data.data(), out.data.data(), n, c,
                                   n * c == 0 ? 0 : out.data.size() / (n * c));
      !st) {
    return make_error(st.error().code, d.name + ": " + st.error().message);
  }
  return y;
}

/// Sees (and may change) layer i's input before the layer runs; an error stops the pass.
using sequential_hook = std::function<result<>(std::size_t, io::float_tensor&)>;

/// Runs the manifest's layers in order, layer i described by descs[i] (one per manifest
/// layer), flattening the input of a layer the manifest marks so.
[[nodiscard]] inline result<io::float_tensor> forward_sequential(
    const model_manifest& model, const std::vector<const layer_desc*>& descs, io::float_tensor x,
    unsigned threads, const sequential_hook& hook = {}) {
  if (descs.size() != model.layers.size()) {
    return make_error(errc::invalid_argument, std::to_string(descs.size()) +
                                                  " layer descriptions for a manifest of " +
                                                  std::to_string(model.layers.size()) + " layers");
  }
  for (std::size_t i = 0; i < model.layers.size(); ++i) {
    if (model.layers[i].flatten && x.shape.size() > 2) {
      std::size_t features = 1;
      for (std::size_t d = 1; d < x.shape.size(); ++d)
        features *= x.shape[d];
      x.shape = {x.shape[0], features};
    }
    if (hook) {
      if (auto st = hook(i, x); !st)
        return st.error();
    }
    auto y = run_sequential_layer(model.layers[i], *descs[i], x, threads);
    if (!y)
      return y.error();
    x = std::move(y).value();
  }
  return x;
}

/// Rows [begin, end) of a batch, the range cut to the rows it has.
[[nodiscard]] inline io::float_tensor batch_rows(const io::float_tensor& x, std::size_t begin,
                                                 std::size_t end) {
  if (x.shape.empty())
    return {};
  const std::size_t rows = x.shape[0];
  end = std::min(end, rows);
  begin = std::min(begin, end);
  const std::size_t per = rows == 0 ? 0 : x.data.size() / rows;
  io::float_tensor out{x.shape,
                       {x.data.begin() + static_cast<std::ptrdiff_t>(begin * per),
                        x.data.begin() + static_cast<std::ptrdiff_t>(end * per)}};
  out.shape[0] = end - begin;
  return out;
}

/// The class of each row of [N, K] logits: the index of its largest logit (the first of equal
/// ones); none for a tensor of another rank or K = 0.
[[nodiscard]] inline std::vector<int> top1_classes(const io::float_tensor& logits) {
  if (logits.shape.size() != 2 || logits.shape[1] == 0 ||
      logits.data.size() != logits.shape[0] * logits.shape[1])
    return {};
  const std::size_t n = logits.shape[0], k = logits.shape[1];
  std::vector<int> out(n);
  for (std::size_t b = 0; b < n; ++b) {
    const float* row = logits.data.data() + b * k;
    out[b] = static_cast<int>(std::max_element(row, row + k) - row);
  }
  return out;
}

/// The share of `predicted` classes equal to their label (0 for no predictions).
[[nodiscard]] inline double top1_accuracy(const std::vector<int>& predicted,
                                          const std::vector<float>& labels) {
  std::size_t right = 0;
  for (std::size_t b = 0; b < predicted.size() && b < labels.size(); ++b)
    right += static_cast<float>(predicted[b]) == labels[b] ? 1 : 0;
  return predicted.empty() ? 0.0
                           : static_cast<double>(right) / static_cast<double>(predicted.size());
}

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
