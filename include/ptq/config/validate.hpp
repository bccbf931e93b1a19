// Checks of a parsed simple config that need no layer list (docs/errors.md): required fields, value
// ranges, type names, duplicates, and the older dialect's rules.
// Depends on: core, detail and prototext.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ptq/config/layer_types.hpp"
#include "ptq/config/model.hpp"
#include "ptq/core/abi.hpp"
#include "ptq/core/hfmg_bins.hpp"
#include "ptq/core/ifmr_search_size.hpp"
#include "ptq/detail/float_format.hpp"
#include "ptq/prototext/diagnostics.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {
namespace detail {

__extension__ using int128 = __int128;

/// An exact decimal m * 10^e, for the toolkit's decimal comparison of search steps.
struct exact_decimal {
  int128 mantissa = 0;
  int exponent = 0;
};

inline exact_decimal to_exact_decimal(std::string_view s) {
  exact_decimal d;
  bool neg = false;
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) {
    neg = s[0] == '-';
    s.remove_prefix(1);
  }
  bool after_point = false;
  std::size_t i = 0;
  for (; i < s.size() && s[i] != 'e' && s[i] != 'E'; ++i) {
    if (s[i] == '.') {
      after_point = true;
      continue;
    }
    d.mantissa = d.mantissa * 10 + (s[i] - '0');
    if (after_point)
      --d.exponent;
  }
  if (i < s.size())
    d.exponent += std::atoi(std::string(s.substr(i + 1)).c_str());
  if (neg)
    d.mantissa = -d.mantissa;
  return d;
}

/// Compares step with (end - start) as exact decimals of the float32 shortest forms.
/// Returns true when step <= end - start.
template <class Float>
bool step_fits_range(Float start, Float end, Float step) {
  if (!std::isfinite(start) || !std::isfinite(end) || !std::isfinite(step)) {
    return toolkit_double(step) <= toolkit_double(end) - toolkit_double(start);
  }
  auto a = to_exact_decimal(shortest_repr(start));
  auto b = to_exact_decimal(shortest_repr(end));
  auto c = to_exact_decimal(shortest_repr(step));
  const int lo = std::min({a.exponent, b.exponent, c.exponent});
  const int hi = std::max({a.exponent, b.exponent, c.exponent});
  if (hi - lo > 24) {  // magnitudes so far apart that doubles decide it exactly enough
    return toolkit_double(step) <= toolkit_double(end) - toolkit_double(start);
  }
  auto scale = [lo](exact_decimal x) {
    for (int k = x.exponent; k > lo; --k)
      x.mantissa *= 10;
    return x.mantissa;
  };
  return scale(c) <= scale(b) - scale(a);
}

template <class Float>
class config_checker {
 public:
  config_checker(const basic_amct_config<Float>& c, std::vector<ptq::error>& diags)
      : c_(c), diags_(diags) {}

  void required() {
    for (const auto& o : c_.override_layer_types) {
      if (!o.layer_type.has_value())
        missing("layer_type", "OverrideLayerType", o.where);
      if (!o.calibration_config)
        missing("calibration_config", "OverrideLayerType", o.where);
    }
    for (const auto& o : c_.override_layer_configs) {
      if (!o.layer_name.has_value())
        missing("layer_name", "OverrideLayer", o.where);
      if (!o.calibration_config)
        missing("calibration_config", "OverrideLayer", o.where);
    }
    if (!c_.uses_legacy_fields())
      return;
    // The older dialect's required fields.
    if (!c_.common_config && c_.override_layer_types.empty()) {
      const source_region at = c_.conv_calibration_config ? c_.conv_calibration_config->where
                               : c_.fc_calibration_config ? c_.fc_calibration_config->where
                                                          : c_.weight_offset.where;
      if (!c_.conv_calibration_config) {
        missing("conv_calibration_config", "AMCTConfig (older dialect)", at);
      }
      if (!c_.fc_calibration_config) {
        missing("fc_calibration_config", "AMCTConfig (older dialect)", at);
      }
    }
    auto legacy_block = [this](const basic_calibration_config<Float>& b) {
      if (b.arq && !b.arq->channel_wise.has_value()) {
        missing("channel_wise", "ARQuantize (older dialect)", b.arq->where);
      }
      if (b.ifmr) {
        const auto& q = *b.ifmr;
        if (!q.search_range_start.has_value())
          missing("search_range_start", "FMRQuantize (older dialect)", q.where);
        if (!q.search_range_end.has_value())
          missing("search_range_end", "FMRQuantize (older dialect)", q.where);
        if (!q.search_step.has_value())
          missing("search_step", "FMRQuantize (older dialect)", q.where);
        if (!q.max_percentile.has_value())
          missing("max_percentile", "FMRQuantize (older dialect)", q.where);
        if (!q.min_percentile.has_value())
          missing("min_percentile", "FMRQuantize (older dialect)", q.where);
      }
    };
    if (c_.conv_calibration_config)
      legacy_block(*c_.conv_calibration_config);
    if (c_.fc_calibration_config)
      legacy_block(*c_.fc_calibration_config);
    for (const auto& o : c_.override_layer_configs) {
      if (o.calibration_config)
        legacy_block(*o.calibration_config);
    }
  }

