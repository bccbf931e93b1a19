// From a session layer to an AdaRound problem: the layer geometry from its description and an
// input batch, and the samples (divided by the DMQ factors), solved by the layer's calibrator.
// Depends on: core and algorithms.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "ptq/algorithms/layer/layer_compute.hpp"
#include "ptq/algorithms/weights/ada.hpp"
#include "ptq/core/abi.hpp"
#include "ptq/session/layer.hpp"
#include "ptq/session/session_layer.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {
namespace detail {

/// AdaRound samples of one layer: the geometry they fit and `count` per-sample inputs.
struct ada_samples {
  layer_geometry geometry;
  std::vector<float> data;
  std::size_t count = 0;
};

/// The samples of `input` for layer `d` (Conv2d / ConvTranspose2d: [N, Cin, H, W], N samples;
/// Linear: [..., Cin], every row a sample), divided by the DMQ `factors` (empty: none).
[[nodiscard]] inline result<ada_samples> ada_samples_of(const layer_desc& d,
                                                        const tensor_view& input,
                                                        const std::vector<float>& factors) {
  const std::string at = d.name + " AdaRound input " + shape_string(input.shape) + ": ";
  ada_samples out;
  layer_geometry& g = out.geometry;
  g.type = d.type;
  g.in_channels = layer_input_channels(d);
  g.out_channels = layer_output_channels(d);
  set_conv_attributes(g, d.conv);
  if (d.type == layer_type::linear) {
    if (input.shape.empty() || input.shape.back() != g.in_channels) {
      return make_error(errc::shape_mismatch,
                        at + "the last axis must be Cin = " + std::to_string(g.in_channels));
    }
    out.count = input.size() / g.in_channels;
  } else if (d.type == layer_type::conv2d || d.type == layer_type::conv_transpose2d) {
    if (input.shape.size() != 4 || input.shape[1] != g.in_channels) {
      return make_error(errc::shape_mismatch,
                        at + "expected [N, " + std::to_string(g.in_channels) + ", H, W]");
    }
    out.count = input.shape[0];
    g.in_h = input.shape[2];
    g.in_w = input.shape[3];
    g.kernel_h = d.weight.shape[2];
    g.kernel_w = d.weight.shape[3];
  } else {
    return make_error(errc::invalid_argument,
                      d.name + ": AdaRound quantizes Conv2d, ConvTranspose2d and Linear, not " +
                          std::string(to_string(d.type)));
  }
  if (auto st = validate_geometry(g); !st)
    return make_error(st.error().code, at + st.error().message);
  out.data.resize(input.size());
  input.convert(0, input.size(), out.data.data());
  if (auto st = divide_by_balance_factors(d, factors, out.data.data(), input.shape); !st)
    return make_error(st.error().code, at + st.error().message);
  return out;
}

/// AdaRound of layer `d` (a session layer's description: weights fused and balanced by
/// `factors`, float32 in C order) on the samples of `input`,
/// with the target act(float layer) computed on `float_input`, or on `input` when null, by the
/// calibrator `c` (a layer_calibrator whose weight policy needs samples: its settings, kernels
/// and `quantize_weights(const ada_problem&)`).
template <class Calibrator>
[[nodiscard]] result<ada_result> ada_quantize_layer(const layer_desc& d,
                                                    const std::vector<float>& factors,
                                                    const tensor_view& input,
                                                    const tensor_view* float_input, Calibrator& c) {
  static_assert(Calibrator::needs_samples, "AdaRound needs a calibrator that learns from samples");
  auto samples = ada_samples_of(d, input, factors);
  if (!samples)
    return samples.error();
  ada_problem p;
  p.name = d.name;
  p.geometry = samples.value().geometry;
  p.weight = d.weight.in_place();  // the session's working weight: float32 in C order
  p.bias = d.bias ? d.bias->in_place() : nullptr;
  p.activation = d.activation;
  p.samples = samples.value().count;
  std::vector<float> target;
  if (float_input) {
    auto f = ada_samples_of(d, *float_input, factors);
    if (!f)
      return f.error();
    ada_problem fp = p;
    fp.input = f.value().data.data();
    auto t = ada_float_target(fp, c.kernel_set(), c.weight_settings().threads);
    if (!t)
      return t.error();
    target = std::move(t).value();
    p.target = target.data();
  }
  p.input = samples.value().data.data();
  return c.quantize_weights(p);
}

}  // namespace detail
}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
