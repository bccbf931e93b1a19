// The histogram sizes HFMG takes, shared by the config checks (`num_of_bins`) and the numerics
// (hfmg_check_settings), so both refuse the same values with the same words.
// Depends on: the standard library.
#pragma once

#include <cstdint>

#include "ptq/core/abi.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {

/// Whether the toolkit's HFMG supports `n` bins: 1024, 2048, 4096 or 8192.
[[nodiscard]] constexpr bool is_supported_num_of_bins(std::uint64_t n) noexcept {
  return n == 1024 || n == 2048 || n == 4096 || n == 8192;
}

/// The end of the message for an unsupported bin count.
inline constexpr const char* supported_num_of_bins_text =
    " is not supported; use 1024, 2048, 4096 or 8192";

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
