// The detailed per-layer JSON config (spec §4.4) with nlohmann_json: `to_json`/`from_json`, the
// toolkit's exact text layout, and a reader that applies the JSON rules of spec §4.5.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "ptq/config/diagnostics.hpp"
#include "ptq/config/resolve.hpp"
#include "ptq/config/validate.hpp"
#include "ptq/core/abi.hpp"
#include "ptq/detail/float_format.hpp"

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
  for (const auto* l : sorted)
    j[l->name] = *l;
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

namespace detail {

template <class Float>
class quant_json_reader {
 public:
  explicit quant_json_reader(std::vector<diagnostic>& diags) : diags_(diags) {}

  bool read(const nlohmann::ordered_json& j, basic_resolved_config<Float>& c) {
    if (!j.is_object())
      return fail(errc::json_wrong_type, "the config must be a JSON object", "");
    bool any_enabled = false;
    bool ok = true;
    for (const auto& [key, v] : j.items()) {
      if (key == "version") {
        ok &= uint_in(v, key, c.version) &&
              (c.version == 1 || fail(errc::json_value_out_of_range, "version must be 1", key));
      } else if (key == "batch_num") {
        ok &= uint_in(v, key, c.batch_num) &&
              (c.batch_num > 0 ||
               fail(errc::json_value_out_of_range, "batch_num must be greater than 0", key));
      } else if (key == "activation_offset") {
        ok &= bool_in(v, key, c.activation_offset);
      } else if (key == "do_fusion") {
        ok &= bool_in(v, key, c.do_fusion);
      } else if (key == "fakequant_precision_mode") {
        if (!v.is_string()) {
          ok = fail(errc::json_wrong_type, "must be a string", key);
        } else if (v.template get<std::string>() == "FORCE_FP16_QUANT") {
          c.fakequant_precision_mode = fakequant_precision_mode::force_fp16_quant;
        } else if (v.template get<std::string>() != "DEFAULT") {
          ok = fail(errc::fakequant_mode_invalid, "must be \"DEFAULT\" or \"FORCE_FP16_QUANT\"",
                    key);
        }
      } else if (key == "skip_fusion_layers") {
        if (!v.is_array()) {
          ok = fail(errc::json_wrong_type, "must be a list of layer names", key);
        } else {
          for (const auto& n : v) {
            if (!n.is_string()) {
              ok = fail(errc::json_wrong_type, "must be a list of layer names", key);
              break;
            }
            c.skip_fusion_layers.push_back(n.template get<std::string>());
          }
        }
      } else {
        basic_resolved_layer<Float> l;
        l.name = key;
        if (read_layer(v, key, l)) {
          any_enabled = any_enabled || l.quant_enable;
          c.layers.push_back(std::move(l));
        } else {
          ok = false;
        }
      }
    }
    if (ok && !any_enabled) {
      ok = fail(errc::nothing_to_quantize, "no layer has quant_enable: true", "");
    }
    std::sort(c.layers.begin(), c.layers.end(),
              [](const auto& a, const auto& b) { return a.name < b.name; });
    return ok;
  }

 private:
  bool fail(errc code, std::string message, std::string_view path) {
    std::string text = path.empty() ? message : "'" + std::string(path) + "': " + message;
    diags_.push_back({code, severity::error, std::move(text), {}, {}});
    return false;
  }
  bool uint_in(const nlohmann::ordered_json& v, const std::string& path, std::uint32_t& out) {
    if (!v.is_number_integer() || v.template get<long long>() < 0 ||
        v.template get<long long>() > 0xFFFFFFFFLL) {
      return fail(errc::json_wrong_type, "must be a non-negative integer", path);
    }
    out = static_cast<std::uint32_t>(v.template get<long long>());
    return true;
  }
  bool bool_in(const nlohmann::ordered_json& v, const std::string& path, bool& out) {
    if (!v.is_boolean())
      return fail(errc::json_wrong_type, "must be true or false", path);
    out = v.template get<bool>();
    return true;
  }
  bool float_in(const nlohmann::ordered_json& v, const std::string& path, Float& out) {
    if (!v.is_number() || v.is_boolean()) {
      return fail(errc::json_wrong_type, "must be a number", path);
    }
    const double d = v.template get<double>();
    if (!std::isfinite(d) || !std::isfinite(static_cast<Float>(d))) {
      return fail(errc::json_value_out_of_range, "must be a finite number", path);
    }
    out = static_cast<Float>(d);
    return true;
  }
  bool pair_in(const nlohmann::ordered_json& v, const std::string& path, Float& a, Float& b) {
    if (!v.is_array() || v.size() != 2) {
      return fail(errc::json_wrong_type, "must be a list of 2 numbers", path);
    }
    return float_in(v[0], path, a) && float_in(v[1], path, b);
  }
  bool range(bool cond, const std::string& message, const std::string& path) {
    return cond || fail(errc::json_value_out_of_range, message, path);
  }

