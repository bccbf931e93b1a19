// The geometry of a layer AdaRound optimizes (Linear, Conv2d, ConvTranspose2d): the PyTorch
// module's hyper-parameters plus the input's spatial size, the output size PyTorch computes, the
// sizes of the per-sample tensors and the weight, and the checks PyTorch applies to them.
// Depends on: core.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ptq/core/conv_attributes.hpp"
#include "ptq/core/error.hpp"
#include "ptq/core/layer_type.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {

/// A layer's shape. Linear uses in_channels and out_channels only (in_features, out_features);
/// the other fields are ignored for it. The defaults are PyTorch's (a 1x1 kernel, stride 1).
struct layer_geometry {
  layer_type type = layer_type::conv2d;
  std::size_t in_channels = 0;
  std::size_t out_channels = 0;
  std::size_t groups = 1;
  std::size_t kernel_h = 1;
  std::size_t kernel_w = 1;
  std::size_t stride_h = 1;
  std::size_t stride_w = 1;
  std::size_t pad_h = 0;
  std::size_t pad_w = 0;
  std::size_t dilation_h = 1;
  std::size_t dilation_w = 1;
  std::size_t output_padding_h = 0;  ///< ConvTranspose2d only
  std::size_t output_padding_w = 0;
  std::size_t in_h = 1;  ///< spatial size of the input (Conv2d, ConvTranspose2d)
  std::size_t in_w = 1;
};

namespace detail {

/// A 2-d attribute from PyTorch's list form: empty → fallback, one value → both axes.
inline void attribute_pair(const std::vector<std::size_t>& v, std::size_t fallback, std::size_t& h,
                           std::size_t& w) noexcept {
  h = v.empty() ? fallback : v[0];
  w = v.empty() ? fallback : (v.size() == 1 ? v[0] : v[1]);
}

}  // namespace detail

/// Sets the 2-d stride, padding, dilation, output padding and groups of `g` from a conv's
/// attributes (PyTorch's list form, as the model manifest holds them: docs/calibrate.md).
inline void set_conv_attributes(layer_geometry& g, const conv_attributes& conv) noexcept {
  detail::attribute_pair(conv.stride, 1, g.stride_h, g.stride_w);
  detail::attribute_pair(conv.padding, 0, g.pad_h, g.pad_w);
  detail::attribute_pair(conv.dilation, 1, g.dilation_h, g.dilation_w);
  detail::attribute_pair(conv.output_padding, 0, g.output_padding_h, g.output_padding_w);
  g.groups = conv.groups;
}

/// Conv2d output extent along one axis: floor((in + 2p - d(k-1) - 1) / s) + 1; <= 0 when the
/// dilated kernel does not fit in the padded input.
[[nodiscard]] constexpr std::int64_t conv_output_extent(std::int64_t in, std::int64_t k,
                                                        std::int64_t s, std::int64_t p,
                                                        std::int64_t d) noexcept {
  const std::int64_t span = in + 2 * p - d * (k - 1) - 1;
  return span < 0 ? 0 : span / s + 1;
}

/// ConvTranspose2d output extent along one axis: (in - 1)s - 2p + d(k-1) + output_padding + 1.
[[nodiscard]] constexpr std::int64_t conv_transpose_output_extent(std::int64_t in, std::int64_t k,
                                                                  std::int64_t s, std::int64_t p,
                                                                  std::int64_t d,
                                                                  std::int64_t op) noexcept {
  return (in - 1) * s - 2 * p + d * (k - 1) + op + 1;
}

namespace detail {
[[nodiscard]] constexpr std::int64_t as_i64(std::size_t v) noexcept {
  return static_cast<std::int64_t>(v);
}
[[nodiscard]] inline std::int64_t output_extent(const layer_geometry& g, bool h) noexcept {
  const std::int64_t in = as_i64(h ? g.in_h : g.in_w), k = as_i64(h ? g.kernel_h : g.kernel_w),
                     s = as_i64(h ? g.stride_h : g.stride_w), p = as_i64(h ? g.pad_h : g.pad_w),
                     d = as_i64(h ? g.dilation_h : g.dilation_w),
                     op = as_i64(h ? g.output_padding_h : g.output_padding_w);
  switch (g.type) {
    case layer_type::conv2d:
      return conv_output_extent(in, k, s, p, d);
    case layer_type::conv_transpose2d:
      return conv_transpose_output_extent(in, k, s, p, d, op);
    default:
      return 1;
  }
}
}  // namespace detail

/// Output height / width (1 for Linear). Only meaningful for a geometry that validates.
[[nodiscard]] inline std::size_t output_h(const layer_geometry& g) noexcept {
  const std::int64_t v = detail::output_extent(g, true);
  return v > 0 ? static_cast<std::size_t>(v) : 0;
}
[[nodiscard]] inline std::size_t output_w(const layer_geometry& g) noexcept {
  const std::int64_t v = detail::output_extent(g, false);
  return v > 0 ? static_cast<std::size_t>(v) : 0;
}