  void values() {
    if (c_.batch_num.has_value() && *c_.batch_num == 0) {
      error(errc::batch_num_invalid, "batch_num must be greater than 0", c_.batch_num.where);
    }
    if (c_.weight_offset.has_value() && *c_.weight_offset) {
      error(errc::weight_offset_invalid,
            "weight_offset: true is not supported; weights are always quantized without offset",
            c_.weight_offset.where);
    }
    if (c_.common_config)
      block(*c_.common_config);
    for (const auto& o : c_.override_layer_types) {
      if (o.calibration_config)
        block(*o.calibration_config);
    }
    for (const auto& o : c_.override_layer_configs) {
      if (o.calibration_config)
        block(*o.calibration_config);
    }
    if (c_.conv_calibration_config)
      block(*c_.conv_calibration_config);
    if (c_.fc_calibration_config) {
      block(*c_.fc_calibration_config);
      const auto& arq = c_.fc_calibration_config->arq;
      if (arq && arq->channel_wise.value_or(false)) {
        error(errc::legacy_fc_channel_wise,
              "fc_calibration_config may not set channel_wise: true (Linear and AvgPool2d are "
              "quantized per tensor)",
              arq->channel_wise.where);
      }
    }
    if ((c_.conv_calibration_config || c_.fc_calibration_config) && !c_.legacy_blocks_apply()) {
      std::string names;
      if (c_.conv_calibration_config)
        names = "conv_calibration_config";
      if (c_.fc_calibration_config)
        names += names.empty() ? "fc_calibration_config" : " and fc_calibration_config";
      const auto at = c_.conv_calibration_config ? c_.conv_calibration_config->where
                                                 : c_.fc_calibration_config->where;
      warning(errc::legacy_blocks_ignored,
              names + " ignored: the file also has " +
                  (c_.common_config ? std::string("common_config")
                                    : std::string("override_layer_types")),
              at);
    }
    names_unique(c_.skip_layers, "skip_layers", "layer");
    names_unique(c_.skip_fusion_layers, "skip_fusion_layers", "layer");
    names_unique(c_.skip_layer_types, "skip_layer_types", "layer type");
    std::size_t known_types = 0;
    for (const auto& t : c_.skip_layer_types) {
      if (type_name_ok(t.value, t.where))
        ++known_types;
    }
    if (!c_.skip_layer_types.empty() && distinct_count(c_.skip_layer_types) == known_types &&
        known_types >= quantizable_type_names.size()) {
      error(errc::all_types_skipped,
            "skip_layer_types skips every quantizable layer type; nothing would be quantized",
            c_.skip_layer_types.front().where);
    }
    std::vector<located<std::string>> types;
    for (const auto& o : c_.override_layer_types) {
      if (!o.layer_type.has_value())
        continue;
      types.push_back({*o.layer_type, o.layer_type.where});
      type_name_ok(*o.layer_type, o.layer_type.where);
    }
    names_unique(types, "override_layer_types", "layer type");
    std::vector<located<std::string>> layers;
    for (const auto& o : c_.override_layer_configs) {
      if (o.layer_name.has_value())
        layers.push_back({*o.layer_name, o.layer_name.where});
    }
    names_unique(layers, "override_layer_configs", "layer");
  }

