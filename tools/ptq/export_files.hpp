// The exports of the `ptq` tool: `ptq export --format F` and `ptq calibrate --export F=OUT`
// share the format table (ptq/export/formats.hpp), the `FORMAT[:TRT_VERSION[:CALIBRATOR]]=OUT`
// syntax and the rendering into outputs that commit_outputs writes all or nothing. The ONNX
// models (onnx-qdq, onnx: onnx_export.hpp) rewrite the float ONNX model of --onnx.
#pragma once

#include <cstdint>
#include <iostream>
#include <string>
#include <vector>

#include "onnx_export.hpp"
#include "outputs.hpp"
#include "ptq/config.hpp"
#include "ptq/config/plan.hpp"
#include "ptq/export/formats.hpp"
#include "ptq/export/qdq_table_from_manifest.hpp"
#include "ptq/session/model_manifest.hpp"
#include "ptq/session/record.hpp"

namespace ptq_cli {

/// One requested export.
struct export_request {
  std::string format;
  std::string path;
  ptq::export_options options;
  qdq_engine engine = qdq_engine::onnxruntime;  ///< onnx-qdq:ENGINE
};

/// The names `--format` accepts, for help texts and messages.
[[nodiscard]] inline std::string export_format_list() {
  return ptq::export_format_names() + ", onnx-qdq, onnx";
}

/// The formats that write an ONNX model from the float model of --onnx.
[[nodiscard]] inline bool is_onnx_model_format(const std::string& f) {
  return f == "onnx-qdq" || f == "onnx";
}

[[nodiscard]] inline ptq::error unknown_format(const std::string& name) {
  return ptq::make_error(ptq::errc::export_unknown_format, "unknown format '" + name + "'",
                         "the formats are " + export_format_list());
}

/// Parses `FORMAT[:TRT_VERSION[:CALIBRATOR]]=OUT` (the value of `ptq calibrate --export`).
[[nodiscard]] inline ptq::result<export_request> parse_export_spec(const std::string& spec) {
  const auto eq = spec.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size()) {
    return ptq::make_error(ptq::errc::export_option_invalid,
                           "--export '" + spec + "' must be FORMAT=OUT, e.g. aimet-0.6.1=enc.json",
                           "the formats are " + export_format_list());
  }
  export_request r;
  r.path = spec.substr(eq + 1);
  std::string head = spec.substr(0, eq);
  const auto c1 = head.find(':');
  r.format = head.substr(0, c1);
  if (c1 != std::string::npos) {
    const std::string rest = head.substr(c1 + 1);
    const auto c2 = rest.find(':');
    r.options.trt_version = rest.substr(0, c2);
    if (c2 != std::string::npos)
      r.options.trt_calibrator = rest.substr(c2 + 1);
  }
  if (r.format == "onnx-qdq" && c1 != std::string::npos) {  // onnx-qdq:ENGINE
    const std::string engine = head.substr(c1 + 1);
    if (engine != "onnxruntime" && engine != "tensorrt") {
      return ptq::make_error(ptq::errc::export_option_invalid,
                             "--export '" + spec +
                                 "': the engines of onnx-qdq are onnxruntime "
                                 "and tensorrt");
    }
    r.engine = engine == "tensorrt" ? qdq_engine::tensorrt : qdq_engine::onnxruntime;
    r.options.trt_version.clear();
    r.options.trt_calibrator = ptq::export_options{}.trt_calibrator;
    return r;
  }
  if (!is_onnx_model_format(r.format) && !ptq::find_export_format(r.format))
    return unknown_format(r.format);
  if (r.format == "trt-cache" && r.options.trt_version.empty()) {
    return ptq::make_error(ptq::errc::export_option_invalid,
                           "--export '" + spec +
                               "': trt-cache needs the TensorRT version, trt-cache:VERSION=OUT "
                               "(8601 for 8.6.1, 100300 for 10.3.0)");
  }
  if (c1 != std::string::npos && r.format != "trt-cache") {
    return ptq::make_error(ptq::errc::export_option_invalid,
                           "--export '" + spec +
                               "': only trt-cache takes :VERSION[:CALIBRATOR], and onnx-qdq "
                               ":ENGINE");
  }
  return r;
}