  bool read_layer(const nlohmann::ordered_json& j, const std::string& name,
                  basic_resolved_layer<Float>& l) {
    if (!j.is_object())
      return fail(errc::json_unknown_key, "unknown global key (a layer entry must be an object)",
                  name);
    bool ok = true;
    bool has_act = false;
    for (const auto& [key, v] : j.items()) {
      const std::string path = name + "." + key;
      if (key == "quant_enable") {
        ok &= bool_in(v, path, l.quant_enable);
      } else if (key == "dmq_balancer_param") {
        Float d{};
        if (float_in(v, path, d)) {
          l.dmq_balancer_param = d;
          const double x = v.template get<double>();
          ok &= range(x >= 0.2 && x <= 0.8, "must be in [0.2, 0.8]", path);
        } else {
          ok = false;
        }
      } else if (key == "activation_quant_params") {
        has_act = true;
        ok &= read_activation(v, path, l.activation);
      } else if (key == "weight_quant_params") {
        l.weight.emplace();
        ok &= read_weight(v, path, *l.weight);
      } else {
        ok = fail(errc::json_unknown_key, "unknown key", path);
      }
    }
    if (!has_act)
      ok = fail(errc::json_missing_key, "missing activation_quant_params", name);
    return ok;
  }

  bool read_activation(const nlohmann::ordered_json& j, const std::string& path,
                       basic_activation_params<Float>& a) {
    if (!j.is_object())
      return fail(errc::json_wrong_type, "must be an object", path);
    bool ok = true;
    bool ifmr_keys = false;
    bool hfmg_keys = false;
    bool has_algo = false;
    for (const auto& [key, v] : j.items()) {
      const std::string p = path + "." + key;
      if (key == "num_bits") {
        ok &=
            uint_in(v, p, a.num_bits) &&
            range(a.num_bits == 4 || a.num_bits == 8 || a.num_bits == 16, "must be 4, 8 or 16", p);
      } else if (key == "act_algo") {
        has_algo = true;
        if (v == "ifmr") {
          a.algo = activation_algo::ifmr;
        } else if (v == "hfmg") {
          a.algo = activation_algo::hfmg;
        } else {
          ok = fail(errc::json_value_out_of_range, "must be \"ifmr\" or \"hfmg\"", p);
        }
      } else if (key == "asymmetric") {
        ok &= bool_in(v, p, a.asymmetric);
      } else if (key == "max_percentile" || key == "min_percentile") {
        ifmr_keys = true;
        Float& f = key == "max_percentile" ? a.max_percentile : a.min_percentile;
        ok &= float_in(v, p, f) &&
              range(v.template get<double>() > 0.5 && v.template get<double>() <= 1.0,
                    "must be in (0.5, 1]", p);
      } else if (key == "search_range") {
        ifmr_keys = true;
        ok &= pair_in(v, p, a.search_range_start, a.search_range_end) &&
              range(v[0].template get<double>() > 0 &&
                        v[0].template get<double>() < v[1].template get<double>(),
                    "needs 0 < start < end", p);
      } else if (key == "search_step") {
        ifmr_keys = true;
        ok &= float_in(v, p, a.search_step) &&
              range(v.template get<double>() > 0, "must be greater than 0", p);
      } else if (key == "num_of_bins") {
        hfmg_keys = true;
        ok &= uint_in(v, p, a.num_of_bins) &&
              range(a.num_of_bins == 1024 || a.num_of_bins == 2048 || a.num_of_bins == 4096 ||
                        a.num_of_bins == 8192,
                    "must be 1024, 2048, 4096 or 8192", p);
      } else {
        ok = fail(errc::json_unknown_key, "unknown key", p);
      }
    }
    if (!has_algo)
      a.algo = hfmg_keys ? activation_algo::hfmg : activation_algo::ifmr;
    if (ifmr_keys && hfmg_keys)
      ok = fail(errc::json_value_out_of_range, "IFMR and HFMG keys are mixed", path);
    if (ok && ((a.algo == activation_algo::ifmr && hfmg_keys) ||
               (a.algo == activation_algo::hfmg && ifmr_keys))) {
      ok = fail(errc::json_value_out_of_range,
                "keys do not belong to act_algo " + std::string(to_string(a.algo)), path);
    }
    if (ok && a.algo == activation_algo::ifmr &&
        !step_fits_range(a.search_range_start, a.search_range_end, a.search_step)) {
      ok = fail(errc::json_value_out_of_range, "search_step is larger than the search range", path);
    }
    return ok;
  }

