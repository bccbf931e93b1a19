// The layer types ptq calibrates and what each may do (the settings a type cannot take are in
// docs/errors.md, E403), shared by the config layer and the numerics.
// Depends on: the standard library.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>

#include "ptq/core/abi.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {

/// The layer types ptq resolves and calibrates (PyTorch class names).
enum class layer_type : std::uint8_t {
  conv1d,
  conv2d,
  conv3d,
  conv_transpose1d,
  conv_transpose2d,
  linear,
  avg_pool2d,
};

inline constexpr std::array<layer_type, 7> all_layer_types{
    layer_type::conv1d,           layer_type::conv2d,           layer_type::conv3d,
    layer_type::conv_transpose1d, layer_type::conv_transpose2d, layer_type::linear,
    layer_type::avg_pool2d};

/// PyTorch class name of a layer type, e.g. "ConvTranspose2d".
[[nodiscard]] constexpr std::string_view to_string(layer_type t) noexcept {
  switch (t) {
    case layer_type::conv1d:
      return "Conv1d";
    case layer_type::conv2d:
      return "Conv2d";
    case layer_type::conv3d:
      return "Conv3d";
    case layer_type::conv_transpose1d:
      return "ConvTranspose1d";
    case layer_type::conv_transpose2d:
      return "ConvTranspose2d";
    case layer_type::linear:
      return "Linear";
    case layer_type::avg_pool2d:
      return "AvgPool2d";
  }
  return "";
}

[[nodiscard]] constexpr std::optional<layer_type> layer_type_from_string(
    std::string_view name) noexcept {
  for (const auto t : all_layer_types) {
    if (to_string(t) == name)
      return t;
  }
  return std::nullopt;
}

/// ConvTranspose1d or ConvTranspose2d: their weights are [Cin, Cout/groups, k...].
[[nodiscard]] constexpr bool is_conv_transpose(layer_type t) noexcept {
  return t == layer_type::conv_transpose1d || t == layer_type::conv_transpose2d;
}

/// CHANNEL_WISE_TYPES: weights may be quantized per output channel (default on).
[[nodiscard]] constexpr bool supports_channel_wise(layer_type t) noexcept {
  return t != layer_type::linear && t != layer_type::avg_pool2d;
}
/// INT16 activations: not Conv3d, not AvgPool2d, Linear only with a bias.
[[nodiscard]] constexpr bool supports_int16_activation(layer_type t, bool has_bias) noexcept {
  switch (t) {
    case layer_type::conv3d:
    case layer_type::avg_pool2d:
      return false;
    case layer_type::linear:
      return has_bias;
    default:
      return true;
  }
}
/// FUSE_TYPES: Conv+BN fusion.
[[nodiscard]] constexpr bool supports_bn_fusion(layer_type t) noexcept {
  return t == layer_type::conv1d || t == layer_type::conv2d || t == layer_type::conv3d;
}
/// ADA_ROUND_TYPES.
[[nodiscard]] constexpr bool supports_ada_round(layer_type t) noexcept {
  return t == layer_type::conv2d || t == layer_type::conv_transpose2d || t == layer_type::linear;
}
/// DMQ balancer: every type but AvgPool2d.
[[nodiscard]] constexpr bool supports_dmq(layer_type t) noexcept {
  return t != layer_type::avg_pool2d;
}
/// INT6/INT7 weights: Conv2d only.
[[nodiscard]] constexpr bool supports_winograd_bits(layer_type t) noexcept {
  return t == layer_type::conv2d;
}
/// Conv3d activations are always symmetric.
[[nodiscard]] constexpr bool symmetric_only(layer_type t) noexcept {
  return t == layer_type::conv3d;
}

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
