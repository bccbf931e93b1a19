// The QDQ table as JSON (`ptq export --format qdq-json`, docs/export.md): every number of the
// table under the manifest's names, floats as the shortest decimal that reads back to the same
// float32. Adds nlohmann_json.
// Depends on: detail and nlohmann_json.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "ptq/detail/float_format.hpp"
#include "ptq/export/qdq_table.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {
namespace detail {

/// A float32 as the JSON number with its shortest round-trip digits (nlohmann would print
/// the widened double's 17 digits).
[[nodiscard]] inline nlohmann::json json_f32(float v) {
  return toolkit_double(v);
}

[[nodiscard]] inline nlohmann::json json_f32_list(const std::vector<float>& v) {
  auto out = nlohmann::json::array();
  for (const float x : v)
    out.push_back(json_f32(x));
  return out;
}

}  // namespace detail

/// The table as a JSON value: {"format": "ptq-qdq", "version": 1, "layers": [...]}.
[[nodiscard]] inline nlohmann::json to_json(const qdq_table& t) {
  using detail::json_f32;
  using detail::json_f32_list;
  auto layers = nlohmann::json::array();
  for (const auto& l : t.layers) {
    nlohmann::json j;
    j["name"] = l.name;
    if (!l.node.empty())
      j["node"] = l.node;
    if (l.type)
      j["type"] = std::string(to_string(*l.type));
    const auto& a = l.activation;
    j["activation"] = {{"tensor", a.tensor},
                       {"scale", json_f32(a.scale)},
                       {"zero_point", a.zero_point},
                       {"offset_d", a.offset_d},
                       {"dtype", std::string(to_string(a.dtype))},
                       {"bits", a.bits},
                       {"qmin", a.qmin},
                       {"qmax", a.qmax}};
    if (l.weight) {
      const auto& w = *l.weight;
      j["weight"] = {{"tensor", w.tensor},
                     {"scales", json_f32_list(w.scales)},
                     {"zero_points", w.zero_points},
                     {"axis", w.axis},
                     {"dtype", std::string(to_string(w.dtype))},
                     {"bits", w.bits},
                     {"qmin", w.qmin},
                     {"qmax", w.qmax}};
      if (!w.shape.empty())
        j["weight"]["shape"] = w.shape;
    }
    if (l.cout != 0)
      j["cout"] = l.cout;
    if (l.cin != 0)
      j["cin"] = l.cin;
    j["groups"] = l.conv.groups;
    if (!l.dmq_factors.empty())
      j["dmq_factors"] = json_f32_list(l.dmq_factors);
    j["force_fp16"] = l.force_fp16;
    if (!l.bias.empty())
      j["bias"] = json_f32_list(l.bias);
    layers.push_back(std::move(j));
  }
  return {{"format", "ptq-qdq"}, {"version", 1}, {"layers", std::move(layers)}};
}

/// The `qdq-json` file: to_json(t) indented by two, with a final newline.
[[nodiscard]] inline std::string write_qdq_json(const qdq_table& t) {
  return to_json(t).dump(2) + "\n";
}

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
