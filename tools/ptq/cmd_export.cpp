// `ptq export --format F --record R [--model M --weights W] -o OUT`: a calibration record into
// an engine's format (docs/export.md). This file checks the command line and the files and
// wires the library: record -> QDQ table (checked against the manifest) -> the format's text,
// written atomically. Lossy conversions are warnings on stderr (errors with --strict).
#include <iostream>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "command.hpp"
#include "config_io.hpp"
#include "export_files.hpp"
#include "input_files.hpp"
#include "onnx_qdq.hpp"
#include "outputs.hpp"
#include "ptq/config/diagnostics.hpp"
#include "ptq/io/safetensors.hpp"
#include "ptq/session/manifest.hpp"
#include "ptq/session/record.hpp"

namespace {

struct export_args {
  std::string format;
  std::string record;
  std::string model;
  std::string weights;
  std::string output;
  std::string config;
  std::string onnx;  ///< --onnx: onnx-qdq's input model; the ONNX names for the other formats
  bool uint8_activations = false;
  std::string trt_version;
  std::string calibrator = "EntropyCalibration2";
  bool strict = false;
};

int fail(const ptq::error& e) {
  if (e.path.empty())
    std::cerr << "ptq export: ";
  std::cerr << ptq::format_error(e);
  return ptq_cli::exit_error;
}

int fail_all(const std::vector<ptq::error>& diags) {
  for (const auto& d : diags) {
    if (ptq::is_error(d))
      std::cerr << "ptq export: " << ptq::format_error(d);
  }
  return ptq_cli::exit_error;
}

/// Without --config the deployed bias of a layer with a BatchNorm assumes the fusion default:
/// said as W1220 for the formats that write the bias (an error with --strict: false).
bool warn_assumed_fusion(const export_args& a, std::string_view format, const ptq::qdq_table& table,
                         const ptq::model_manifest& model) {
  if (format != "amct-deploy" && format != "qdq-json")
    return true;
  std::vector<std::string> bn;
  for (const auto& m : model.layers) {
    if (m.desc.batch_norm && table.find(m.desc.name))
      bn.push_back(m.desc.name);
  }
  if (bn.empty())
    return true;
  std::string names;
  for (const auto& n : bn)
    names += (names.empty() ? "" : ", ") + n;
  const auto w =
      ptq::error(ptq::errc::export_lossy, a.strict ? ptq::severity::error : ptq::severity::warning,
                 (bn.size() == 1 ? "layer " + names + " has" : "layers " + names + " have") +
                     " a BatchNorm: the bias written is the fused one (do_fusion: true); give the "
                     "calibration's CONFIG with --config if it kept a BatchNorm apart");
  std::cerr << "ptq export: " << ptq::format_error(w);
  return !a.strict;
}

int run_export(const export_args& a) {
  if (a.format == "onnx-qdq") {  // a model to model export: onnx_qdq.cpp
    if (a.onnx.empty() || !a.weights.empty()) {
      std::cerr << "ptq export: error: onnx-qdq reads --onnx MODEL.onnx (and its weights from it, "
                   "not from --weights)\n";
      return ptq_cli::exit_usage;
    }
    return ptq_cli::run_onnx_qdq(
        {a.onnx, a.record, a.model, a.config, a.output, a.uint8_activations}, false);
  }
  const auto* format = ptq::find_export_format(a.format);
  if (!format) {
    std::cerr << "ptq export: " << ptq::format_error(ptq_cli::unknown_format(a.format));
    return ptq_cli::exit_usage;
  }
  if (a.model.empty() != a.weights.empty()) {
    std::cerr << "ptq export: error: --model and --weights go together (the manifest names "
                 "tensors of the weights file)\n";
    return ptq_cli::exit_usage;
  }
  if (format->needs_model && a.model.empty()) {
    return fail(ptq::make_error(ptq::errc::export_needs_model,
                                a.format + " needs the layer types and output-channel counts; give "
                                           "--model and --weights"));
  }
  std::vector<ptq_cli::named_path> inputs = {{"--record", a.record}};
  if (!a.config.empty())
    inputs.push_back({"--config", a.config});
  if (!a.model.empty()) {
    inputs.push_back({"--model", a.model});
    inputs.push_back({"--weights", a.weights});
  }
  if (auto st = ptq_cli::check_outputs({{"-o", a.output}}, inputs); !st)
    return fail(st.error());
  for (const auto& in : inputs) {
    auto st = in.option == "--weights"
                  ? ptq_cli::check_tensor_file(in.path, in.option.c_str())
                  : ptq_cli::check_input_file(in.path, in.option.c_str(), ptq_cli::max_text_bytes);
    if (!st)
      return fail(st.error());
  }
  auto text = ptq_cli::read_text_input(a.record, "--record");
  if (!text)
    return fail(text.error());
  auto rec = ptq::try_parse_record(text.value());
  if (!rec) {
    std::cerr << ptq::format_diagnostics(rec.diagnostics(), text.value(), a.record);
    return ptq_cli::exit_error;
  }
  ptq::result<ptq::qdq_table> table;
  if (a.model.empty()) {
    table = ptq::make_qdq_table(rec.value());
  } else {
    auto weights = ptq_cli::read_tensor_input(a.weights, "--weights");
    if (!weights)
      return fail(weights.error());
    auto manifest_text = ptq_cli::read_text_input(a.model, "--model");
    if (!manifest_text)
      return fail(manifest_text.error());
    auto model = ptq::parse_manifest(manifest_text.value(), weights.value());
    if (!model) {
      auto e = model.error();
      e.path = a.model;
      return fail(e);
    }
    // The record does not say which BatchNorms the calibration fused; the config does.
    ptq::qdq_options o;
    if (!a.config.empty()) {
      const auto cfg = ptq_cli::load_config(a.config, "export");
      if (!cfg)
        return ptq_cli::exit_error;
      const auto& c = cfg->parsed.value();
      o.fuse_batch_norm = c.do_fusion.value_or(ptq::defaults::do_fusion);
      for (const auto& n : c.skip_fusion_layers)
        o.skip_fusion_layers.push_back(n.value);
    }
    table = ptq::make_qdq_table(rec.value(), model.value(), o);
    if (table && a.config.empty() &&
        !warn_assumed_fusion(a, format->name, table.value(), model.value()))
      return ptq_cli::exit_error;
  }
  if (!table)
    return fail_all(table.diagnostics());
  if (!a.onnx.empty()) {  // key by the ONNX model's tensor names
    if (a.model.empty()) {
      return fail(ptq::make_error(ptq::errc::export_needs_model,
                                  "--onnx needs --model: the manifest's weight names find each "
                                  "layer's node"));
    }
    if (auto st = ptq_cli::apply_onnx_names(table.value(), a.onnx, a.model); !st)
      return fail(st.error());
  }
  ptq_cli::export_request req{a.format, a.output, {}};
  req.options.strict = a.strict;
  req.options.trt_version = a.trt_version;
  req.options.trt_calibrator = a.calibrator;
  auto file = ptq_cli::render_export(req, table.value(), "-o", "ptq export");
  if (!file)
    return fail_all(file.diagnostics());
  if (auto st = ptq_cli::commit_outputs({file.value()}); !st)
    return fail(st.error());
  return ptq_cli::exit_ok;
}

const ptq_cli::register_command reg{
    {"export", "Export a calibration record to TensorRT, ncnn, AIMET, AMCT deploy or QDQ JSON", 28,
     [](CLI::App& sub) -> ptq_cli::run_fn {
       auto a = std::make_shared<export_args>();
       sub.description(
           "Export a record (from ptq calibrate) into an engine's format (docs/export.md). Names "
           "are the manifest's: the layer name for its activation, the weight tensor's name for "
           "parameters. Lossy conversions are reported per layer (W1220); --strict makes them "
           "errors. The output is written atomically, and not at all on an error.");
       sub.add_option("--format", a->format,
                      "one of: " + ptq_cli::export_format_list() + ", onnx-qdq")
           ->required();
       sub.add_option("--record", a->record, "the record file (ptq calibrate --record)")
           ->required();
       sub.add_option("--model", a->model, "model manifest (JSON; docs/calibrate.md)");
       sub.add_option("--weights", a->weights, "weights (.safetensors) named by the manifest");
       sub.add_option("-o,--output", a->output, "write the export here")->required();
       sub.add_option("--config", a->config,
                      "the calibration's simple config: which BatchNorms were fused (the "
                      "deployed bias)");
       sub.add_option("--onnx", a->onnx,
                      "onnx-qdq: the float ONNX model to quantize; other formats: key by its "
                      "tensor names");
       sub.add_flag("--uint8-activations", a->uint8_activations,
                    "onnx-qdq: activation zero points as uint8 (offset_d + 128), not int8");
       sub.add_flag("--strict", a->strict, "a lossy conversion is an error");
       sub.add_option("--trt-version", a->trt_version,
                      "trt-cache: TensorRT's version as its cache header writes it (8601 for "
                      "8.6.1, 100300 for 10.3.0)");
       sub.add_option("--calibrator", a->calibrator,
                      "trt-cache: the calibrator algorithm of the header")
           ->capture_default_str();
       return [a]() -> int { return run_export(*a); };
     }}};

}  // namespace
