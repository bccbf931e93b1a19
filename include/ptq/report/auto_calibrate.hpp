// Accuracy-based automatic calibration (docs/calibrate.md, "Automatic calibration"): the
// toolkit's BinarySearch over how many of the most sensitive layers to keep in float. The
// layers are ranked by the report's sensitivity (the worst score first: estimated_sensitivity
// of the SQNRs the calibration measured, or any score the caller has), with no pass of its own;
// the caller's evaluator re-calibrates with the layers it is given in skip_layers and says
// whether the accuracy is good enough. The search asks for at most 1 + floor(log2(N)) + 1
// evaluations of N ranked layers: every layer quantized first, then the binary search; the
// other endpoint (every ranked layer in float) is never evaluated.
// Depends on: core.
#pragma once

#include <cstddef>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "ptq/core/abi.hpp"
#include "ptq/core/error.hpp"
#include "ptq/report/report_data.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {

/// What the evaluator says of one calibration: accepted (the accuracy drop is within the
/// caller's tolerance) and the metric it measured (for the log).
struct auto_calibration_verdict {
  bool accepted = false;
  double metric = std::numeric_limits<double>::quiet_NaN();
};

/// One evaluation of the search: the layers kept in float and the verdict.
struct auto_calibration_step {
  std::vector<std::string> skip_layers;
  auto_calibration_verdict verdict;
};

struct auto_calibration_result {
  std::vector<std::string> ranking;  ///< the ranked layers, most sensitive first
  /// The fewest most sensitive layers whose float keeps the accuracy (empty: every layer
  /// quantized is accepted); every ranked layer when no evaluated set was accepted (the
  /// toolkit's ALL_ROLL_BACK).
  std::vector<std::string> skip_layers;
  bool accepted = false;  ///< whether skip_layers is a set the evaluator accepted
  std::vector<auto_calibration_step> steps;  ///< in the order evaluated
};

/// The toolkit's BinarySearch strategy on `scores` (one per quantized layer; NaN scores rank
/// last, as rank_sensitivity ranks them). `evaluate(skip_layers)` returns
/// result<auto_calibration_verdict>; its error ends the search and is returned.
template <class Evaluate>
[[nodiscard]] result<auto_calibration_result> auto_calibrate(std::vector<sensitivity_entry> scores,
                                                             Evaluate&& evaluate) {
  auto_calibration_result out;
  for (const auto& e : rank_sensitivity(std::move(scores), "").ranked)
    out.ranking.push_back(e.layer);
  const auto run = [&](std::size_t k) -> result<bool> {
    std::vector<std::string> skip(out.ranking.begin(),
                                  out.ranking.begin() + static_cast<std::ptrdiff_t>(k));
    result<auto_calibration_verdict> v = evaluate(skip);
    if (!v)
      return v.error();
    out.steps.push_back({skip, v.value()});
    if (v.value().accepted) {
      out.skip_layers = std::move(skip);
      out.accepted = true;
    }
    return v.value().accepted;
  };
  auto global = run(0);
  if (!global)
    return global.error();
  if (global.value() || out.ranking.empty())
    return out;
  // Roll back layers [0, mid] (mid + 1 of them) while the interval [left, right] is not empty:
  // an accepted count narrows from above, a refused one from below.
  std::ptrdiff_t left = 0;
  std::ptrdiff_t right = static_cast<std::ptrdiff_t>(out.ranking.size()) - 1;
  const auto all = static_cast<std::ptrdiff_t>(out.ranking.size());
  while (left <= right) {
    const std::ptrdiff_t mid = (left + right) / 2;
    if (mid + 1 == all)
      break;  // every layer in float: the toolkit's ALL_ROLL_BACK, not evaluated
    auto ok = run(static_cast<std::size_t>(mid) + 1);
    if (!ok)
      return ok.error();
    if (ok.value()) {
      right = mid - 1;
    } else {
      left = mid + 1;
    }
  }
  if (!out.accepted)
    out.skip_layers = out.ranking;  // the all-float endpoint: nothing else was accepted
  return out;
}

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
