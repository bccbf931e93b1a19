// The calibration report's data (docs/report.md): plain aggregates filled from what a finished
// calibration session already holds - per layer the algorithms, scales, weight and activation
// SQNR, the activation search statistics (session_options::keep_search_stats) - plus a ranked
// sensitivity list and a `skip_layers` line to paste into the config. The writers are
// report/report_json.hpp and report/html.hpp; an engine that embeds ptq fills a calibration_report
// with make_report and writes the same page the tool writes. Errors E1301-E1303 (docs/errors.md).
// Depends on: core, detail, algorithms and session.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ptq/algorithms/activations/search_stats.hpp"
#include "ptq/core/error.hpp"
#include "ptq/detail/text_escape.hpp"
#include "ptq/session/calibration_session.hpp"
#include "ptq/version.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {

/// What the run was: shown at the top of the page.
struct report_summary {
  std::string model;        ///< "the bundled digits CNN", a manifest path, an engine's name
  std::string config_path;  ///< the simple config
  std::string config_text;  ///< its text, shown as it was read
  std::size_t batch_num = 0;
  std::optional<double> fp32_accuracy;  ///< where known (the bundled model: the test split)
  std::optional<double> quantized_accuracy;
  /// Where the activation SQNR was measured ("the test split", "the last calibration batch").
  std::string activation_sqnr_on;
  std::string ptq_version = PTQ_VERSION_STRING;
};

/// One layer of the report.
struct layer_report {
  std::string name;
  std::string type;
  bool quant_enable = true;
  std::string weight_algo;      ///< "arq", "ada" or "-" (AvgPool2d has no weight)
  std::string activation_algo;  ///< "ifmr" or "hfmg"
  bool dmq = false;
  int weight_bits = 0;
  int activation_bits = 0;
  float scale_d = 0.0f;
  std::int32_t offset_d = 0;
  std::vector<float> scale_w;
  std::vector<std::int32_t> offset_w;
  std::vector<float> balance_factors;  ///< DMQ factors (Cin), empty without DMQ
  double weight_sqnr_db = std::numeric_limits<double>::quiet_NaN();      ///< NaN: no weight
  double activation_sqnr_db = std::numeric_limits<double>::quiet_NaN();  ///< NaN: not measured
  std::optional<activation_search_stats> activation;
};

/// A layer's algorithms in one word, as the tool's table and the report page show them:
/// "arq/ifmr", "ada/hfmg+dmq", "-/ifmr" (AvgPool2d has no weight), or "skipped".
[[nodiscard]] inline std::string algorithms_text(const layer_report& l) {
  if (!l.quant_enable)
    return "skipped";
  return l.weight_algo + "/" + l.activation_algo + (l.dmq ? "+dmq" : "");
}

/// One layer of the report from the session's layer once it is calibrated: its algorithms,
/// bits, scales, DMQ factors and weight SQNR, the activation SQNR given (NaN: not measured), and
/// the activation search statistics when the session kept them (keep_search_stats).
[[nodiscard]] inline layer_report layer_report_of(
    const session_layer& l, double activation_sqnr_db = std::numeric_limits<double>::quiet_NaN()) {
  layer_report r;
  r.name = l.desc.name;
  r.type = std::string(to_string(l.desc.type));
  r.quant_enable = l.plan.quant_enable;
  if (!r.quant_enable || !l.weight_params || !l.activation_params)
    return r;
  const bool pool = l.desc.type == layer_type::avg_pool2d;
  r.weight_algo = pool ? "-" : (uses_ada_round(l) ? "ada" : "arq");
  r.activation_algo = std::string(to_string(l.plan.activation.algo));
  r.dmq = !l.balance_factors.empty();
  r.weight_bits = l.weight_params->bits;
  r.activation_bits = l.activation_params->bits;
  r.scale_d = l.activation_params->scale;
  r.offset_d = l.activation_params->offset;
  if (!pool) {
    r.scale_w = l.weight_params->scale;
    r.offset_w = l.weight_params->offset;
    r.weight_sqnr_db = l.weight_sqnr_db;
  }
  r.balance_factors = l.balance_factors;
  r.activation_sqnr_db = activation_sqnr_db;
  r.activation = l.activation_stats;
  return r;
}

/// One layer's sensitivity score: higher is better (dB).
struct sensitivity_entry {
  std::string layer;
  double score_db = std::numeric_limits<double>::quiet_NaN();
};

/// The sensitivity section: scores ranked worst first, the layers suggested for skip_layers and
/// the config line that skips them (both empty when no layer stands out).
struct sensitivity_report {
  std::string method;  ///< how each score was measured
  std::vector<sensitivity_entry> ranked;
  /// The lower median of the finite scores, the reference of a suggestion (NaN: none finite).
  double median_db = std::numeric_limits<double>::quiet_NaN();
  std::vector<std::string> suggested_skip;
  std::string skip_layers_line;
};

/// Everything the report shows.
struct calibration_report {
  report_summary summary;
  std::vector<layer_report> layers;
  sensitivity_report sensitivity;
};

/// A suggestion is a layer this many dB below the median score: one that stands out. When the
/// layers are close (every one near 40 dB, say) nothing is suggested, as skipping the worst of
/// equals gains little and costs a float layer.
inline constexpr double sensitivity_margin_db = 6.0;

/// The config line that skips `layers`: `skip_layers : "a"` for one, `skip_layers : ["a", "b"]`
/// for more (protobuf text list syntax, which the config parser reads); empty for none.
[[nodiscard]] inline std::string skip_layers_line(const std::vector<std::string>& layers) {
  if (layers.empty())
    return {};
  if (layers.size() == 1)
    return "skip_layers : " + detail::quote_text(layers.front());
  std::string s = "skip_layers : [";
  for (std::size_t i = 0; i < layers.size(); ++i)
    s += (i == 0 ? "" : ", ") + detail::quote_text(layers[i]);
  return s + "]";
}