/// Floats of one sample's input: [cin, in_h, in_w], Linear [cin].
[[nodiscard]] inline std::size_t input_size(const layer_geometry& g) noexcept {
  return g.type == layer_type::linear ? g.in_channels : g.in_channels * g.in_h * g.in_w;
}
/// Floats of one sample's output: [cout, out_h, out_w], Linear [cout].
[[nodiscard]] inline std::size_t output_size(const layer_geometry& g) noexcept {
  return g.type == layer_type::linear ? g.out_channels : g.out_channels * output_h(g) * output_w(g);
}
/// Floats of the weight (PyTorch layout: Conv2d [cout, cin/g, kh, kw], ConvTranspose2d
/// [cin, cout/g, kh, kw], Linear [cout, cin]).
[[nodiscard]] inline std::size_t weight_size(const layer_geometry& g) noexcept {
  if (g.type == layer_type::linear)
    return g.out_channels * g.in_channels;
  return g.groups == 0 ? 0 : g.in_channels * g.out_channels / g.groups * g.kernel_h * g.kernel_w;
}

/// Checks a geometry as PyTorch does: a supported type, positive sizes, groups dividing both
/// channel counts, output_padding smaller than the stride or the dilation (ConvTranspose2d only)
/// and a positive output size.
[[nodiscard]] inline result<> validate_geometry(const layer_geometry& g) {
  const std::string name(to_string(g.type));
  const auto fail = [&name](errc code, const std::string& what) -> result<> {
    return make_error(code, name + " geometry: " + what);
  };
  if (!supports_ada_round(g.type))
    return fail(errc::invalid_argument, "only Linear, Conv2d and ConvTranspose2d");
  if (g.in_channels == 0 || g.out_channels == 0) {
    return fail(errc::invalid_argument, "in_channels (" + std::to_string(g.in_channels) +
                                            ") and out_channels (" +
                                            std::to_string(g.out_channels) + ") must be positive");
  }
  if (g.type == layer_type::linear)
    return {};
  if (g.groups == 0)
    return fail(errc::invalid_argument, "groups must be positive");
  if (g.in_channels % g.groups != 0 || g.out_channels % g.groups != 0) {
    return fail(errc::shape_mismatch, "groups (" + std::to_string(g.groups) +
                                          ") must divide in_channels (" +
                                          std::to_string(g.in_channels) + ") and out_channels (" +
                                          std::to_string(g.out_channels) + ")");
  }
  if (g.kernel_h == 0 || g.kernel_w == 0 || g.stride_h == 0 || g.stride_w == 0 ||
      g.dilation_h == 0 || g.dilation_w == 0) {
    return fail(errc::invalid_argument, "kernel size, stride and dilation must be positive");
  }
  if (g.in_h == 0 || g.in_w == 0) {
    return fail(errc::invalid_argument, "input size " + std::to_string(g.in_h) + "x" +
                                            std::to_string(g.in_w) + " is empty");
  }
  // Keeps every index product far from overflow (and std::int64_t output extents exact).
  constexpr std::size_t limit = std::size_t{1} << 24;
  for (const std::size_t v :
       {g.kernel_h, g.kernel_w, g.stride_h, g.stride_w, g.pad_h, g.pad_w, g.dilation_h,
        g.dilation_w, g.in_h, g.in_w, g.output_padding_h, g.output_padding_w}) {
    if (v > limit)
      return fail(errc::out_of_range, "a size exceeds 2^24");
  }
  if (g.type == layer_type::conv2d) {
    if (g.output_padding_h != 0 || g.output_padding_w != 0)
      return fail(errc::invalid_argument, "output_padding is for ConvTranspose2d only");
  } else {
    const bool bad_h = g.output_padding_h >= g.stride_h && g.output_padding_h >= g.dilation_h;
    const bool bad_w = g.output_padding_w >= g.stride_w && g.output_padding_w >= g.dilation_w;
    if (bad_h || bad_w) {
      return fail(errc::invalid_argument, "output_padding (" + std::to_string(g.output_padding_h) +
                                              ", " + std::to_string(g.output_padding_w) +
                                              ") must be smaller than either stride or dilation");
    }
  }
  const std::int64_t oh = detail::output_extent(g, true), ow = detail::output_extent(g, false);
  if (oh <= 0 || ow <= 0) {
    return fail(errc::shape_mismatch, "output size " + std::to_string(oh) + "x" +
                                          std::to_string(ow) + " is not positive (input " +
                                          std::to_string(g.in_h) + "x" + std::to_string(g.in_w) +
                                          ", kernel " + std::to_string(g.kernel_h) + "x" +
                                          std::to_string(g.kernel_w) + ")");
  }
  return {};
}

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
