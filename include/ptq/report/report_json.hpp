// The calibration report as JSON (`ptq calibrate --report-json`), schema in docs/report.md
// ("ptq-calibration-report", version 1). Full data: every histogram bin of the display
// histogram, every search candidate, every channel's scale. NaN and infinities are written as
// null.
// Depends on: core and nlohmann_json (opt-in, as ptq/config_json.hpp).
#pragma once

#include <cmath>
#include <cstddef>
#include <string>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>

#include "ptq/core/abi.hpp"
#include "ptq/report/report_data.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {

inline constexpr const char* report_schema_name = "ptq-calibration-report";
inline constexpr int report_schema_version = 1;

namespace detail {

using report_json = nlohmann::ordered_json;

[[nodiscard]] inline report_json json_number(double v) {
  return std::isfinite(v) ? report_json(v) : report_json(nullptr);
}

template <class T>
[[nodiscard]] report_json json_numbers(const std::vector<T>& v) {
  report_json a = report_json::array();
  for (const auto x : v) {
    if constexpr (std::is_floating_point_v<T>) {
      a.push_back(json_number(static_cast<double>(x)));
    } else {
      a.push_back(x);
    }
  }
  return a;
}

[[nodiscard]] inline report_json activation_json(const activation_search_stats& a) {
  report_json j;
  j["algorithm"] = std::string(to_string(a.algo));
  j["count"] = a.count;
  j["range"] = {json_number(a.data_min), json_number(a.data_max)};
  j["histogram"] = json_numbers(a.histogram);
  j["clip"] = {json_number(a.clip_min), json_number(a.clip_max)};
  j["percentile_start"] =
      a.has_percentile ? report_json{json_number(a.percentile_min), json_number(a.percentile_max)}
                       : report_json(nullptr);
  j["clipped_below"] = a.clipped_below;
  j["clipped_above"] = a.clipped_above;
  j["clipped_fraction"] = a.count == 0
                              ? report_json(0.0)
                              : report_json(static_cast<double>(a.clipped_below + a.clipped_above) /
                                            static_cast<double>(a.count));
  report_json s;
  s["x_name"] = a.algo == activation_algo::ifmr ? "ratio" : "step";
  s["x"] = json_numbers(a.candidate_x);
  s["clip_lo"] = json_numbers(a.candidate_lo);
  s["clip_hi"] = json_numbers(a.candidate_hi);
  s["loss"] = json_numbers(a.candidate_loss);
  s["best"] = a.best;
  j["search"] = std::move(s);
  return j;
}

}  // namespace detail

/// One layer of the report as JSON (docs/report.md, `layers`): name, type and quant_enable, and
/// for a quantized layer its algorithms, bits, scales, factors, SQNRs and `activation` (the
/// search statistics, null when the layer has none). `ptq calibrate --json` lists the same.
[[nodiscard]] inline nlohmann::ordered_json layer_report_json(const layer_report& l) {
  using detail::json_number;
  using detail::json_numbers;
  detail::report_json x;
  x["name"] = l.name;
  x["type"] = l.type;
  x["quant_enable"] = l.quant_enable;
  if (l.quant_enable) {
    x["weight_algorithm"] = l.weight_algo;
    x["activation_algorithm"] = l.activation_algo;
    x["dmq"] = l.dmq;
    x["weight_bits"] = l.weight_bits;
    x["activation_bits"] = l.activation_bits;
    x["scale_d"] = json_number(l.scale_d);
    x["offset_d"] = l.offset_d;
    x["scale_w"] = json_numbers(l.scale_w);
    x["offset_w"] = json_numbers(l.offset_w);
    x["balance_factors"] = json_numbers(l.balance_factors);
    x["weight_sqnr_db"] = json_number(l.weight_sqnr_db);
    x["activation_sqnr_db"] = json_number(l.activation_sqnr_db);
    x["activation"] = l.activation ? detail::activation_json(*l.activation) : nullptr;
  }
  return x;
}

/// The report as a JSON document (2-space indent, keys in schema order, newline at the end).
[[nodiscard]] inline std::string report_to_json(const calibration_report& r) {
  using detail::json_number;
  detail::report_json j;
  j["schema"] = report_schema_name;
  j["schema_version"] = report_schema_version;
  const auto& s = r.summary;
  detail::report_json sum;
  sum["ptq_version"] = s.ptq_version;
  sum["model"] = s.model;
  sum["config_path"] = s.config_path;
  sum["config_text"] = s.config_text;
  sum["batch_num"] = s.batch_num;
  sum["fp32_accuracy"] = s.fp32_accuracy ? json_number(*s.fp32_accuracy) : nullptr;
  sum["quantized_accuracy"] = s.quantized_accuracy ? json_number(*s.quantized_accuracy) : nullptr;
  sum["activation_sqnr_on"] = s.activation_sqnr_on;
  j["summary"] = std::move(sum);
  detail::report_json layers = detail::report_json::array();
  for (const auto& l : r.layers)
    layers.push_back(layer_report_json(l));
  j["layers"] = std::move(layers);
  detail::report_json sens;
  sens["method"] = r.sensitivity.method;
  detail::report_json ranked = detail::report_json::array();
  for (const auto& e : r.sensitivity.ranked)
    ranked.push_back({{"layer", e.layer}, {"score_db", json_number(e.score_db)}});
  sens["ranked"] = std::move(ranked);
  sens["median_db"] = json_number(r.sensitivity.median_db);
  sens["suggested_skip_layers"] = r.sensitivity.suggested_skip;
  sens["skip_layers_line"] = r.sensitivity.skip_layers_line;
  j["sensitivity"] = std::move(sens);
  // Invalid UTF-8 in a name or the config text is replaced (U+FFFD) rather than thrown on.
  return j.dump(2, ' ', false, detail::report_json::error_handler_t::replace) + "\n";
}

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
