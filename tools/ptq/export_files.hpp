// The exports of the `ptq` tool: `ptq export --format F` and `ptq calibrate --export F=OUT`
// share the format table (ptq/export/formats.hpp), the `FORMAT[:TRT_VERSION[:CALIBRATOR]]=OUT`
// syntax and the rendering into outputs that commit_outputs writes all or nothing. A format
// that needs more than the library's table (the ONNX QDQ model) is one more row here.
#pragma once

#include <iostream>
#include <string>
#include <vector>

#include "outputs.hpp"
#include "ptq/config/plan.hpp"
#include "ptq/export/formats.hpp"
#include "ptq/session/manifest.hpp"
#include "ptq/session/record.hpp"

namespace ptq_cli {

/// One requested export.
struct export_request {
  std::string format;
  std::string path;
  ptq::export_options options;
};

/// The names `--format` accepts, for help texts and messages.
[[nodiscard]] inline std::string export_format_list() {
  return ptq::export_format_names();
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
  if (r.format == "onnx-qdq") {
    // The QDQ model is the float ONNX model rewritten, an input calibrate does not take.
    return ptq::make_error(ptq::errc::export_option_invalid,
                           "--export '" + spec +
                               "': onnx-qdq rewrites a float ONNX model; after calibrating, run "
                               "ptq export --format onnx-qdq --onnx MODEL.onnx --record RECORD "
                               "--model MANIFEST --config CONFIG -o OUT");
  }
  if (!ptq::find_export_format(r.format))
    return unknown_format(r.format);
  if (r.format == "trt-cache" && r.options.trt_version.empty()) {
    return ptq::make_error(ptq::errc::export_option_invalid,
                           "--export '" + spec +
                               "': trt-cache needs the TensorRT version, trt-cache:VERSION=OUT "
                               "(8601 for 8.6.1, 100300 for 10.3.0)");
  }
  if (c1 != std::string::npos && r.format != "trt-cache") {
    return ptq::make_error(ptq::errc::export_option_invalid,
                           "--export '" + spec + "': only trt-cache takes :VERSION[:CALIBRATOR]");
  }
  return r;
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
/// The table follows the run's BatchNorm fusion (the deployed bias).
[[nodiscard]] inline ptq::result<> add_exports(const std::vector<std::string>& specs,
                                               const ptq::record_file& rec,
                                               const ptq::model_manifest& model,
                                               const ptq::resolved_config& plan,
                                               std::vector<output_file>& out) {
  if (specs.empty())
    return {};
  ptq::qdq_options o;
  o.fuse_batch_norm = plan.do_fusion;
  o.skip_fusion_layers = plan.skip_fusion_layers;
  auto table = ptq::make_qdq_table(rec, model, o);
  if (!table)
    return table.error();
  for (const auto& s : specs) {
    auto req = parse_export_spec(s);
    if (!req)
      return req.error();
    auto file =
        render_export(req.value(), table.value(), "--export " + req->format, "ptq calibrate");
    if (!file)
      return ptq::result<>(file.diagnostics());
    out.push_back(std::move(file).value());
  }
  return {};
}

}  // namespace ptq_cli
