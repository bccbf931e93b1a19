// `ptq export --format F --record R [--model M --weights W] -o OUT`: a calibration record into
// an engine's format (docs/export.md). This file checks the command line and the files and
// wires the library: record -> QDQ table (checked against the manifest) -> the format's text,
// written atomically. Lossy conversions are warnings on stderr (errors with --strict).
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "command.hpp"
#include "config_io.hpp"
#include "export_files.hpp"
#include "input_files.hpp"
#include "manifest_input.hpp"
#include "onnx_export.hpp"
#include "outputs.hpp"
#include "ptq/core/visible_text.hpp"
#include "ptq/export/qdq_table_from_manifest.hpp"
#include "ptq/io/safetensors.hpp"
#include "ptq/prototext/diagnostics.hpp"
#include "ptq/session/model_manifest.hpp"
#include "ptq/session/record.hpp"

namespace {

struct export_args {
  std::string format;
  std::string record;
  std::string model;
  std::string weights;
  std::string output;
  std::string config;
  std::string onnx;  ///< --onnx: the ONNX exports' input model; the table formats' names
  bool uint8_activations = false;
  std::string activations;  ///< --activations uint8|int8 (onnx-qdq)
  std::string weight_type;  ///< --weight-type uint8|int8 (onnx-qdq: 8-bit weights)
  std::string placement;    ///< --placement fused|inputs (onnx-qdq)
  std::string engine;       ///< --engine onnxruntime|tensorrt (onnx-qdq)
  std::string dmq;          ///< --dmq fold|exact (ONNX exports, tables keyed by --onnx)
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

int usage(const std::string& message) {
  std::cerr << "ptq export: error: "
            << ptq::detail::visible_text(message, ptq::detail::max_message_bytes) << '\n';
  return ptq_cli::exit_usage;
}

/// The record file of --record, parsed; nullopt after printing why not (with the source line).
std::optional<ptq::record_file> read_record(const std::string& path) {
  auto text = ptq_cli::read_text_input(path, "--record");
  if (!text) {
    fail(text.error());
    return std::nullopt;
  }
  auto rec = ptq::try_parse_record(text.value());
  if (!rec) {
    std::cerr << ptq::format_diagnostics(rec.diagnostics(), text.value(), path);
    return std::nullopt;
  }
  return std::move(rec).value();
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

/// The ONNX options of the command line; usage errors name the option.
ptq::result<ptq_cli::onnx_export_options> onnx_options(const export_args& a, bool qdq) {
  ptq_cli::onnx_export_options o;
  const auto bad = [](const std::string& m) {
    return ptq::make_error(ptq::errc::export_option_invalid, m);
  };
  if (!qdq) {
    for (const auto* opt : {&a.activations, &a.placement, &a.engine, &a.weight_type}) {
      if (!opt->empty())
        return bad(
            "--engine, --placement, --activations and --weight-type are options of "
            "onnx-qdq only");
    }
    if (a.uint8_activations)
      return bad("--uint8-activations is an option of onnx-qdq only");
  }
  if (a.engine == "tensorrt") {
    o.engine = ptq_cli::qdq_engine::tensorrt;
    o.placement = ptq_cli::qdq_placement::inputs;
    o.unsigned_activations = false;
    o.unsigned_8bit_weights = false;
  } else if (!a.engine.empty() && a.engine != "onnxruntime") {
    return bad("--engine '" + a.engine + "': the engines are onnxruntime and tensorrt");
  }
  if (a.placement == "inputs")
    o.placement = ptq_cli::qdq_placement::inputs;
  else if (a.placement == "fused")
    o.placement = ptq_cli::qdq_placement::fused;
  else if (!a.placement.empty())
    return bad("--placement '" + a.placement + "': the placements are fused and inputs");
  const std::string dtype = a.uint8_activations ? "uint8" : a.activations;
  if (a.uint8_activations && !a.activations.empty() && a.activations != "uint8")
    return bad("--uint8-activations and --activations " + a.activations + " disagree");
  if (dtype == "uint8")
    o.unsigned_activations = true;
  else if (dtype == "int8")
    o.unsigned_activations = false;
  else if (!dtype.empty())
    return bad("--activations '" + dtype + "': the activation types are uint8 and int8");
  if (a.weight_type == "uint8")
    o.unsigned_8bit_weights = true;
  else if (a.weight_type == "int8")
    o.unsigned_8bit_weights = false;
  else if (!a.weight_type.empty())
    return bad("--weight-type '" + a.weight_type + "': the weight types are uint8 and int8");
  if (o.engine == ptq_cli::qdq_engine::tensorrt &&
      (o.unsigned_activations || o.unsigned_8bit_weights))
    return bad(
        "--engine tensorrt takes int8 activations and weights with zero point 0, not "
        "uint8");
  if (a.dmq == "exact")
    o.dmq = ptq_cli::dmq_mode::exact;
  else if (!a.dmq.empty() && a.dmq != "fold")
    return bad("--dmq '" + a.dmq + "': the DMQ forms are fold and exact");
  o.strict = a.strict;
  return o;
}

/// `--format onnx-qdq` and `--format onnx`: a model to model export (onnx/export.cpp).
int run_onnx_export(const export_args& a) {
  const bool qdq = a.format == "onnx-qdq";
  if (a.onnx.empty() || !a.weights.empty()) {
    return usage(a.format +
                 " reads --onnx MODEL.onnx (and its weights from it, not from "
                 "--weights)");
  }
  auto options = onnx_options(a, qdq);
  if (!options)
    return usage(options.error().message);
  std::vector<ptq_cli::named_path> inputs = {{"--onnx", a.onnx}, {"--record", a.record}};
  if (!a.model.empty())
    inputs.push_back({"--model", a.model});
  if (!a.config.empty())
    inputs.push_back({"--config", a.config});
  if (auto st = ptq_cli::check_outputs({{"-o", a.output}}, inputs); !st)
    return fail(st.error());
  auto rec = read_record(a.record);
  if (!rec)
    return ptq_cli::exit_error;
  ptq_cli::onnx_sources src;
  src.onnx_path = a.onnx;
  src.manifest_path = a.model;
  src.record_path = a.record;
  src.record = &rec.value();
  src.config_path = a.config;
  auto out =
      ptq_cli::export_onnx_model(src, a.format, options.value(), {"-o", a.output}, "ptq export");
  if (!out)
    return fail_all(out.diagnostics());
  if (auto st = ptq_cli::commit_outputs({out->file}); !st)
    return fail(st.error());
  for (const auto& line : out->summary)
    std::cout << line << '\n';
  std::cout << "wrote " << a.output << '\n';
  return ptq_cli::exit_ok;
}

/// The table formats' inputs: none is an output, each a file within its limit.
ptq::result<> check_table_inputs(const export_args& a) {
  std::vector<ptq_cli::named_path> inputs = {{"--record", a.record}};
  if (!a.config.empty())
    inputs.push_back({"--config", a.config});
  if (!a.model.empty()) {
    inputs.push_back({"--model", a.model});
    inputs.push_back({"--weights", a.weights});
  }
  if (!a.onnx.empty())
    inputs.push_back({"--onnx", a.onnx});
  if (auto st = ptq_cli::check_outputs({{"-o", a.output}}, inputs); !st)
    return st;
  for (const auto& in : inputs) {
    auto st = in.option == "--weights" || in.option == "--onnx"
                  ? ptq_cli::check_tensor_file(in.path, in.option.c_str())
                  : ptq_cli::check_input_file(in.path, in.option.c_str(), ptq_cli::max_text_bytes);
    if (!st)
      return st;
  }
  return {};
}

/// The manifest of --model over the tensors of --weights; its errors name the manifest.
ptq::result<ptq::model_manifest> read_manifest(const export_args& a) {
  auto weights = ptq_cli::read_tensor_input(a.weights, "--weights");
  if (!weights)
    return weights.error();
  return ptq_cli::read_manifest_input(a.model, weights.value());
}

/// The record does not say which BatchNorms the calibration fused; the config does (without
/// one, the fusion default).
ptq::qdq_options fusion_of(const std::optional<ptq_cli::loaded_config>& cfg) {
  ptq::qdq_options o;
  if (cfg) {
    const auto& c = cfg->parsed.value();
    o.fuse_batch_norm = c.do_fusion.value_or(ptq::defaults::do_fusion);
    for (const auto& n : c.skip_fusion_layers)
      o.skip_fusion_layers.push_back(n.value);
  }
  return o;
}

int run_export(const export_args& a) {
  ptq_cli::install_interrupt_cleanup("ptq export");
  if (a.format == "onnx-qdq" || a.format == "onnx")
    return run_onnx_export(a);
  const auto* format = ptq::find_export_format(a.format);
  if (!format) {
    std::cerr << "ptq export: " << ptq::format_error(ptq_cli::unknown_format(a.format));
    return ptq_cli::exit_usage;
  }
  if (a.model.empty() != a.weights.empty())
    return usage(
        "--model and --weights go together (the manifest names tensors of the weights "
        "file)");
  auto options = onnx_options(a, false);
  if (!options)
    return usage(options.error().message);
  if (!a.dmq.empty() && a.onnx.empty())
    return usage("--dmq applies to the ONNX graph: give --onnx, or leave --dmq out");
  if (format->needs_model && a.model.empty()) {
    return fail(ptq::make_error(ptq::errc::export_needs_model,
                                a.format + " needs the layer types and output-channel counts; give "
                                           "--model and --weights"));
  }
  if (!a.onnx.empty() && a.model.empty()) {
    return fail(ptq::make_error(ptq::errc::export_needs_model,
                                "--onnx needs --model and --weights: the manifest's weight "
                                "names find each layer's node"));
  }
  if (auto st = check_table_inputs(a); !st)
    return fail(st.error());
  auto rec = read_record(a.record);
  if (!rec)
    return ptq_cli::exit_error;
  std::optional<ptq_cli::loaded_config> cfg;
  if (!a.config.empty()) {
    cfg = ptq_cli::load_config(a.config, "export");
    if (!cfg)
      return ptq_cli::exit_error;
  }
  ptq::result<ptq::qdq_table> table;
  std::optional<ptq::model_manifest> model;
  if (a.model.empty()) {
    if (auto st = ptq_cli::check_record_complete(rec.value(), a.record, nullptr, nullptr, a.config);
        !st)
      return fail(st.error());
    table = ptq::make_qdq_table(rec.value());
  } else {
    auto parsed = read_manifest(a);
    if (!parsed)
      return fail(parsed.error());
    model = std::move(parsed).value();
    if (auto st = ptq_cli::check_record_complete(rec.value(), a.record, &*model,
                                                 cfg ? &cfg->parsed.value() : nullptr, a.config);
        !st)
      return fail(st.error());
    table = ptq::make_qdq_table(rec.value(), *model, fusion_of(cfg));
    if (table && a.config.empty() && !warn_assumed_fusion(a, format->name, table.value(), *model))
      return ptq_cli::exit_error;
  }
  if (!table)
    return fail_all(table.diagnostics());
  if (!a.onnx.empty()) {  // key by the calibrated graph's names
    ptq_cli::onnx_sources src;
    src.onnx_path = a.onnx;
    src.manifest_path = a.model;
    src.record_path = a.record;
    src.record = &rec.value();
    src.config_path = a.config;
    src.run_manifest = &*model;
    if (auto st = ptq_cli::key_table_to_onnx(table.value(), src, options.value()); !st)
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

}  // namespace

ptq_cli::command_def ptq_cli::export_command() {
  return {
      "export",
      "Export a calibration record to TensorRT, ncnn, AIMET, AMCT deploy, QDQ JSON or ONNX",
      [](CLI::App& sub) -> ptq_cli::run_fn {
        auto a = std::make_shared<export_args>();
        sub.footer(  // `ptq --help` lists the summary
            "Export a record (from ptq calibrate) into an engine's format (docs/export.md). Names "
            "are the manifest's: the layer name for its activation, the weight tensor's name for "
            "parameters. Lossy conversions are reported per layer (W1220); --strict makes them "
            "errors. The output is written atomically, and not at all on an error.");
        sub.add_option("--format", a->format, "one of: " + ptq_cli::export_format_list())
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
                       "onnx-qdq, onnx: the float ONNX model; other formats: key by the names "
                       "of its calibrated graph (docs/deploy.md)");
        sub.add_option("--engine", a->engine,
                       "onnx-qdq: onnxruntime (default: uint8, fused placement) or tensorrt "
                       "(int8, zero points 0, inputs placement)");
        sub.add_option("--placement", a->placement,
                       "onnx-qdq: fused (Q/DQ also on the outputs an int8 kernel needs) or "
                       "inputs (the layers' inputs and weights only)");
        sub.add_option("--activations", a->activations,
                       "onnx-qdq: the activation type, uint8 (zero point offset_d + 128) or int8");
        sub.add_flag("--uint8-activations", a->uint8_activations, "onnx-qdq: --activations uint8");
        sub.add_option("--weight-type", a->weight_type,
                       "onnx-qdq: 8-bit weights as uint8 with zero point 128 (onnxruntime's "
                       "default: no int16 saturation in its x86 kernels) or int8");
        sub.add_option("--dmq", a->dmq,
                       "ONNX graphs: fold (1/b into the producing layer where the graph allows "
                       "it, default) or exact (a Div before each DMQ layer)");
        sub.add_flag("--strict", a->strict, "a lossy conversion is an error");
        sub.add_option("--trt-version", a->trt_version,
                       "trt-cache: TensorRT's version as its cache header writes it (8601 for "
                       "8.6.1, 100300 for 10.3.0)");
        sub.add_option("--calibrator", a->calibrator,
                       "trt-cache: the calibrator algorithm of the header")
            ->capture_default_str();
        return [a]() -> int { return run_export(*a); };
      }};
}
