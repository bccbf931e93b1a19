// The ncnn int8 scale table, input of `ncnn2int8` (docs/export.md, ncnn int8 table): all weight
// lines `<layer>_param_0 m_0 ... m_{K-1}` (multipliers 1/scale_w, K = num_output, or group for
// ConvolutionDepthWise), then the activation lines `<layer> m` (127/amax, or 1/scale_d when
// exact). Floats are the shortest text that reads back to the same float32; no blank line,
// which would end ncnn's reader. Needs the manifest (layer types, Cout).
// Depends on: detail.
#pragma once

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "ptq/detail/float_format.hpp"
#include "ptq/export/export_options.hpp"
#include "ptq/export/qdq_table.hpp"
#include "ptq/export/symmetric.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {

/// The longest layer name ncnn2int8 finds: it looks the weights up under `<name>_param_0` in a
/// 256-byte buffer, so a name of 248 bytes or more is cut and matches nothing.
inline constexpr std::size_t ncnn_max_name_bytes = 247;

namespace detail {

/// What ncnn computes differently from the calibration for a layer it quantizes (W1221):
/// weight codes of -128 (ncnn clamps to -127), 8-bit weights of a 3x3 stride-1 dilation-1
/// Convolution (ncnn's int8 Winograd F43, which ncnn's own ncnn2table gives 6-bit weights), a
/// BatchNorm kept apart (ncnnoptimize folds it into the weights the scales were taken on).
inline void report_ncnn_caveats(std::vector<error>& out, const qdq_layer& l, layer_type type) {
  const auto caveat = [&](const std::string& what) {
    out.emplace_back(errc::export_engine_caveat, severity::warning,
                     "layer '" + l.name + "': ncnn-table: " + what);
  };
  const auto& w = *l.weight;
  if (w.bits == 8 && l.weight_codes_at_qmin > 0) {
    caveat(std::to_string(l.weight_codes_at_qmin) +
           " weight code(s) of -128, which ncnn clamps to -127 (the weight moves by one step)");
  }
  const auto one = [](const std::vector<std::size_t>& v) {
    return std::all_of(v.begin(), v.end(), [](std::size_t x) { return x == 1; });
  };
  if (type == layer_type::conv2d && w.bits == 8 && l.conv.groups == 1 && l.kernel.size() == 2 &&
      l.kernel[0] == 3 && l.kernel[1] == 3 && one(l.conv.stride) && one(l.conv.dilation)) {
    caveat(
        "8-bit weights on a 3x3 stride-1 convolution: ncnn runs it with int8 Winograd F43, "
        "which can overflow with full-range weights (ncnn2table quantizes such layers to 6 "
        "bits); calibrate it with quant_bits: 6");
  }
  if (l.kept_batch_norm) {
    caveat(
        "its BatchNorm is kept apart (skip_fusion_layers or do_fusion: false): ncnnoptimize "
        "folds it into the convolution, whose folded weights these scales were not taken on; "
        "convert without ncnnoptimize, or let calibration fold it");
  }
}

}  // namespace detail