/// E1209: `rec` holds no layer, or (given the model's layers and the calibration's config)
/// lacks a layer the config quantizes: an export of it would leave that layer in float with no
/// word.
[[nodiscard]] inline ptq::result<> check_record_complete(const ptq::record_file& rec,
                                                         const std::string& record_path,
                                                         const ptq::model_manifest* model,
                                                         const ptq::amct_config* config,
                                                         const std::string& config_path) {
  if (rec.records.empty()) {
    return ptq::make_error(ptq::errc::export_record_incomplete,
                           "--record '" + record_path + "' holds no layer",
                           "export the record ptq calibrate --record wrote");
  }
  if (model == nullptr || config == nullptr)
    return {};
  std::vector<ptq::layer_info> infos;
  for (const auto& l : model->layers)
    infos.push_back(ptq::layer_info_of(l.desc));
  const auto plan = ptq::resolve_config(*config, infos);
  if (!plan)
    return {};  // the export reports the config's own errors where it reads it
  std::string missing;
  std::size_t count = 0;
  for (const auto& l : plan->layers) {
    if (!l.quant_enable || rec.find(l.name) != nullptr)
      continue;
    missing += (missing.empty() ? "'" : ", '") + l.name + "'";
    ++count;
  }
  if (count == 0)
    return {};
  return ptq::make_error(ptq::errc::export_record_incomplete,
                         "--record '" + record_path + "' has no entry for " +
                             (count == 1 ? "layer " : "layers ") + missing + ", which --config '" +
                             config_path + "' quantizes",
                         "export the record of the calibration that ran with this config");
}

/// The output paths of `specs` (already checked by parse_export_spec), as named_paths.
inline void add_export_paths(const std::vector<std::string>& specs, std::vector<named_path>& out) {
  for (const auto& s : specs) {
    if (auto r = parse_export_spec(s))
      out.push_back({"--export " + r->format, r->path});
  }
}

/// Renders one export of `table`; the warnings go to stderr as `PREFIX: warning: ...`.
[[nodiscard]] inline ptq::result<output_file> render_export(const export_request& req,
                                                            const ptq::qdq_table& table,
                                                            const std::string& option,
                                                            const std::string& prefix) {
  const auto* f = ptq::find_export_format(req.format);
  if (!f)
    return unknown_format(req.format);
  auto text = f->write(table, req.options);
  for (const auto& d : text.diagnostics()) {
    if (!ptq::is_error(d))
      std::cerr << prefix << ": " << ptq::format_error(d);
  }
  if (!text)
    return ptq::result<output_file>(text.diagnostics());
  return output_file{{option, req.path}, std::move(text).value()};
}

/// `ptq calibrate --export`: every requested export of the run's record, appended to `out`.
/// The table follows the run's BatchNorm fusion (the deployed bias). With `onnx` (--onnx), the
/// table formats key by its calibrated graph and the ONNX model formats are written from it.
[[nodiscard]] inline ptq::result<> add_exports(const std::vector<std::string>& specs,
                                               const ptq::record_file& rec,
                                               const ptq::model_manifest& model,
                                               const ptq::resolved_config& plan,
                                               const onnx_sources* onnx,
                                               std::vector<output_file>& out) {
  if (specs.empty())
    return {};
  ptq::qdq_options o;
  o.fuse_batch_norm = plan.do_fusion;
  o.skip_fusion_layers = plan.skip_fusion_layers;
  auto table = ptq::make_qdq_table(rec, model, o);
  if (!table)
    return table.error();
  if (onnx != nullptr) {
    if (auto st = key_table_to_onnx(table.value(), *onnx, {}); !st)
      return st.error();
  }
  for (const auto& s : specs) {
    auto req = parse_export_spec(s);
    if (!req)
      return req.error();
    const named_path target{"--export " + req->format, req->path};
    if (is_onnx_model_format(req->format)) {
      if (onnx == nullptr) {  // the command line was checked for --onnx before any work
        return ptq::make_error(ptq::errc::export_option_invalid,
                               "--export '" + s + "' needs --onnx MODEL.onnx");
      }
      onnx_export_options opt;
      if (req->engine == qdq_engine::tensorrt) {
        opt.engine = qdq_engine::tensorrt;
        opt.placement = qdq_placement::inputs;
        opt.unsigned_activations = false;
        opt.unsigned_8bit_weights = false;
      }
      auto model_file = export_onnx_model(*onnx, req->format, opt, target, "ptq calibrate");
      if (!model_file)
        return ptq::result<>(model_file.diagnostics());
      out.push_back(std::move(model_file->file));
      continue;
    }
    auto file = render_export(req.value(), table.value(), target.option, "ptq calibrate");
    if (!file)
      return ptq::result<>(file.diagnostics());
    out.push_back(std::move(file).value());
  }
  return {};
}

}  // namespace ptq_cli