  bool read_weight(const nlohmann::ordered_json& j, const std::string& path,
                   basic_weight_params<Float>& w) {
    if (!j.is_object())
      return fail(errc::json_wrong_type, "must be an object", path);
    bool ok = true;
    std::vector<std::string> ada_keys;
    bool has_cw = false;
    for (const auto& [key, v] : j.items()) {
      const std::string p = path + "." + key;
      if (key == "num_bits") {
        ok &= uint_in(v, p, w.num_bits) &&
              range(w.num_bits == 4 || w.num_bits == 6 || w.num_bits == 7 || w.num_bits == 8,
                    "must be 4, 6, 7 or 8", p);
      } else if (key == "wts_algo") {
        if (v == "arq_quantize") {
          w.algo = weight_algo::arq;
        } else if (v == "ada_quantize") {
          w.algo = weight_algo::ada;
        } else {
          ok = fail(errc::json_value_out_of_range, "must be \"arq_quantize\" or \"ada_quantize\"",
                    p);
        }
      } else if (key == "channel_wise") {
        has_cw = true;
        ok &= bool_in(v, p, w.channel_wise);
      } else if (key == "num_iteration") {
        ada_keys.push_back(key);
        ok &= uint_in(v, p, w.num_iteration);
      } else if (key == "reg_param" || key == "warm_start") {
        ada_keys.push_back(key);
        Float& f = key == "reg_param" ? w.reg_param : w.warm_start;
        ok &=
            float_in(v, p, f) && range(v.template get<double>() > 0 && v.template get<double>() < 1,
                                       "must be in (0, 1)", p);
      } else if (key == "beta_range") {
        ada_keys.push_back(key);
        ok &= pair_in(v, p, w.beta_range_start, w.beta_range_end) &&
              range(v[0].template get<double>() > v[1].template get<double>() &&
                        v[1].template get<double>() > 0,
                    "needs start > end > 0", p);
      } else {
        ok = fail(errc::json_unknown_key, "unknown key", p);
      }
    }
    if (!has_cw)
      ok = fail(errc::json_missing_key, "missing channel_wise", path);
    if (w.algo == weight_algo::arq && !ada_keys.empty()) {
      ok = fail(errc::json_unknown_key,
                "'" + ada_keys.front() + "' does not belong to arq_quantize", path);
    }
    return ok;
  }

  std::vector<diagnostic>& diags_;
};

}  // namespace detail

/// Reads the detailed JSON config, applying the JSON rules of spec §4.5 (unknown keys, repeated
/// keys, value ranges, mixed algorithm keys). Errors name the JSON path, or `line:col` for
/// malformed JSON. Never throws.
template <class Float = float>
[[nodiscard]] result<basic_resolved_config<Float>> try_read_quant_config(std::string_view text) {
  std::vector<diagnostic> diags;
  std::vector<std::set<std::string>> seen;
  std::string duplicate;
  const auto cb = [&](int /*depth*/, nlohmann::ordered_json::parse_event_t ev,
                      nlohmann::ordered_json& parsed) {
    using ev_t = nlohmann::ordered_json::parse_event_t;
    if (ev == ev_t::object_start)
      seen.emplace_back();
    if (ev == ev_t::object_end && !seen.empty())
      seen.pop_back();
    if (ev == ev_t::key && !seen.empty() && parsed.is_string()) {
      if (!seen.back().insert(parsed.template get<std::string>()).second && duplicate.empty()) {
        duplicate = parsed.template get<std::string>();
      }
    }
    return true;
  };
  auto j = nlohmann::ordered_json::parse(text.begin(), text.end(), cb, false);
  if (j.is_discarded()) {
    // Find the failure position with the SAX acceptor, which reports the byte offset.
    struct sax : nlohmann::json_sax<nlohmann::ordered_json> {
      std::size_t byte = 0;
      std::string what;
      bool null() override { return true; }
      bool boolean(bool) override { return true; }
      bool number_integer(number_integer_t) override { return true; }
      bool number_unsigned(number_unsigned_t) override { return true; }
      bool number_float(number_float_t, const string_t&) override { return true; }
      bool string(string_t&) override { return true; }
      bool binary(binary_t&) override { return true; }
      bool start_object(std::size_t) override { return true; }
      bool key(string_t&) override { return true; }
      bool end_object() override { return true; }
      bool start_array(std::size_t) override { return true; }
      bool end_array() override { return true; }
      bool parse_error(std::size_t pos, const std::string&,
                       const nlohmann::detail::exception& e) override {
        byte = pos;
        what = e.what();
        return false;
      }
    } handler;
    nlohmann::ordered_json::sax_parse(text.begin(), text.end(), &handler);
    source_position at{1, 1};
    for (std::size_t i = 0; i + 1 < handler.byte && i < text.size(); ++i) {
      if (text[i] == '\n') {
        ++at.line;
        at.column = 1;
      } else {
        ++at.column;
      }
    }
    diags.push_back({errc::json_invalid,
                     severity::error,
                     "malformed JSON: " + handler.what,
                     {at, {at.line, at.column + 1}},
                     {}});
    return result<basic_resolved_config<Float>>(std::move(diags));
  }
  if (!duplicate.empty()) {
    diags.push_back({errc::json_invalid,
                     severity::error,
                     "key '" + duplicate + "' appears twice in one object",
                     {},
                     {}});
    return result<basic_resolved_config<Float>>(std::move(diags));
  }
  basic_resolved_config<Float> c;
  if (!detail::quant_json_reader<Float>(diags).read(j, c)) {
    return result<basic_resolved_config<Float>>(std::move(diags));
  }
  return result<basic_resolved_config<Float>>(std::move(c), std::move(diags));
}

