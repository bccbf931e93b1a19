// The ONNX exports (onnx_export.hpp): the QDQ model, the calibrated float graph and the
// calibrated graph's names for the table formats.
#include <algorithm>
#include <climits>
#include <iostream>
#include <memory>
#include <optional>
#include <utility>

#include "../export_files.hpp"
#include "../input_files.hpp"
#include "../onnx_export.hpp"
#include "calibrated.hpp"
#include "match.hpp"
#include "ptq/algorithms/activations/dmq.hpp"
#include "ptq/config.hpp"
#include "ptq/export/qdq_table_from_manifest.hpp"
#include "ptq/export/symmetric.hpp"
#include "ptq/session/calibration_session.hpp"
#include "qdq.hpp"

namespace ptq_cli {

using ptq::errc;
using ptq::make_error;

namespace {

namespace ot = onnx_tool;

/// The float weight of every layer the calibration touched, as a session made from the config
/// decides it (the same code as ptq calibrate): fused where it fused, times the record's DMQ
/// factors. The config is needed only when a quantized layer has a BatchNorm.
[[nodiscard]] ptq::result<calibration_layers> calibration_from_config(
    const std::string& config_path, const ptq::amct_config* config,
    const ptq::model_manifest& manifest, const ptq::qdq_table& table) {
  calibration_layers out;
  std::string with_bn;
  for (const auto& l : manifest.layers) {
    if (l.desc.batch_norm && table.find(l.desc.name))
      with_bn += (with_bn.empty() ? "'" : ", '") + l.desc.name + "'";
  }
  std::optional<ptq::calibration_session> session;
  if (config != nullptr) {
    std::vector<ptq::layer_desc> descs;
    for (const auto& l : manifest.layers)
      descs.push_back(l.desc);
    auto s = ptq::calibration_session::create(*config, std::move(descs));
    if (!s) {
      auto e = s.error();
      e.message = "--config '" + config_path + "': " + e.message;
      return e;
    }
    // The record holds AdaRound's scales but not its learned rounding, so re-rounding the
    // float weight to nearest would export codes that differ from ptq's fake-quantized weights.
    if (const auto ada = s->ada_layers(); !ada.empty()) {
      return make_error(errc::onnx_unsupported,
                        "--config '" + config_path + "': layer '" + ada.front() +
                            "' is quantized by AdaRound (ada_quantize), whose learned rounding "
                            "the record does not hold; ptq export would round its weights to "
                            "nearest",
                        "export from ptq calibrate ... --onnx MODEL --export onnx-qdq=OUT, "
                        "which has the learned weights");
    }
    session = std::move(s).value();
  } else if (!with_bn.empty()) {
    return make_error(errc::onnx_fusion_unknown,
                      "layer " + with_bn +
                          " has a BatchNorm; whether calibration folded it into the weights is "
                          "the config's choice (do_fusion, skip_fusion_layers)",
                      "pass the calibration's config with --config");
  }
  for (const auto& l : manifest.layers) {
    const auto* row = table.find(l.desc.name);
    const auto* sl = session ? session->find(l.desc.name) : nullptr;
    const bool fused = sl != nullptr && sl->fused;
    if (row == nullptr && !fused)
      continue;
    calibrated_layer c;
    c.fused = fused;
    const auto& desc = fused ? sl->desc : l.desc;
    c.weight = ptq::copy_values(desc.weight);
    if (desc.bias)
      c.bias = ptq::copy_values(*desc.bias);
    if (row != nullptr && !row->dmq_factors.empty()) {
      if (auto st = ptq::dmq_apply_to_weight(c.weight.data(), desc.weight.shape, desc.type,
                                             desc.conv.groups, row->dmq_factors);
          !st) {
        return make_error(errc::onnx_unsupported,
                          "layer '" + l.desc.name + "': " + st.error().message);
      }
    }
    out.emplace(l.desc.name, std::move(c));
  }
  return out;
}

/// The run's weights must be the model's: ptq calibrate --onnx reads the layers from the
/// manifest's weights file and the graph from the model.
[[nodiscard]] ptq::result<> check_same_weights(const ptq::model_manifest& from_onnx,
                                               const ptq::model_manifest& run,
                                               const std::string& onnx_path) {
  for (const auto& l : from_onnx.layers) {
    for (const auto& r : run.layers) {
      if (r.desc.name != l.desc.name || l.desc.type == ptq::layer_type::avg_pool2d)
        continue;
      if (r.desc.weight.shape != l.desc.weight.shape ||
          ptq::copy_values(r.desc.weight) != ptq::copy_values(l.desc.weight)) {
        return make_error(errc::onnx_layer_unmatched,
                          "layer '" + l.desc.name + "': the weight '" + l.weight_name + "' of '" +
                              onnx_path +
                              "' differs from the one ptq calibrate read from --weights",
                          "give --onnx the model that --weights holds the weights of");
      }
    }
  }
  return {};
}

struct prepared {
  ot::model_file model;
  ptq::model_manifest manifest;
  ptq::qdq_table table;
  calibration_layers calibration;
};

[[nodiscard]] ptq::result<prepared> prepare(const onnx_sources& src,
                                            const onnx_export_options& options,
                                            std::vector<ptq::error>& warnings) {
  auto loaded = ot::load_model(src.onnx_path);
  if (!loaded)
    return loaded.error();
  prepared p;
  {
    const ot::graph_view view(loaded->model.graph());
    const ot::model_weights weights(view, src.onnx_path);
    auto manifest = ot::read_manifest(src.manifest_path, weights);
    if (!manifest)
      return manifest.error();
    p.manifest = std::move(manifest).value();
  }
  p.model = std::move(loaded).value();
  if (src.run_manifest != nullptr) {
    if (auto st = check_same_weights(p.manifest, *src.run_manifest, src.onnx_path); !st)
      return st.error();
  }
  ptq::qdq_options q;
  q.unsigned_activations = options.unsigned_activations;
  auto table = ptq::make_qdq_table(*src.record, p.manifest, q);
  if (!table) {
    auto e = table.error();
    e.message = "--record '" + src.record_path + "': " + e.message;
    return e;
  }
  p.table = std::move(table).value();
  if (options.engine == qdq_engine::tensorrt) {  // zero points 0: TensorRT is symmetric only
    ptq::export_options eo;
    eo.strict = options.strict;
    ptq::detail::export_report rep(eo, "onnx-qdq for TensorRT");
    for (auto& l : p.table.layers) {
      const auto s = ptq::to_symmetric_int8(l.activation);
      ptq::detail::report_symmetric_loss(rep, l, s);
      l.activation.scale = s.step;
      l.activation.offset_d = l.activation.zero_point = 0;
      l.activation.dtype = ptq::qdq_dtype::int8;
      l.activation.bits = 8;
      l.activation.qmin = -128;
      l.activation.qmax = 127;
    }
    auto done = rep.finish({});
    for (const auto& d : done.diagnostics())
      warnings.push_back(d);
    if (!done)
      return ptq::result<prepared>(done.diagnostics());
  }
  if (src.calibration != nullptr) {
    p.calibration = *src.calibration;
    return p;
  }
  std::optional<ptq::amct_config> config;
  if (!src.config_path.empty()) {
    auto text = read_text_input(src.config_path, "--config");
    if (!text)
      return text.error();
    auto parsed = ptq::try_parse_config(text.value());
    if (!parsed) {
      auto e = parsed.error();
      e.path = src.config_path;
      return e;
    }
    config = std::move(parsed).value();
  }
  auto c =
      calibration_from_config(src.config_path, config ? &*config : nullptr, p.manifest, p.table);
  if (!c)
    return c.error();
  if (auto st = check_record_complete(*src.record, src.record_path, &p.manifest,
                                      config ? &*config : nullptr, src.config_path);
      !st)
    return st.error();
  p.calibration = std::move(c).value();
  return p;
}

void print_warnings(const std::vector<ptq::error>& warnings, const std::string& prefix) {
  for (const auto& w : warnings) {
    if (!ptq::is_error(w))
      std::cerr << prefix << ": " << ptq::format_error(w);
  }
}

[[nodiscard]] std::string summary_line(const ot::qdq_layer_summary& l) {
  std::string s = l.layer + ": node " + l.node + ", input " + l.activation + " -> Q/DQ";
  if (l.dmq == "Div")
    s += " after Div by the DMQ factors";
  else if (!l.dmq.empty())
    s += " (DMQ " + l.dmq + ")";
  if (!l.weight.empty()) {
    s += ", weight " + l.weight + " -> " + (l.unsigned_weight ? "uint8" : "int8") +
         " + DequantizeLinear (" +
         (l.weight_axis < 0 ? std::string("per tensor") : "axis " + std::to_string(l.weight_axis)) +
         ")";
  }
  if (l.fused_batch_norm)
    s += ", BatchNorm folded";
  if (l.folded_kept_batch_norm)
    s += ", BatchNorm folded after quantization";
  s += ", output " + l.output;
  return s;
}

}  // namespace

bool onnx_available() noexcept {
  return true;
}

ptq::result<onnx_export_result> export_onnx_model(const onnx_sources& src,
                                                  const std::string& format,
                                                  const onnx_export_options& options,
                                                  const named_path& target,
                                                  const std::string& prefix) {
  std::vector<ptq::error> warnings;
  auto p = prepare(src, options, warnings);
  if (!p) {
    print_warnings(warnings, prefix);
    return p.error();
  }
  const bool qdq = format == "onnx-qdq";
  ot::calibrated_options co;
  co.dmq = options.dmq;
  co.fold_kept_batch_norms = qdq && options.placement == qdq_placement::fused;
  auto cm =
      ot::make_calibrated_model(std::move(p->model), p->manifest, p->table, p->calibration, co);
  if (!cm) {
    print_warnings(warnings, prefix);
    return cm.error();
  }
  warnings.insert(warnings.end(), cm->warnings.begin(), cm->warnings.end());
  onnx_export_result out{output_file(target, std::string()), {}};
  if (qdq) {
    ot::qdq_form form;
    form.placement = options.placement;
    form.unsigned_8bit_weights = options.unsigned_8bit_weights;
    auto layers = ot::insert_qdq(cm.value(), form, warnings);
    if (!layers) {
      print_warnings(warnings, prefix);
      return layers.error();
    }
    for (const auto& l : layers.value())
      out.summary.push_back(summary_line(l));
  } else {
    for (const auto& l : cm->layers) {
      std::string s = l.manifest->desc.name + ": node " + l.node + ", input " + l.input;
      if (l.fused_batch_norm)
        s += ", BatchNorm folded";
      if (l.dmq_divided)
        s += ", DMQ Div";
      else if (!l.dmq_folded_into.empty())
        s += ", DMQ folded into " + l.dmq_folded_into;
      out.summary.push_back(s);
    }
  }
  print_warnings(warnings, prefix);
  auto model = std::make_shared<onnx::ModelProto>(std::move(cm->model.model));
  if (auto st = ot::check_model(*model); !st)
    return st.error();
  // Serialized straight into the file (protobuf's buffered stream): no copy of the model's
  // bytes in memory. A message over 2 GiB does not serialize at all.
  if (model->ByteSizeLong() > static_cast<std::size_t>(INT_MAX)) {
    return make_error(errc::write_failed,
                      target.option + " '" + target.path +
                          "': the model is over 2 GiB, which ONNX's protobuf cannot serialize "
                          "(external data is not written)");
  }
  const onnx::ModelProto* raw = model.get();
  out.file = output_file(
      target, [raw](int fd) { return raw->SerializeToFileDescriptor(fd); }, std::move(model));
  return out;
}

ptq::result<std::vector<onnx_layer_names>> key_table_to_onnx(ptq::qdq_table& table,
                                                             const onnx_sources& sources,
                                                             const onnx_export_options& options) {
  std::vector<ptq::error> warnings;
  auto p = prepare(sources, options, warnings);
  if (!p)
    return p.error();
  ot::calibrated_options co;
  co.dmq = options.dmq;
  auto cm =
      ot::make_calibrated_model(std::move(p->model), p->manifest, p->table, p->calibration, co);
  if (!cm)
    return cm.error();
  std::vector<onnx_layer_names> out;
  for (const auto& d : cm->layers) {
    auto* row = table.find(d.manifest->desc.name);
    if (row == nullptr)
      continue;
    row->node = d.node;
    row->activation.tensor = d.input;
    if (row->weight && !d.weight.empty()) {
      row->weight->tensor = d.weight;
      if (!d.channel_scale.empty()) {  // a consumer's DMQ folded into these output channels
        auto& s = row->weight->scales;
        std::vector<float> per(d.channel_scale.size());
        for (std::size_t c = 0; c < per.size(); ++c)
          per[c] = s[s.size() == 1 ? 0 : c] * d.channel_scale[c];
        s = std::move(per);
        row->weight->zero_points.assign(s.size(), 0);
      }
    }
    row->dmq_factors.clear();  // the graph holds them: a Div, or folded into a producer
    out.push_back({d.manifest->desc.name, d.node, d.input, d.weight});
  }
  return out;
}

}  // namespace ptq_cli
