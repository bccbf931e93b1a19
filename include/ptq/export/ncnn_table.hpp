// The ncnn int8 scale table, input of `ncnn2int8` (exporters spec §2): all weight lines
// `<layer>_param_0 m_0 ... m_{K-1}` (multipliers 1/scale_w, K = num_output, or group for
// ConvolutionDepthWise), then the activation lines `<layer> m` (127/amax, or 1/scale_d when
// exact). Floats are the shortest text that reads back to the same float32; no blank line,
// which would end ncnn's reader. Needs the manifest (layer types, Cout). Standard library.
#pragma once

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "ptq/detail/float_format.hpp"
#include "ptq/export/options.hpp"
#include "ptq/export/qdq_table.hpp"
#include "ptq/export/symmetric.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {

/// The table text. Errors: a table made without a manifest (E1206), a layer name ncnn's reader
/// would misfile or cut (`_param_`, whitespace, over 255 bytes) or a multiplier that is not a
/// finite positive float32 (E1204). Lossy (W1220, E1220 when strict): asymmetric or non-8-bit
/// activations, a grouped conv whose channels of a group have different scales (ncnn holds one
/// per group: the largest step wins), layers ncnn's int8 table does not cover (Conv1d, Conv3d,
/// ConvTranspose, AvgPool2d) and INT16 activations (left out: the layer runs in float), DMQ
/// factors, FORCE_FP16.
[[nodiscard]] inline result<std::string> write_ncnn_table(const qdq_table& t,
                                                          const export_options& opt = {}) {
  detail::export_report rep(opt, "ncnn-table");
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
    if (l.name.empty() || l.name.size() > 255 || l.name.find("_param_") != std::string::npos ||
        l.name.find_first_of(" \t\r\n") != std::string::npos) {
      rep.fail(errc::export_not_representable, l.name,
               "ncnn's reader files a key containing \"_param_\" as a weight and cuts keys at "
               "whitespace or 255 bytes; rename the layer");
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
    const std::size_t groups = type == layer_type::conv2d ? l.groups : 1;
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
    std::string line = l.name + "_param_0";
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
    weights += line + "\n";
    blobs += l.name + " " + detail::shortest_repr(am) + "\n";
  }
  return rep.finish(weights + blobs);
}

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