/// Ranks the scores worst first (NaN scores last, ties in the given order) and suggests the
/// layers more than sensitivity_margin_db below the median finite score, if any.
[[nodiscard]] inline sensitivity_report rank_sensitivity(std::vector<sensitivity_entry> scores,
                                                         std::string method) {
  sensitivity_report out;
  out.method = std::move(method);
  std::stable_sort(scores.begin(), scores.end(),
                   [](const sensitivity_entry& a, const sensitivity_entry& b) {
                     if (std::isnan(a.score_db) || std::isnan(b.score_db))
                       return !std::isnan(a.score_db) && std::isnan(b.score_db);
                     return a.score_db < b.score_db;
                   });
  std::vector<double> finite;
  for (const auto& e : scores) {
    if (!std::isnan(e.score_db))
      finite.push_back(e.score_db);
  }
  if (!finite.empty()) {
    // finite is sorted ascending: the lower median of an even count.
    out.median_db = finite[(finite.size() - 1) / 2];
    for (const auto& e : scores) {
      if (!std::isnan(e.score_db) && e.score_db < out.median_db - sensitivity_margin_db)
        out.suggested_skip.push_back(e.layer);
    }
  }
  out.skip_layers_line = skip_layers_line(out.suggested_skip);
  out.ranked = std::move(scores);
  return out;
}

/// A layer's output SQNR estimated from its weight and input SQNR, the two noises taken as
/// independent: -10·log10(10^(-w/10) + 10^(-a/10)). NaN when neither is known; the known one
/// alone when the other is not.
[[nodiscard]] inline double combined_sqnr_db(double weight_db, double activation_db) noexcept {
  const bool w = !std::isnan(weight_db), a = !std::isnan(activation_db);
  if (!w && !a)
    return std::numeric_limits<double>::quiet_NaN();
  if (!w)
    return activation_db;
  if (!a)
    return weight_db;
  const double noise = std::pow(10.0, -weight_db / 10.0) + std::pow(10.0, -activation_db / 10.0);
  return noise == 0.0 ? std::numeric_limits<double>::infinity() : -10.0 * std::log10(noise);
}

/// The sensitivity of a run without a network (calibrate_from_files): per quantized layer, the
/// combined_sqnr_db of its weight SQNR and the activation SQNR measured by the caller (the last
/// batch).
[[nodiscard]] inline std::vector<sensitivity_entry> estimated_sensitivity(
    const std::vector<layer_report>& layers) {
  std::vector<sensitivity_entry> out;
  for (const auto& l : layers) {
    if (l.quant_enable)
      out.push_back({l.name, combined_sqnr_db(l.weight_sqnr_db, l.activation_sqnr_db)});
  }
  return out;
}

/// The report of a finished session `s`, created with session_options::keep_search_stats.
/// `activation_sqnr_db`: per layer in session order (NaN where unknown), or empty.
/// `sensitivity`: per-layer scores (any order; layers of the session), or empty for the
/// estimate from weight and activation SQNR (estimated_sensitivity). Errors: E1301 (the session
/// is not done), E1302 (a quantized layer has no search statistics), E1303 (an SQNR list of the
/// wrong length, a score for an unknown layer).
[[nodiscard]] inline result<calibration_report> make_report(
    const calibration_session& s, const std::vector<double>& activation_sqnr_db,
    report_summary summary, std::vector<sensitivity_entry> sensitivity = {},
    std::string sensitivity_method = {}) {
  if (s.phase() != session_phase::done) {
    return make_error(errc::report_session_incomplete,
                      "report: the session is in the " + std::string(to_string(s.phase())) +
                          " phase; a report needs every quantized layer calibrated",
                      "call make_report after the last batch (when record() succeeds)");
  }
  if (!activation_sqnr_db.empty() && activation_sqnr_db.size() != s.layers().size()) {
    return make_error(errc::report_input_invalid,
                      "report: " + std::to_string(activation_sqnr_db.size()) +
                          " activation SQNR values for " + std::to_string(s.layers().size()) +
                          " layers");
  }
  calibration_report rep;
  rep.summary = std::move(summary);
  if (rep.summary.batch_num == 0)
    rep.summary.batch_num = s.plan().batch_num;
  for (std::size_t i = 0; i < s.layers().size(); ++i) {
    const auto& l = s.layers()[i];
    if (l.plan.quant_enable && !l.activation_stats) {
      return make_error(errc::report_stats_missing,
                        "report: layer '" + l.desc.name + "' has no activation search statistics",
                        "create the session with session_options::keep_search_stats = true");
    }
    rep.layers.push_back(activation_sqnr_db.empty() ? layer_report_of(l)
                                                    : layer_report_of(l, activation_sqnr_db[i]));
  }
  if (sensitivity.empty()) {
    sensitivity = estimated_sensitivity(rep.layers);
    if (sensitivity_method.empty()) {
      sensitivity_method =
          "estimated output SQNR of each quantized layer: its weight SQNR and its activation "
          "SQNR combined as independent noises";
    }
  } else {
    for (const auto& e : sensitivity) {
      if (s.find(e.layer) == nullptr) {
        return make_error(errc::report_input_invalid, "report: a sensitivity score names layer '" +
                                                          e.layer +
                                                          "', which is not in the session");
      }
    }
  }
  rep.sensitivity = rank_sensitivity(std::move(sensitivity), std::move(sensitivity_method));
  return rep;
}

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