 private:
  void error(errc code, std::string message, source_region where, std::string note = {}) {
    diags_.emplace_back(code, severity::error, std::move(message), where, std::move(note));
  }
  void warning(errc code, std::string message, source_region where) {
    diags_.push_back({code, severity::warning, std::move(message), where, {}});
  }
  void missing(std::string_view field, std::string_view message, source_region where) {
    error(errc::missing_field,
          "required field '" + std::string(field) + "' is missing in " + std::string(message),
          where);
  }

  template <class T>
  static double num(const setting<T>& s, double fallback) {
    return s.has_value() ? toolkit_double(*s) : fallback;
  }

  void block(const basic_calibration_config<Float>& b) {
    if (b.arq && b.arq->quant_bits.has_value()) {
      const auto bits = *b.arq->quant_bits;
      if (bits != 4 && bits != 6 && bits != 7 && bits != 8) {
        error(errc::quant_bits_invalid,
              "quant_bits " + std::to_string(bits) + " is not supported; use 4, 6, 7 or 8",
              b.arq->quant_bits.where, "6 and 7 apply to Conv2d only");
      }
    }
    if (b.ada)
      ada(*b.ada);
    if (b.ifmr)
      ifmr(*b.ifmr);
    if (b.hfmg && b.hfmg->num_of_bins.has_value()) {
      const auto n = *b.hfmg->num_of_bins;
      if (!is_supported_num_of_bins(n)) {
        error(errc::num_of_bins_invalid,
              "num_of_bins " + std::to_string(n) + supported_num_of_bins_text,
              b.hfmg->num_of_bins.where);
      }
    }
    if (b.dmq && b.dmq->migration_strength.has_value()) {
      const double a = num(b.dmq->migration_strength, defaults::migration_strength);
      if (!(a >= 0.2 && a <= 0.8)) {
        error(errc::migration_strength_out_of_range,
              "migration_strength " + value_text(a) + " is out of range; it must be in [0.2, 0.8]",
              b.dmq->migration_strength.where);
      }
    }
  }

  void ada(const basic_ada_quantize<Float>& a) {
    auto open_unit = [this](const setting<Float>& s, std::string_view name) {
      if (!s.has_value())
        return;
      const double v = toolkit_double(*s);
      if (!(v > 0.0 && v < 1.0)) {
        error(errc::ada_param_out_of_range,
              std::string(name) + " " + value_text(v) + " is out of range; it must be in (0, 1)",
              s.where);
      }
    };
    open_unit(a.reg_param, "reg_param");
    open_unit(a.warm_start, "warm_start");
    const double start = num(a.beta_range_start, defaults::beta_range_start);
    const double end = num(a.beta_range_end, defaults::beta_range_end);
    if (!(start > end && end > 0.0) || !std::isfinite(start)) {
      const auto where = a.beta_range_end.has_value()     ? a.beta_range_end.where
                         : a.beta_range_start.has_value() ? a.beta_range_start.where
                                                          : a.where;
      error(errc::beta_range_invalid,
            "beta range [" + value_text(start) + ", " + value_text(end) +
                "] is invalid; it needs beta_range_start > beta_range_end > 0",
            where);
    }
  }