/// The table text. Keys are the layers' `node` names (ncnn's layer names when the table was
/// keyed by an ONNX model), else their names. Errors: a table made without a manifest (E1206),
/// a key ncnn's reader would misfile or cut (`_param_`, whitespace, over 247 bytes) or a
/// multiplier that is not a finite positive float32 (E1204). Lossy (W1220, E1220 when strict):
/// asymmetric or non-8-bit activations, a grouped conv whose channels of a group have different
/// scales (ncnn holds one per group: the largest step wins), layers ncnn's int8 table does not
/// cover (Conv1d, Conv3d, ConvTranspose, AvgPool2d) and INT16 activations (left out: the layer
/// runs in float), DMQ factors, FORCE_FP16. Warnings (W1221): detail::report_ncnn_caveats.
[[nodiscard]] inline result<std::string> write_ncnn_table(const qdq_table& t,
                                                          const export_options& opt = {}) {
  detail::export_report rep(opt, "ncnn-table");
  std::vector<error> caveats;
  std::string weights;
  std::string blobs;
  for (const auto& l : t.layers) {
    if (!l.type) {
      return make_error(errc::export_needs_model,
                        "layer '" + l.name +
                            "': ncnn-table needs the layer types and output-channel counts; give "
                            "--model and --weights");
    }
    const auto type = *l.type;
    const std::string& key = l.node.empty() ? l.name : l.node;
    if (key.empty() || key.size() > ncnn_max_name_bytes ||
        key.find("_param_") != std::string::npos ||
        key.find_first_of(" \t\r\n") != std::string::npos) {
      rep.fail(errc::export_not_representable, l.name,
               "ncnn's reader files a key containing \"_param_\" as a weight, cuts keys at "
               "whitespace and finds no weights of a name over " +
                   std::to_string(ncnn_max_name_bytes) + " bytes ('" + key.substr(0, 64) +
                   (key.size() > 64 ? "...', " : "', ") + std::to_string(key.size()) +
                   " bytes); rename the layer");
      continue;
    }
    if (type != layer_type::conv2d && type != layer_type::linear) {
      rep.lossy(l.name,
                "ncnn's int8 table covers Convolution, ConvolutionDepthWise and "
                "InnerProduct only, not " +
                    std::string(to_string(type)) + "; the layer is left out (it runs in float)");
      continue;
    }
    if (l.activation.bits > 8) {
      rep.lossy(l.name,
                "INT16 activation has no ncnn int8 form; the layer is left out (it runs "
                "in float)");
      continue;
    }
    const auto& w = *l.weight;
    const std::size_t groups = type == layer_type::conv2d ? l.conv.groups : 1;
    const std::size_t k = groups > 1 ? groups : l.cout;
    if (k == 0 || l.cout % groups != 0) {
      rep.fail(errc::export_shape_mismatch, l.name, "the output channels do not split into groups");
      continue;
    }
    std::vector<float> steps(k);
    const std::size_t per = groups > 1 ? l.cout / groups : 1;
    double worst = 1.0;
    for (std::size_t g = 0; g < k; ++g) {
      float lo = 0.0f;
      float hi = 0.0f;
      for (std::size_t c = g * per; c < (g + 1) * per; ++c) {
        const float s = w.scales.size() == 1 ? w.scales[0] : w.scales[c];
        lo = c == g * per ? s : std::min(lo, s);
        hi = c == g * per ? s : std::max(hi, s);
      }
      steps[g] = hi;  // ncnn quantizes a group with one multiplier: the largest step covers all
      worst = std::max(worst, static_cast<double>(hi) / static_cast<double>(lo));
    }
    if (worst > 1.0) {
      rep.lossy(l.name,
                "ConvolutionDepthWise holds one weight scale per group; the largest step "
                "of each group is used, up to " +
                    detail::short_number(worst) + "x a channel's calibrated step");
    }
    std::string line = key + "_param_0";
    bool ok = true;
    for (const float s : steps) {
      const float m = 1.0f / s;
      ok = ok && std::isfinite(m) && m > 0.0f;
      line += ' ' + detail::shortest_repr(m);
    }
    const auto a = to_symmetric_int8(l.activation);
    const float am = a.exact ? 1.0f / a.step : 127.0f / a.amax;
    if (!ok || !std::isfinite(am) || !(am > 0.0f)) {
      rep.fail(errc::export_not_representable, l.name,
               "a multiplier is not a finite positive float32");
      continue;
    }
    detail::report_symmetric_loss(rep, l, a);
    detail::report_unheld_state(rep, l);
    detail::report_ncnn_caveats(caveats, l, type);
    weights += line + "\n";
    blobs += key + " " + detail::shortest_repr(am) + "\n";
  }
  auto out = rep.finish(weights + blobs);
  for (auto& c : caveats)
    out.add(std::move(c));
  return out;
}

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
