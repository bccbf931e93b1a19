// AIMET encodings, the quantization overrides of Qualcomm's QNN/SNPE/QAIRT converters
// (docs/export.md, AIMET encodings): version 0.6.1 (dicts of lists; `is_symmetric` the string
// "True" or "False"; min/max) and 1.0.0 (lists; `is_sym` a boolean; no min/max). AIMET's grid is
// unsigned, `x = (q_u + offset) * scale` with `offset = -2^(n-1) - offset_d <= 0`, so AMCT's grid
// maps onto it exactly. Numbers are the float32 values widened to double and min/max their exact
// double products, so a reader finds min == offset * scale to the last bit. Adds nlohmann_json.
// Depends on: nlohmann_json.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ptq/export/export_options.hpp"
#include "ptq/export/qdq_table.hpp"
#include "ptq/export/symmetric.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {
namespace detail {

/// AIMET's offset of an AMCT grid of `bits` with folded offset `o`.
[[nodiscard]] constexpr std::int64_t aimet_offset(int bits, std::int32_t o) noexcept {
  return -(std::int64_t{1} << (bits - 1)) - o;
}

/// One 0.6.1 encoding dict.
[[nodiscard]] inline nlohmann::json aimet_061_entry(int bits, float scale, std::int64_t offset,
                                                    bool symmetric) {
  const auto s = static_cast<double>(scale);
  const auto top = static_cast<double>((std::int64_t{1} << bits) - 1 + offset);
  return {{"bitwidth", bits},
          {"dtype", "int"},
          {"is_symmetric", symmetric ? "True" : "False"},
          {"max", top * s},
          {"min", static_cast<double>(offset) * s},
          {"offset", offset},
          {"scale", s}};
}

/// The file: `doc` indented by four as AIMET writes it, with the per-layer losses of `t`.
[[nodiscard]] inline result<std::string> aimet_finish(const qdq_table& t, const export_options& opt,
                                                      const char* format,
                                                      const nlohmann::json& doc) {
  export_report rep(opt, format);
  for (const auto& l : t.layers)
    report_unheld_state(rep, l);
  return rep.finish(doc.dump(4) + "\n");
}

}  // namespace detail

/// AIMET 0.6.1 encodings: activation entries keyed by the layer's input tensor (the manifest's
/// layer name), parameter entries by the weight tensor's name, one dict per output channel.
/// `is_symmetric` is "True" exactly when AMCT's grid is symmetric (offset_d == 0). Lossy
/// (W1220, E1220 when strict): DMQ factors and FORCE_FP16, which the file cannot hold.
[[nodiscard]] inline result<std::string> write_aimet_0_6_1(const qdq_table& t,
                                                           const export_options& opt = {}) {
  auto acts = nlohmann::json::object();
  auto params = nlohmann::json::object();
  for (const auto& l : t.layers) {
    const auto& a = l.activation;
    acts[a.tensor] = nlohmann::json::array({detail::aimet_061_entry(
        a.bits, a.scale, detail::aimet_offset(a.bits, a.offset_d), a.offset_d == 0)});
    if (l.weight) {
      auto list = nlohmann::json::array();
      for (const float s : l.weight->scales) {
        list.push_back(detail::aimet_061_entry(l.weight->bits, s,
                                               detail::aimet_offset(l.weight->bits, 0), true));
      }
      params[l.weight->tensor] = std::move(list);
    }
  }
  nlohmann::json doc = {{"version", "0.6.1"},
                        {"activation_encodings", std::move(acts)},
                        {"param_encodings", std::move(params)},
                        {"excluded_layers", nlohmann::json::array()}};
  return detail::aimet_finish(t, opt, "aimet-0.6.1", doc);
}

/// AIMET 1.0.0 encodings: the same numbers as lists of named entries, `enc_type` PER_TENSOR or
/// PER_CHANNEL, `is_sym` a boolean, no min/max. Lossy as write_aimet_0_6_1.
[[nodiscard]] inline result<std::string> write_aimet_1_0_0(const qdq_table& t,
                                                           const export_options& opt = {}) {
  auto acts = nlohmann::json::array();
  auto params = nlohmann::json::array();
  for (const auto& l : t.layers) {
    const auto& a = l.activation;
    acts.push_back({{"name", a.tensor},
                    {"dtype", "INT"},
                    {"enc_type", "PER_TENSOR"},
                    {"bw", a.bits},
                    {"is_sym", a.offset_d == 0},
                    {"scale", nlohmann::json::array({static_cast<double>(a.scale)})},
                    {"offset", nlohmann::json::array({detail::aimet_offset(a.bits, a.offset_d)})}});
    if (l.weight) {
      const auto& w = *l.weight;
      auto scales = nlohmann::json::array();
      auto offsets = nlohmann::json::array();
      for (const float s : w.scales) {
        scales.push_back(static_cast<double>(s));
        offsets.push_back(detail::aimet_offset(w.bits, 0));
      }
      params.push_back({{"name", w.tensor},
                        {"dtype", "INT"},
                        {"enc_type", w.scales.size() == 1 ? "PER_TENSOR" : "PER_CHANNEL"},
                        {"bw", w.bits},
                        {"is_sym", true},
                        {"scale", std::move(scales)},
                        {"offset", std::move(offsets)}});
    }
  }
  nlohmann::json doc = {{"version", "1.0.0"},
                        {"activation_encodings", std::move(acts)},
                        {"param_encodings", std::move(params)},
                        {"excluded_layers", nlohmann::json::array()}};
  return detail::aimet_finish(t, opt, "aimet-1.0.0", doc);
}

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
