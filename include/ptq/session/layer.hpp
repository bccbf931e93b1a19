// How an inference engine describes its quantizable layers to a calibration session: type,
// weights (tensor views of the engine's own memory, native PyTorch layout), conv attributes, a
// following BatchNorm and the following activation.
// Depends on: core, config and algorithms.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ptq/algorithms/layer/activation_fn.hpp"
#include "ptq/algorithms/layer/conv_bn_fusion.hpp"
#include "ptq/config/layer_types.hpp"
#include "ptq/config/plan.hpp"
#include "ptq/core/abi.hpp"
#include "ptq/core/conv_attributes.hpp"
#include "ptq/core/tensor_view.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {

/// One quantizable layer of the caller's model. The views are read while
/// calibration_session::create runs; the session keeps what it needs.
struct layer_desc {
  std::string name;
  layer_type type = layer_type::conv2d;
  tensor_view weight;               ///< native layout, any dtype and strides; none for AvgPool2d
  std::optional<tensor_view> bias;  ///< [Cout]
  /// Where the session keeps the layer's weight as the phases change it (fused, balanced,
  /// fake-quantized): float32 in C order, weight.size() values, valid for the session's life.
  /// The weight's own memory quantizes it where it lies (when it is float32 in C order; the
  /// engine's float weights are then gone); null: a buffer of the session's.
  float* weight_out = nullptr;
  conv_attributes conv;
  std::optional<batch_norm_params> batch_norm;  ///< an eval-mode BN that consumes this layer
  activation_desc activation;
};

/// Input channels of a layer from its weight (0 for AvgPool2d or a malformed weight).
[[nodiscard]] inline std::size_t layer_input_channels(const layer_desc& l) {
  const auto& s = l.weight.shape;
  if (l.type == layer_type::avg_pool2d || s.size() < 2)
    return 0;
  if (is_conv_transpose(l.type))
    return s[0];
  if (l.type == layer_type::linear)
    return s[1];
  return s[1] * l.conv.groups;
}

/// Output channels of a layer from its weight (0 for AvgPool2d).
[[nodiscard]] inline std::size_t layer_output_channels(const layer_desc& l) {
  const auto& s = l.weight.shape;
  if (l.type == layer_type::avg_pool2d || s.size() < 2)
    return 0;
  if (is_conv_transpose(l.type))
    return s[1] * l.conv.groups;
  return s[0];
}

/// The layer's description by name, type and channels (config/plan.hpp), as the config's
/// resolution and the record's checks take it: the one conversion from a layer_desc.
[[nodiscard]] inline layer_info layer_info_of(const layer_desc& l) {
  layer_info i;
  i.name = l.name;
  i.type = l.type;
  i.has_bias = l.bias.has_value();
  if (const auto cin = layer_input_channels(l); cin != 0)
    i.in_channels = static_cast<std::uint32_t>(cin);
  if (const auto cout = layer_output_channels(l); cout != 0)
    i.out_channels = static_cast<std::uint32_t>(cout);
  i.groups = static_cast<std::uint32_t>(l.conv.groups);
  return i;
}

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
