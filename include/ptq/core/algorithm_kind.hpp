// The calibration algorithms by name, shared by the config layer (which picks them) and the
// numerics (which run them).
// Depends on: the standard library.
#pragma once

#include <cstdint>
#include <string_view>

#include "ptq/core/abi.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {

/// Activation calibration: IFMR (search on the clip maximum) or HFMG (histogram, L2).
enum class activation_algo : std::uint8_t { ifmr, hfmg };
/// Weight calibration: ARQ (min/max) or ADA (AdaRound).
enum class weight_algo : std::uint8_t { arq, ada };

/// The detailed JSON config's names: "ifmr", "hfmg".
[[nodiscard]] constexpr std::string_view to_string(activation_algo a) noexcept {
  return a == activation_algo::ifmr ? "ifmr" : "hfmg";
}
/// The detailed JSON config's names: "arq_quantize", "ada_quantize".
[[nodiscard]] constexpr std::string_view to_string(weight_algo a) noexcept {
  return a == weight_algo::arq ? "arq_quantize" : "ada_quantize";
}

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
