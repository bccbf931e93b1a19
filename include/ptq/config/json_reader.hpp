// Reading the detailed per-layer JSON config (docs/config.md) with nlohmann_json, applying the
// JSON rules (docs/errors.md, 5xx): `try_read_quant_config` (never throws) and nlohmann's
// `from_json`.
// Depends on: core, detail, prototext and nlohmann_json.
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

#include "ptq/config/plan.hpp"
#include "ptq/config/validate.hpp"
#include "ptq/core/abi.hpp"
#include "ptq/detail/json_parse.hpp"
#include "ptq/prototext/diagnostics.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {

namespace detail {

template <class Float>
class quant_json_reader {
 public:
  explicit quant_json_reader(std::vector<ptq::error>& diags) : diags_(diags) {}

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
          ok =
              fail(errc::fakequant_mode_invalid, R"(must be "DEFAULT" or "FORCE_FP16_QUANT")", key);
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
  bool fail(errc code, const std::string& message, std::string_view path) {
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
    if (!j.is_object()) {
      return fail(errc::json_unknown_key, "unknown global key (a layer entry must be an object)",
                  name);
    }
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
          ok = fail(errc::json_value_out_of_range, R"(must be "ifmr" or "hfmg")", p);
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
          ok =
              fail(errc::json_value_out_of_range, R"(must be "arq_quantize" or "ada_quantize")", p);
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

  std::vector<ptq::error>& diags_;
};

}  // namespace detail

/// Reads the detailed JSON config, applying the JSON rules of docs/config.md (unknown keys,
/// repeated keys, value ranges, mixed algorithm keys). Errors name the JSON path, or `line:col` for
/// malformed JSON. Never throws.
template <class Float = float>
[[nodiscard]] result<basic_resolved_config<Float>> try_read_quant_config(std::string_view text) {
  std::vector<error> diags;
  auto parsed = detail::parse_json_ordered(text);
  if (!parsed.ok) {
    const source_position at{static_cast<std::uint32_t>(parsed.line),
                             static_cast<std::uint32_t>(parsed.column)};
    diags.push_back({errc::json_invalid,
                     severity::error,
                     "malformed JSON: " + parsed.what,
                     {at, {at.line, at.column + 1}},
                     {}});
    return result<basic_resolved_config<Float>>(std::move(diags));
  }
  if (!parsed.duplicate.empty()) {
    diags.push_back({errc::json_invalid,
                     severity::error,
                     "key '" + parsed.duplicate + "' appears twice in one object",
                     {},
                     {}});
    return result<basic_resolved_config<Float>>(std::move(diags));
  }
  const auto& j = parsed.value;
  basic_resolved_config<Float> c;
  if (!detail::quant_json_reader<Float>(diags).read(j, c)) {
    return result<basic_resolved_config<Float>>(std::move(diags));
  }
  return result<basic_resolved_config<Float>>(std::move(c), std::move(diags));
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