/// Reads a layer list `[{"name": "conv1", "type": "Conv2d", "bias": true, "in_channels": 16,
/// "groups": 1}, ...]`; `bias`, `in_channels` and `groups` are optional. Never throws.
[[nodiscard]] inline result<std::vector<layer_info>> try_read_layer_list(std::string_view text) {
  using R = result<std::vector<layer_info>>;
  auto fail = [](std::string message) {
    return R(std::vector<diagnostic>{
        {errc::bad_layer_list, severity::error, std::move(message), {}, {}}});
  };
  const auto j = nlohmann::json::parse(text.begin(), text.end(), nullptr, false);
  if (j.is_discarded())
    return fail("the layer list is not valid JSON");
  if (!j.is_array())
    return fail("the layer list must be a JSON array of {\"name\", \"type\"} objects");
  std::vector<layer_info> out;
  for (std::size_t i = 0; i < j.size(); ++i) {
    const auto& e = j[i];
    const std::string at = "layer list entry " + std::to_string(i);
    if (!e.is_object())
      return fail(at + " is not an object");
    for (const auto& [key, v] : e.items()) {
      if (key != "name" && key != "type" && key != "bias" && key != "in_channels" &&
          key != "groups") {
        return fail(at + " has unknown key '" + key + "'");
      }
    }
    layer_info l;
    if (!e.contains("name") || !e["name"].is_string())
      return fail(at + " needs a string \"name\"");
    l.name = e["name"].template get<std::string>();
    if (!e.contains("type") || !e["type"].is_string())
      return fail(at + " ('" + l.name + "') needs a string \"type\"");
    const auto type_name = e["type"].template get<std::string>();
    const auto type = layer_type_from_string(type_name);
    if (!type) {
      std::string valid;
      for (const auto t : all_layer_types)
        valid += (valid.empty() ? "" : ", ") + std::string(to_string(t));
      return fail(at + " ('" + l.name + "') has type '" + type_name +
                  "', which ptq does not calibrate; valid types: " + valid);
    }
    l.type = *type;
    if (e.contains("bias")) {
      if (!e["bias"].is_boolean())
        return fail(at + " ('" + l.name + "'): \"bias\" must be true or false");
      l.has_bias = e["bias"].template get<bool>();
    }
    auto positive = [&](const char* key, std::uint32_t& dst) {
      const auto& v = e[key];
      if (!v.is_number_integer() || v.template get<long long>() < 1 ||
          v.template get<long long>() > 0xFFFFFFFFLL)
        return false;
      dst = static_cast<std::uint32_t>(v.template get<long long>());
      return true;
    };
    if (e.contains("in_channels")) {
      std::uint32_t c = 0;
      if (!positive("in_channels", c))
        return fail(at + " ('" + l.name + "'): \"in_channels\" must be a positive integer");
      l.in_channels = c;
    }
    if (e.contains("groups") && !positive("groups", l.groups)) {
      return fail(at + " ('" + l.name + "'): \"groups\" must be a positive integer");
    }
    out.push_back(std::move(l));
  }
  return R(std::move(out));
}

#if PTQ_EXCEPTIONS
/// nlohmann `from_json`: reads a detailed config object; throws `ptq::exception` with
/// the rendered errors when it breaks the rules.
template <class Float>
void from_json(const nlohmann::ordered_json& j, basic_resolved_config<Float>& c) {
  auto r = try_read_quant_config<Float>(j.dump());
  if (!r)
    throw exception(r.diagnostics(), format_diagnostics(r.diagnostics(), {}, "quant config"));
  c = std::move(r).value();
}
#endif

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
