// What `ptq calibrate` prints: progress on stderr, and the per-layer table (or its JSON form)
// with the accuracy pair of the bundled run and the outputs written.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "command.hpp"
#include "ptq/config/model.hpp"
#include "ptq/detail/float_format.hpp"
#include "ptq/report/report_data.hpp"
#include "ptq/report/report_json.hpp"
#include "ptq/session/calibration_session.hpp"

namespace ptq_cli {

/// The options of `ptq calibrate`.
struct calibrate_args {
  std::string config;
  std::string model;
  std::string weights;
  std::vector<std::string> batches;
  std::string record;
  std::string quant_config;
  std::string fake_quant_weights;
  std::string ada_data;
  std::string ada_float_data;        ///< --ada-float-data: the AdaRound targets' inputs
  std::string dmq_data;              ///< --dmq-data: the DMQ pass's inputs (default: batch 0)
  std::string report;                ///< --report: the HTML page
  std::string report_json;           ///< --report-json
  std::vector<std::string> exports;  ///< --export FORMAT=OUT (export_files.hpp)
  std::string onnx;  ///< --onnx: the float ONNX model the exports key by and rewrite
  std::uint64_t seed = 0;
  unsigned threads = 0;
  std::string memory = "one-pass";  ///< --memory: one-pass or bounded (docs/scale-out.md)
  bool mpi = false;                 ///< --mpi: shard over the MPI ranks (docs/scale-out.md)
  bool order_invariant = false;     ///< --order-invariant: HFMG's order-invariant histogram
  bool json = false;
  bool quiet = false;
  bool timings = false;  ///< --timings: each part's wall time on stderr (phase_timer.hpp)
  /// --auto-accuracy: the accepted test accuracy drop in points (negative: no search)
  double auto_accuracy = -1.0;
};

/// A phase's one-word name in progress lines and timings.
[[nodiscard]] inline const char* phase_key(ptq::session_phase p) noexcept {
  static const char* const names[] = {"fusion", "dmq", "weights", "activations", "done"};
  return names[static_cast<int>(p)];
}

// Progress on stderr: a bar when it is a terminal, plain lines otherwise, nothing when quiet.
// The session reports a fusion step only for the layers it fuses (not those of
// skip_fusion_layers or under do_fusion: false).
struct progress_printer {
  bool quiet = false;
  bool tty = ::isatty(2) != 0;
  mutable bool bar_open = false;  ///< a bar without its final newline is on the terminal

  // The activation phase counts batches: the bar moves with each layer's batch, and a plain
  // line is printed when every layer has a batch more ("activations batch 1/2 (3 layers)").
  void operator()(const ptq::progress_event& e) const {
    if (quiet || e.total == 0)
      return;
    const char* phase = phase_key(e.phase);
    const bool batches = e.batches != 0;
    if (tty) {
      const std::size_t width = 24;
      const std::size_t filled = width * e.done / e.total;
      std::ostringstream what;
      if (batches)
        what << "batch " << e.batch << "/" << e.batches << " " << e.layer;
      else
        what << e.done << "/" << e.total << " " << e.layer;
      std::cerr << "\r" << std::left << std::setw(12) << phase << " [" << std::string(filled, '#')
                << std::string(width - filled, ' ') << "] " << std::setw(32) << what.str()
                << std::flush;
      bar_open = e.done != e.total;
      if (e.done == e.total)
        std::cerr << '\n';
    } else if (!batches) {
      std::cerr << "ptq calibrate: " << phase << " " << e.done << "/" << e.total << " " << e.layer
                << '\n';
    } else if (const std::size_t layers = e.total / e.batches; e.done % layers == 0) {
      std::cerr << "ptq calibrate: " << phase << " batch " << e.done / layers << "/" << e.batches
                << " (" << layers << (layers == 1 ? " layer" : " layers") << ")\n";
    }
  }
  // AdaRound: the iteration and the losses of the current layer.
  void operator()(std::string_view layer, const ptq::ada_progress& e) const {
    if (quiet || e.total == 0)
      return;
    std::ostringstream line;
    line << "ada " << layer << " " << e.iteration << "/" << e.total << " recon "
         << std::setprecision(4) << e.recon_loss << " round " << e.round_loss;
    if (tty) {
      std::cerr << "\r" << std::left << std::setw(70) << line.str() << std::flush;
      if (e.iteration == e.total)
        std::cerr << '\n';
    } else {
      std::cerr << "ptq calibrate: " << line.str() << '\n';
    }
  }
};

inline std::string db(double v) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(1) << v << " dB";
  return s.str();
}

inline std::string shortest(float v) {
  return ptq::detail::python_repr(ptq::detail::toolkit_double(v));
}

/// The session's layers as the report describes them (ptq::layer_report_of), without the
/// search statistics: the table's rows and `--json`'s layers.
inline std::vector<ptq::layer_report> table_layers(const ptq::calibration_session& s,
                                                   const std::vector<double>& asqnr) {
  std::vector<ptq::layer_report> out;
  for (std::size_t i = 0; i < s.layers().size(); ++i) {
    out.push_back(i < asqnr.size() ? ptq::layer_report_of(s.layers()[i], asqnr[i])
                                   : ptq::layer_report_of(s.layers()[i]));
    out.back().activation.reset();
  }
  return out;
}

/// The weight scale column: the scale, or the range of the per-channel ones ("-": no weight).
inline std::string weight_scale_text(const ptq::layer_report& l) {
  if (l.scale_w.empty())
    return "-";
  const auto [lo, hi] = std::minmax_element(l.scale_w.begin(), l.scale_w.end());
  return l.scale_w.size() == 1 ? shortest(*lo) : shortest(*lo) + ".." + shortest(*hi);
}