  void ifmr(const basic_fmr_quantize<Float>& q) {
    auto percentile = [this](const setting<Float>& s, std::string_view name) {
      if (!s.has_value())
        return;
      const double v = toolkit_double(*s);
      if (!(v > 0.5 && v <= 1.0)) {
        error(errc::percentile_out_of_range,
              std::string(name) + " " + value_text(v) + " is out of range; it must be in (0.5, 1]",
              s.where);
      }
    };
    percentile(q.max_percentile, "max_percentile");
    percentile(q.min_percentile, "min_percentile");
    const double start = num(q.search_range_start, defaults::search_range_start);
    const double end = num(q.search_range_end, defaults::search_range_end);
    const double step = num(q.search_step, defaults::search_step);
    bool range_ok = true;
    if (!(start > 0.0) || !std::isfinite(start) || !std::isfinite(end)) {
      range_ok = false;
      error(errc::search_range_invalid,
            "search range [" + value_text(start) + ", " + value_text(end) +
                "] is invalid; both ends must be finite and the start greater than 0",
            !std::isfinite(end) && q.search_range_end.has_value() ? q.search_range_end.where
            : q.search_range_start.has_value()                    ? q.search_range_start.where
                                                                  : q.where);
    } else if (!(start < end)) {
      range_ok = false;
      error(errc::search_range_invalid,
            "search range [" + value_text(start) + ", " + value_text(end) +
                "] is empty; search_range_start must be less than search_range_end",
            q.search_range_end.has_value()     ? q.search_range_end.where
            : q.search_range_start.has_value() ? q.search_range_start.where
                                               : q.where);
    }
    const auto step_where = q.search_step.has_value() ? q.search_step.where : q.where;
    if (!(step > 0.0) || !std::isfinite(step)) {
      error(errc::search_step_invalid,
            "search_step " + value_text(step) + " must be a finite number greater than 0",
            step_where);
    } else if (range_ok &&
               !step_fits_range(static_cast<Float>(q.search_range_start.value_or(Float(0.7f))),
                                static_cast<Float>(q.search_range_end.value_or(Float(1.3f))),
                                static_cast<Float>(q.search_step.value_or(Float(0.01f))))) {
      error(errc::search_step_invalid,
            "search_step " + value_text(step) + " is larger than the search range " +
                value_text(start) + " .. " + value_text(end),
            step_where);
    } else if (range_ok && !(detail::ifmr_toolkit_candidate_count(start, end, step) <=
                             detail::ifmr_max_candidates)) {
      error(errc::search_step_invalid,
            "search_step " + value_text(step) + " over the search range " + value_text(start) +
                " .. " + value_text(end) + " " +
                detail::ifmr_too_many_text(detail::ifmr_toolkit_candidate_count(start, end, step)),
            step_where, "use a larger search_step (the toolkit's default 0.01 gives 61)");
    }
  }

  bool type_name_ok(const std::string& name, source_region where) {
    if (is_quantizable_type_name(name))
      return true;
    std::string valid;
    for (const auto n : quantizable_type_names) {
      if (!valid.empty())
        valid += ", ";
      valid += n;
    }
    error(errc::unknown_layer_type, "'" + name + "' is not a quantizable layer type", where,
          "valid types: " + valid);
    return false;
  }

  static std::size_t distinct_count(const std::vector<located<std::string>>& v) {
    std::unordered_set<std::string_view> seen;
    for (const auto& x : v)
      seen.insert(x.value);
    return seen.size();
  }

  /// One error per repeated name, pointing at its first occurrence; linear in the names.
  void names_unique(const std::vector<located<std::string>>& v, std::string_view field,
                    std::string_view what) {
    std::unordered_map<std::string_view, std::size_t> first;
    first.reserve(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) {
      const auto [it, fresh] = first.emplace(v[i].value, i);
      if (!fresh) {
        const auto& j = v[it->second];
        error(errc::duplicate_entry,
              std::string(field) + " names " + std::string(what) + " '" + v[i].value +
                  "' twice (first at " + std::to_string(j.where.begin.line) + ":" +
                  std::to_string(j.where.begin.column) + ")",
              v[i].where);
      }
    }
  }

  const basic_amct_config<Float>& c_;
  std::vector<ptq::error>& diags_;
};

}  // namespace detail

/// Appends an error for each required field the config lacks (override blocks, and the older
/// dialect's required fields).
template <class Float>
void check_required_fields(const basic_amct_config<Float>& config, std::vector<error>& diags) {
  detail::config_checker<Float>(config, diags).required();
}

/// Appends the errors and warnings of the checks that need no layer list (docs/errors.md).
template <class Float>
void validate_config(const basic_amct_config<Float>& config, std::vector<error>& diags) {
  detail::config_checker<Float>(config, diags).values();
}

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
