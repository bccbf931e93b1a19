// The AMCT deploy numbers: what the toolkit's `save_model` writes into the deploy model
// (docs/export.md, AMCT deploy numbers), as a report, without the Ascend graph: AscendQuant's
// `scale = 1/scale_d` and `offset = offset_d`, AscendDequant's packed uint64 `(uint8(offset_w) <<
// 32) + bits(f32(scale_d * scale_w[c]))` (s19-truncated under FORCE_FP16_QUANT), the int32 bias
// `round(bias / (scale_w[c] * scale_d))` (ties to even, as numpy), the DMQ Mul's `1/b`. float32
// arithmetic as the toolkit's. Adds nlohmann_json for the report.
// Depends on: core and nlohmann_json.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ptq/core/quant.hpp"
#include "ptq/export/export_options.hpp"
#include "ptq/export/qdq_json.hpp"
#include "ptq/export/qdq_table.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {

/// One layer's deploy numbers.
struct amct_deploy_layer {
  std::string name;
  float quant_scale = 1.0f;                  ///< AscendQuant `scale`: 1/scale_d
  std::int32_t quant_offset = 0;             ///< AscendQuant `offset`: offset_d
  std::string dst_type;                      ///< "INT4", "INT8" or "INT16"
  std::vector<float> dequant_scale;          ///< f32(scale_d * scale_w[c]), s19 under FP16
  std::vector<std::uint64_t> dequant_param;  ///< the `<layer>.dequant.param` words
  std::vector<std::int32_t> bias;            ///< empty: no bias, or none known (no manifest)
  std::vector<float> dmq_mul;                ///< 1/b, the Mul before the layer (empty: no DMQ)
};

/// The deploy numbers of every layer. Errors: a dequant scale or 1/scale_d that is not a finite
/// positive float32 (E1204), a bias whose count is not Cout (E1203) or whose int32 form
/// overflows (E1205).
[[nodiscard]] inline result<std::vector<amct_deploy_layer>> amct_deploy_numbers(
    const qdq_table& t) {
  std::vector<amct_deploy_layer> out;
  const auto fail = [](errc code, const std::string& layer, const std::string& what) {
    return make_error(code, "layer '" + layer + "': amct-deploy: " + what);
  };
  for (const auto& l : t.layers) {
    amct_deploy_layer d;
    const auto& a = l.activation;
    d.name = l.name;
    d.quant_scale = 1.0f / a.scale;
    d.quant_offset = a.offset_d;
    d.dst_type = "INT" + std::to_string(a.bits);
    if (!std::isfinite(d.quant_scale))
      return fail(errc::export_not_representable, l.name, "1/scale_d is not a finite float32");
    const std::vector<float> one{1.0f};  // AvgPool2d: the toolkit's scale_w of 1
    const std::vector<float>& sw = l.weight ? l.weight->scales : one;
    for (std::size_t c = 0; c < sw.size(); ++c) {
      const float prod = a.scale * sw[c];
      const float s = l.force_fp16 ? truncate_s19(prod) : prod;
      if (!std::isfinite(s) || !(s > 0.0f)) {
        return fail(errc::export_not_representable, l.name,
                    "the dequant scale of channel " + std::to_string(c) +
                        " is not a finite positive float32");
      }
      std::uint32_t bits = 0;
      std::memcpy(&bits, &s, sizeof bits);
      const std::int32_t ow = l.weight ? l.weight->zero_points[c] : 0;
      d.dequant_scale.push_back(s);
      d.dequant_param.push_back((static_cast<std::uint64_t>(static_cast<std::uint8_t>(ow)) << 32) +
                                bits);
    }
    if (!l.bias.empty() && l.weight) {
      if (l.cout != 0 && l.bias.size() != l.cout) {
        return fail(
            errc::export_shape_mismatch, l.name,
            std::to_string(l.bias.size()) + " bias values for Cout = " + std::to_string(l.cout));
      }
      for (std::size_t c = 0; c < l.bias.size(); ++c) {
        const float ws = sw.size() == 1 ? sw[0] : sw[c];
        const float q = std::nearbyint(l.bias[c] / (ws * a.scale));  // ties to even
        if (!(q >= -2147483648.0f && q < 2147483648.0f)) {
          return fail(errc::export_bias_overflow, l.name,
                      "bias[" + std::to_string(c) + "] " + detail::short_number(l.bias[c]) +
                          " / (scale_w " + detail::short_number(ws) + " * scale_d " +
                          detail::short_number(a.scale) + ") = " + detail::short_number(q) +
                          " does not fit int32");
        }
        d.bias.push_back(static_cast<std::int32_t>(q));
      }
    }
    for (const float b : l.dmq_factors)
      d.dmq_mul.push_back(1.0f / b);
    out.push_back(std::move(d));
  }
  return out;
}

/// The `amct-deploy` report (JSON). Nothing is lossy: these are the toolkit's own numbers.
[[nodiscard]] inline result<std::string> write_amct_deploy(const qdq_table& t,
                                                           const export_options& = {}) {
  auto numbers = amct_deploy_numbers(t);
  if (!numbers)
    return numbers.error();
  auto layers = nlohmann::json::array();
  for (const auto& d : numbers.value()) {
    auto hex = nlohmann::json::array();
    for (const auto p : d.dequant_param) {
      char buf[24];
      std::snprintf(buf, sizeof buf, "0x%016llx", static_cast<unsigned long long>(p));
      hex.push_back(buf);
    }
    nlohmann::json j = {{"name", d.name},
                        {"quant",
                         {{"node", d.name + ".quant"},
                          {"scale", detail::json_f32(d.quant_scale)},
                          {"offset", d.quant_offset},
                          {"dst_type", d.dst_type}}},
                        {"dequant",
                         {{"node", d.name + ".dequant"},
                          {"param", d.dequant_param},
                          {"param_hex", std::move(hex)},
                          {"scale", detail::json_f32_list(d.dequant_scale)}}}};
    if (!d.bias.empty())
      j["bias_int32"] = d.bias;
    if (!d.dmq_mul.empty())
      j["dmq_mul"] = detail::json_f32_list(d.dmq_mul);
    layers.push_back(std::move(j));
  }
  const nlohmann::json doc = {{"format", "amct-deploy"}, {"version", 1}, {"layers", layers}};
  return doc.dump(2) + "\n";
}

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
