// How many clip ratios an IFMR search tries, shared by the config checks (`ptq check` rejects a
// search that the calibration would refuse) and the numerics.
// Depends on: the standard library.
#pragma once

#include <cmath>
#include <string>

#include "ptq/core/abi.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {
namespace detail {

/// The most candidates one IFMR search may have: each is a pass over the layer's values, so a
/// step far below the toolkit's 0.01 (61 candidates) is a typo, not a finer search.
inline constexpr double ifmr_max_candidates = 1e7;

/// The toolkit's candidate count, ceil((end - start) / step) (the length of its float32 arange),
/// in double; not finite or below 1 when the range or step is invalid.
[[nodiscard]] inline double ifmr_toolkit_candidate_count(double start, double end,
                                                         double step) noexcept {
  return std::ceil((end - start) / step);
}

/// The count of the inclusive rule, floor((end - start) / step + 0.5) + 1 (end included).
[[nodiscard]] inline double ifmr_inclusive_candidate_count(double start, double end,
                                                           double step) noexcept {
  return std::floor((end - start) / step + 0.5) + 1.0;
}

/// "gives K candidates; at most 10000000 are allowed", for the messages that refuse a search.
[[nodiscard]] inline std::string ifmr_too_many_text(double count) {
  const std::string k = count >= 1.0 && count < 1e15 ? std::to_string(static_cast<long long>(count))
                                                     : std::string("too many");
  return "gives " + k + " candidates; at most " +
         std::to_string(static_cast<long long>(ifmr_max_candidates)) + " are allowed";
}

}  // namespace detail
}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
