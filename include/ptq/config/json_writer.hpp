// Writing the detailed per-layer JSON config (docs/config.md) with nlohmann_json: `to_json` for the
// plan types, and the toolkit's exact text layout (`dump_toolkit_json`, `to_toolkit_json`).
// Depends on: core, detail and nlohmann_json.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ptq/config/plan.hpp"
#include "ptq/core/abi.hpp"
#include "ptq/detail/float_format.hpp"
#include "ptq/detail/json_parse.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {

namespace detail {
/// A float32 config value as the toolkit writes it: its shortest decimal as a Python float.
template <class Float>
nlohmann::ordered_json json_float(Float v) {
  return nlohmann::ordered_json(toolkit_double(v));
}
}  // namespace detail

/// The JSON object of one layer, keys in the toolkit's order.
template <class Float>
void to_json(nlohmann::ordered_json& j, const basic_resolved_layer<Float>& l) {
  j = nlohmann::ordered_json::object();
  j["quant_enable"] = l.quant_enable;
  if (l.dmq_balancer_param)
    j["dmq_balancer_param"] = detail::json_float(*l.dmq_balancer_param);
  auto& a = j["activation_quant_params"];
  a = nlohmann::ordered_json::object();
  const auto& ap = l.activation;
  a["num_bits"] = ap.num_bits;
  if (ap.algo == activation_algo::ifmr) {
    a["max_percentile"] = detail::json_float(ap.max_percentile);
    a["min_percentile"] = detail::json_float(ap.min_percentile);
    a["search_range"] = nlohmann::ordered_json::array(
        {detail::json_float(ap.search_range_start), detail::json_float(ap.search_range_end)});
    a["search_step"] = detail::json_float(ap.search_step);
  }
  a["act_algo"] = std::string(to_string(ap.algo));
  a["asymmetric"] = ap.asymmetric;
  if (ap.algo == activation_algo::hfmg)
    a["num_of_bins"] = ap.num_of_bins;
  if (l.weight) {
    auto& w = j["weight_quant_params"];
    w = nlohmann::ordered_json::object();
    const auto& wp = *l.weight;
    w["num_bits"] = wp.num_bits;
    if (wp.algo == weight_algo::ada) {
      w["reg_param"] = detail::json_float(wp.reg_param);
      w["warm_start"] = detail::json_float(wp.warm_start);
      w["num_iteration"] = wp.num_iteration;
      w["beta_range"] = nlohmann::ordered_json::array(
          {detail::json_float(wp.beta_range_start), detail::json_float(wp.beta_range_end)});
    }
    w["channel_wise"] = wp.channel_wise;
    w["wts_algo"] = std::string(to_string(wp.algo));
  }
}

/// The whole detailed config: globals first, then the layers sorted by name.
template <class Float>
void to_json(nlohmann::ordered_json& j, const basic_resolved_config<Float>& c) {
  j = nlohmann::ordered_json::object();
  j["version"] = c.version;
  j["batch_num"] = c.batch_num;
  j["activation_offset"] = c.activation_offset;
  j["do_fusion"] = c.do_fusion;
  if (c.fakequant_precision_mode)
    j["fakequant_precision_mode"] = "FORCE_FP16_QUANT";
  j["skip_fusion_layers"] = c.skip_fusion_layers;
  std::vector<const basic_resolved_layer<Float>*> sorted;
  for (const auto& l : c.layers)
    sorted.push_back(&l);
  std::sort(sorted.begin(), sorted.end(),
            [](const auto* a, const auto* b) { return a->name < b->name; });
  // The names are unique (resolution checks them); one that is a global key replaces it, as
  // the toolkit's Python dict would. Appending keeps the writer linear in the layers.
  const auto global = [&](const std::string& name) {
    for (const char* g : {"version", "batch_num", "activation_offset", "do_fusion",
                          "fakequant_precision_mode", "skip_fusion_layers"}) {
      if (name == g)
        return j.contains(name);
    }
    return false;
  };
  for (const auto* l : sorted) {
    if (global(l->name)) {
      j[l->name] = *l;
    } else {
      detail::append_member(j, l->name, *l);
    }
  }
}

namespace detail {
inline void dump_python(const nlohmann::ordered_json& j, std::string& out, int indent) {
  const std::string pad(static_cast<std::size_t>(indent + 4), ' ');
  const std::string close_pad(static_cast<std::size_t>(indent), ' ');
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::object: {
      if (j.empty()) {
        out += "{}";
        return;
      }
      out += "{\n";
      bool first = true;
      for (const auto& [key, value] : j.items()) {
        if (!first)
          out += ",\n";
        first = false;
        out += pad + nlohmann::ordered_json(key).dump(-1, ' ', true) + ":";
        dump_python(value, out, indent + 4);
      }
      out += "\n" + close_pad + "}";
      return;
    }
    case nlohmann::ordered_json::value_t::array: {
      if (j.empty()) {
        out += "[]";
        return;
      }
      out += "[\n";
      bool first = true;
      for (const auto& value : j) {
        if (!first)
          out += ",\n";
        first = false;
        out += pad;
        dump_python(value, out, indent + 4);
      }
      out += "\n" + close_pad + "]";
      return;
    }
    case nlohmann::ordered_json::value_t::number_float:
      out += python_repr(j.template get<double>());
      return;
    default:
      out += j.dump(-1, ' ', true);  // Python's json escapes non-ASCII as \uXXXX too
      return;
  }
}
}  // namespace detail

/// JSON text exactly as the toolkit writes it: `json.dump(indent=4, separators=(',', ':'))`,
/// Python float formatting, no trailing newline.
[[nodiscard]] inline std::string dump_toolkit_json(const nlohmann::ordered_json& j) {
  std::string out;
  detail::dump_python(j, out, 0);
  return out;
}

/// The detailed config as the toolkit's JSON text.
template <class Float>
[[nodiscard]] std::string to_toolkit_json(const basic_resolved_config<Float>& c) {
  nlohmann::ordered_json j = c;
  return dump_toolkit_json(j);
}

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
