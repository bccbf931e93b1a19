// The toolkit's list of quantizable type names, for `skip_layer_types` and
// `override_layer_types`; the layer types themselves are in core.
// Depends on: core.
#pragma once

#include <array>
#include <string_view>

#include "ptq/core/abi.hpp"
#include "ptq/core/layer_type.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {

/// Every type name the toolkit accepts in `skip_layer_types` and `override_layer_types`
/// (QUANTIZABLE_TYPES). GRU and LSTM are valid there although ptq does not calibrate them.
inline constexpr std::array<std::string_view, 9> quantizable_type_names{
    "Conv2d",          "Conv3d", "Linear", "ConvTranspose2d", "AvgPool2d", "Conv1d",
    "ConvTranspose1d", "GRU",    "LSTM"};

[[nodiscard]] constexpr bool is_quantizable_type_name(std::string_view name) noexcept {
  for (const auto n : quantizable_type_names) {
    if (n == name)
      return true;
  }
  return false;
}

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
