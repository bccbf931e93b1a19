// What the two halves of `ptq calibrate` share (cmd_calibrate.cpp: the command line and a run
// from model files; calibrate_bundled.cpp: the bundled digits model): the error printing, the
// outputs a run writes (checked before any work, rendered after it) and the session's
// diagnostics.
#pragma once

#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include "calibrate_report.hpp"
#include "export_files.hpp"
#include "onnx_export.hpp"
#include "outputs.hpp"
#include "ptq/config_json.hpp"
#include "ptq/core/visible_text.hpp"
#include "ptq/io/safetensors.hpp"
#include "ptq/session/calibration_session.hpp"
#include "ptq/session/fake_quant_weights.hpp"
#include "ptq/session/model_manifest.hpp"
#include "ptq/session/record.hpp"
#include "report_outputs.hpp"

namespace ptq_cli::calibrate {

using ptq_cli::calibrate_args;
using ptq_cli::named_path;

/// An error naming a file renders as `path: error: ...`; any other as `ptq calibrate: error:`.
inline int fail(const ptq::error& e) {
  if (e.path.empty())
    std::cerr << "ptq calibrate: ";
  std::cerr << ptq::format_error(e);
  return ptq_cli::exit_error;
}

inline int fail_usage(const std::string& message) {
  std::cerr << "ptq calibrate: error: "
            << ptq::detail::visible_text(message, ptq::detail::max_message_bytes) << '\n';
  return ptq_cli::exit_usage;
}

inline ptq::error in_file(ptq::error e, const std::string& path) {
  if (e.path.empty())
    e.path = path;
  return e;
}

inline std::vector<named_path> outputs_of(const calibrate_args& a) {
  std::vector<named_path> out;
  if (!a.record.empty())
    out.push_back({"--record", a.record});
  if (!a.quant_config.empty())
    out.push_back({"--quant-config", a.quant_config});
  if (!a.fake_quant_weights.empty())
    out.push_back({"--fake-quant-weights", a.fake_quant_weights});
  if (!a.report.empty())
    out.push_back({"--report", a.report});
  if (!a.report_json.empty())
    out.push_back({"--report-json", a.report_json});
  ptq_cli::add_export_paths(a.exports, out);
  return out;
}

/// How the session ran each layer, for the ONNX exports: the fake-quantized (and fused,
/// balanced) weights of the quantized layers, the fused float weights of the others it fused.
inline ptq_cli::calibration_layers calibration_of(const ptq::calibration_session& s) {
  ptq_cli::calibration_layers out;
  for (const auto& l : s.layers()) {
    if (!l.plan.quant_enable && !l.fused)
      continue;
    ptq_cli::calibrated_layer c;
    c.fused = l.fused;
    c.weight = ptq::copy_values(l.desc.weight);
    c.bias = l.bias_storage;
    out.emplace(l.desc.name, std::move(c));
  }
  return out;
}

/// The contents of every requested output. `manifest_path` names the manifest of `model`.
inline ptq::result<std::vector<ptq_cli::output_file>> render_outputs(
    const calibrate_args& a, const ptq::calibration_session& s, const ptq::record_file& rec,
    const ptq::io::safetensors_file& weights, const ptq::model_manifest& model,
    const std::string& manifest_path, const ptq_cli::report_context& report) {
  std::vector<ptq_cli::output_file> out;
  if (auto st = ptq_cli::add_report_outputs(a, s, report, out); !st)
    return st.error();
  if (!a.record.empty())
    out.push_back({{"--record", a.record}, ptq::write_record(rec)});
  if (!a.quant_config.empty())
    out.push_back({{"--quant-config", a.quant_config}, ptq::to_toolkit_json(s.plan())});
  if (!a.fake_quant_weights.empty()) {
    auto t = ptq::fake_quant_weights(s, model, weights);
    if (!t)
      return t.error();
    auto tensors = std::make_shared<std::vector<ptq::io::named_tensor>>();
    for (auto& x : t.value())
      tensors->push_back({std::move(x.name), std::move(x.shape), std::move(x.data)});
    // Written from the tensors themselves: the weights are not copied into one buffer.
    auto pieces = ptq::io::layout_safetensors(*tensors);
    out.push_back({{"--fake-quant-weights", a.fake_quant_weights},
                   std::move(pieces.header),
                   std::move(pieces.data),
                   std::move(tensors)});
  }
  ptq_cli::calibration_layers layers;
  ptq_cli::onnx_sources onnx;
  if (!a.onnx.empty()) {
    layers = calibration_of(s);
    onnx.onnx_path = a.onnx;
    onnx.manifest_path = manifest_path;
    onnx.record_path = "the run's record";
    onnx.record = &rec;
    onnx.calibration = &layers;
    onnx.run_manifest = &model;
  }
  if (auto st = ptq_cli::add_exports(a.exports, rec, model, s.plan(),
                                     a.onnx.empty() ? nullptr : &onnx, out);
      !st)
    return ptq::result<std::vector<ptq_cli::output_file>>(st.diagnostics());
  return out;
}

/// Prints the session's diagnostics: a layer that does not fit (E801) is blamed on the weights
/// file and the tensors the manifest names, the rest (resolution) on the config.
inline void print_session_diagnostics(const std::vector<ptq::error>& diags,
                                      const std::string& config_text,
                                      const std::string& config_path,
                                      const std::string& weights_path,
                                      const ptq::model_manifest* model) {
  for (const auto& d : diags) {
    if (d.code != ptq::errc::session_layer_invalid) {
      std::cerr << ptq::format_diagnostic(d, config_text, config_path);
      continue;
    }
    auto e = d;
    e.path = weights_path;
    if (model != nullptr) {
      for (const auto& m : model->layers) {
        if (e.message.rfind("layer '" + m.desc.name + "'", 0) == 0 && !m.weight_name.empty()) {
          e.note = "the layer's weight is tensor '" + m.weight_name + "'" +
                   (m.bias_name.empty() ? "" : ", its bias '" + m.bias_name + "'") +
                   " (names from the manifest)";
        }
      }
    }
    std::cerr << ptq::format_error(e);
  }
}

/// `ptq calibrate [CONFIG]` without model files: the bundled digits model (calibrate_bundled.cpp).
int run_bundled(calibrate_args a, ptq::session_options opt, progress_printer& progress);

/// `ptq calibrate CONFIG --model M --weights W --batches B...` in one process
/// (calibrate_files.cpp).
int run_files(const calibrate_args& a, ptq::session_options opt, progress_printer& progress);

#if PTQ_WITH_MPI
/// The same run with --mpi: the activation phase sharded over the ranks of mpirun
/// (calibrate_files.cpp).
int run_files_mpi(const calibrate_args& a, ptq::session_options opt, progress_printer& progress);
#endif

}  // namespace ptq_cli::calibrate
