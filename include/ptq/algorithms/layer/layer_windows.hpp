// A layer's geometry as the kernels take it: the windows its convolution GEMMs read
// (kernels/windows.hpp) and a depthwise Conv2d's problem (kernels/depthwise.hpp). For valid
// geometries only (validate_geometry).
// Depends on: kernels.
#pragma once

#include "ptq/algorithms/layer/layer_geometry.hpp"
#include "ptq/kernels/depthwise.hpp"
#include "ptq/kernels/windows.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {

/// The windows of a convolution, per group: for Conv2d over its input, for ConvTranspose2d over
/// its output (the adjoint convolution, whose windows are the input's positions).
[[nodiscard]] inline kernels::window_geometry conv_windows(const layer_geometry& g) noexcept {
  const bool conv = g.type == layer_type::conv2d;
  const std::size_t oh = output_h(g), ow = output_w(g);
  kernels::window_geometry w;
  w.channels = (conv ? g.in_channels : g.out_channels) / g.groups;
  w.img_h = conv ? g.in_h : oh;
  w.img_w = conv ? g.in_w : ow;
  w.kernel_h = g.kernel_h;
  w.kernel_w = g.kernel_w;
  w.stride_h = g.stride_h;
  w.stride_w = g.stride_w;
  w.pad_h = g.pad_h;
  w.pad_w = g.pad_w;
  w.dilation_h = g.dilation_h;
  w.dilation_w = g.dilation_w;
  w.out_h = conv ? oh : g.in_h;
  w.out_w = conv ? ow : g.in_w;
  return w;
}

/// A depthwise Conv2d (groups == in_channels == out_channels) as the direct kernels take it.
[[nodiscard]] inline kernels::depthwise_problem depthwise_problem_of(
    const layer_geometry& g) noexcept {
  kernels::depthwise_problem p;
  p.channels = g.in_channels;
  p.in_h = g.in_h;
  p.in_w = g.in_w;
  p.out_h = output_h(g);
  p.out_w = output_w(g);
  p.kernel_h = g.kernel_h;
  p.kernel_w = g.kernel_w;
  p.stride_h = g.stride_h;
  p.stride_w = g.stride_w;
  p.pad_h = g.pad_h;
  p.pad_w = g.pad_w;
  p.dilation_h = g.dilation_h;
  p.dilation_w = g.dilation_w;
  return p;
}

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