inline void print_table(const std::vector<ptq::layer_report>& layers) {
  // The name, type and weight-scale columns are as wide as their longest entry (ResNet's
  // "layer1.0.conv1" is wider than the digits model's names, "ConvTranspose2d" than "Conv2d").
  int name_w = 12, type_w = 11, wscale_w = 28;
  for (const auto& l : layers) {
    name_w = std::max(name_w, static_cast<int>(l.name.size()) + 2);
    type_w = std::max(type_w, static_cast<int>(l.type.size()) + 2);
    wscale_w = std::max(wscale_w, static_cast<int>(weight_scale_text(l).size()) + 2);
  }
  std::cout << std::left << std::setw(name_w) << "layer" << std::setw(type_w) << "type"
            << std::setw(14) << "algorithms" << std::setw(7) << "bits" << std::setw(14) << "scale_d"
            << std::setw(9) << "offset_d" << std::setw(wscale_w) << "weight scale" << std::setw(10)
            << "w SQNR"
            << "a SQNR\n";
  for (const auto& l : layers) {
    std::cout << std::left << std::setw(name_w) << l.name << std::setw(type_w) << l.type
              << std::setw(14) << ptq::algorithms_text(l);
    if (!l.quant_enable) {
      std::cout << std::setw(7) << "" << std::setw(14) << "" << std::setw(9) << ""
                << std::setw(wscale_w) << "" << std::setw(10) << "-"
                << "-\n";
      continue;
    }
    std::cout << std::setw(7)
              << "w" + std::to_string(l.weight_bits) + "a" + std::to_string(l.activation_bits)
              << std::setw(14) << shortest(l.scale_d) << std::setw(9) << l.offset_d
              << std::setw(wscale_w) << weight_scale_text(l) << std::setw(10)
              << (std::isnan(l.weight_sqnr_db) ? "-" : db(l.weight_sqnr_db))
              << (std::isnan(l.activation_sqnr_db) ? "-" : db(l.activation_sqnr_db)) << '\n';
  }
}

/// The bundled model's accuracy on its test split, FP32 and fake-quantized, and each image's
/// class.
struct test_accuracy {
  double fp32 = 0.0;
  double quant = 0.0;
  const std::vector<int>* fp32_predictions = nullptr;
  const std::vector<int>* quant_predictions = nullptr;
};

/// The path each --export wrote, as "FORMAT PATH" pairs.
[[nodiscard]] inline std::vector<std::pair<std::string, std::string>> export_targets(
    const calibrate_args& a) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& spec : a.exports) {
    const auto eq = spec.find('=');
    out.emplace_back(spec.substr(0, spec.find_first_of(":=")), spec.substr(eq + 1));
  }
  return out;
}

inline int report(const calibrate_args& a, const ptq::calibration_session& s,
                  const std::vector<double>& asqnr, const test_accuracy* acc, double seconds) {
  const auto layers = table_layers(s, asqnr);
  const double* fp32 = acc ? &acc->fp32 : nullptr;
  const double* quant = acc ? &acc->quant : nullptr;
  if (a.json) {
    nlohmann::ordered_json j;
    j["layers"] = nlohmann::ordered_json::array();
    for (const auto& l : layers)
      j["layers"].push_back(ptq::layer_report_json(l));
    if (acc) {
      j["fp32_accuracy"] = acc->fp32;
      j["quantized_accuracy"] = acc->quant;
      j["fp32_predictions"] = *acc->fp32_predictions;
      j["quantized_predictions"] = *acc->quant_predictions;
    }
    j["ada_seed"] = a.seed;
    j["outputs"] = {{"record", a.record},
                    {"quant_config", a.quant_config},
                    {"fake_quant_weights", a.fake_quant_weights}};
    if (!a.report.empty())
      j["outputs"]["report"] = a.report;
    if (!a.report_json.empty())
      j["outputs"]["report_json"] = a.report_json;
    for (const auto& [format, path] : export_targets(a))
      j["outputs"]["exports"][format] = path;
    std::cout << j.dump(2) << '\n';
    return ptq_cli::exit_ok;
  }
  print_table(layers);
  if (fp32 && quant) {
    std::cout << "\naccuracy on the test split: FP32 " << std::fixed << std::setprecision(2)
              << *fp32 * 100.0 << " %, quantized " << *quant * 100.0 << " % (" << std::showpos
              << (*quant - *fp32) * 100.0 << std::noshowpos << " points)\n";
  }
  std::cout << std::defaultfloat;
  const bool any_ada = std::any_of(s.layers().begin(), s.layers().end(),
                                   [](const auto& l) { return ptq::uses_ada_round(l); });
  if (any_ada)
    std::cout << "AdaRound seed:      " << a.seed << '\n';
  if (!a.record.empty())
    std::cout << "record:             " << a.record << '\n';
  if (!a.quant_config.empty())
    std::cout << "quant config:       " << a.quant_config << '\n';
  if (!a.fake_quant_weights.empty())
    std::cout << "fake-quant weights: " << a.fake_quant_weights << '\n';
  if (!a.report.empty())
    std::cout << "report:             " << a.report << '\n';
  if (!a.report_json.empty())
    std::cout << "report JSON:        " << a.report_json << '\n';
  for (const auto& [format, path] : export_targets(a))
    std::cout << "export " << format << ": "
              << std::string(format.size() < 11 ? 11 - format.size() : 1, ' ') << path << '\n';
  std::cout << "calibrated in " << std::setprecision(3) << seconds << " s\n";
  return ptq_cli::exit_ok;
}

}  // namespace ptq_cli
