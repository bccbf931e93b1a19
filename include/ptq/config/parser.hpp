// Reads simple-config text (both dialects) into the typed model with the toolkit's semantics:
// protobuf text-format *merge* (last scalar wins, messages merge, the last oneof member wins).
// The result-returning API works with -fno-exceptions.
// Depends on: core, detail and prototext.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "ptq/config/model.hpp"
#include "ptq/config/validate.hpp"
#include "ptq/core/abi.hpp"
#include "ptq/detail/text_util.hpp"
#include "ptq/prototext/diagnostics.hpp"
#include "ptq/prototext/lexer.hpp"
#include "ptq/prototext/text_binder.hpp"
#include "ptq/prototext/text_tree.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {

/// Options of `try_parse_config`.
struct parse_options {
  text_limits limits{};
  /// Run the checks that need no layer list (docs/errors.md, 3xx). Off: only parse and bind.
  bool validate = true;
};

namespace detail {

template <class Float>
class config_binder : public text::text_binder<config_binder<Float>, Float> {
 public:
  explicit config_binder(std::vector<ptq::error>& diags)
      : text::text_binder<config_binder<Float>, Float>(diags) {}

  void bind_root(const text::text_message& msg, basic_amct_config<Float>& c) {
    for (const auto& f : msg) {
      const auto& n = f.name;
      if (n == "batch_num") {
        bind_scalar(f, c.batch_num, &base::to_uint32);
      } else if (n == "activation_offset") {
        bind_scalar(f, c.activation_offset, &base::to_bool);
      } else if (n == "weight_offset") {
        bind_scalar(f, c.weight_offset, &base::to_bool);
      } else if (n == "skip_layers") {
        bind_strings(f, c.skip_layers);
      } else if (n == "skip_layer_types") {
        bind_strings(f, c.skip_layer_types);
      } else if (n == "fakequant_precision_mode") {
        bind_scalar(f, c.fakequant_precision_mode, &config_binder::to_fakequant_mode);
      } else if (n == "common_config") {
        bind_single_message(f, c.common_config, &config_binder::bind_calibration);
      } else if (n == "override_layer_types") {
        bind_repeated_message(f, c.override_layer_types, &config_binder::bind_override_type);
      } else if (n == "override_layer_configs") {
        bind_repeated_message(f, c.override_layer_configs, &config_binder::bind_override_layer);
      } else if (n == "do_fusion") {
        bind_scalar(f, c.do_fusion, &base::to_bool);
      } else if (n == "skip_fusion_layers") {
        bind_strings(f, c.skip_fusion_layers);
      } else if (n == "conv_calibration_config") {
        bind_single_message(f, c.conv_calibration_config, &config_binder::bind_calibration);
      } else if (n == "fc_calibration_config") {
        bind_single_message(f, c.fc_calibration_config, &config_binder::bind_calibration);
      } else {
        unknown(f, "AMCTConfig",
                {"batch_num", "activation_offset", "weight_offset", "skip_layers",
                 "skip_layer_types", "fakequant_precision_mode", "common_config",
                 "override_layer_types", "override_layer_configs", "do_fusion",
                 "skip_fusion_layers", "conv_calibration_config", "fc_calibration_config"});
      }
    }
  }

 private:
  using calib = basic_calibration_config<Float>;

  using base = text::text_binder<config_binder<Float>, Float>;
  friend base;
  using base::bind_oneof;
  using base::bind_repeated_message;
  using base::bind_scalar;
  using base::bind_single_message;
  using base::bind_strings;
  using base::diags_;
  using base::expect_message;
  using base::expect_single;
  using base::to_bool;
  using base::to_enum;
  using base::to_float;
  using base::to_string_value;
  using base::to_uint32;
  using base::unknown;
  using base::warning;

  bool to_fakequant_mode(const text::text_field& f, const text::text_value& v,
                         fakequant_precision_mode& out) {
    return to_enum(f, v, out, {{"FORCE_FP16_QUANT", 1}});
  }
  bool to_data_type(const text::text_field& f, const text::text_value& v,
                    calibration_data_type& out) {
    return to_enum(f, v, out, {{"INT8", 1}, {"INT16", 2}});
  }

  void bind_calibration(const text::text_message& msg, calib& c) {
    for (const auto& f : msg) {
      const auto& n = f.name;
      if (n == "arq_quantize") {
        bind_oneof(f, c.arq, c.ada, "ada_quantize", &config_binder::bind_fields<arq_quantize>);
      } else if (n == "ada_quantize") {
        bind_oneof(f, c.ada, c.arq, "arq_quantize",
                   &config_binder::bind_fields<basic_ada_quantize<Float>>);
      } else if (n == "ifmr_quantize") {
        bind_oneof(f, c.ifmr, c.hfmg, "hfmg_quantize",
                   &config_binder::bind_fields<basic_fmr_quantize<Float>>);
      } else if (n == "hfmg_quantize") {
        bind_oneof(f, c.hfmg, c.ifmr, "ifmr_quantize", &config_binder::bind_fields<hfmg_quantize>);
      } else if (n == "dmq_balancer") {
        bind_single_message(f, c.dmq, &config_binder::bind_fields<basic_dmq_balancer<Float>>);
      } else {
        unknown(f, "CalibrationConfig",
                {"arq_quantize", "ada_quantize", "ifmr_quantize", "hfmg_quantize", "dmq_balancer"});
      }
    }
  }

  // The conversion of each field type of the calibration messages, picked by bind_field.
  bool to_value(const text::text_field& f, const text::text_value& v, bool& out) {
    return to_bool(f, v, out);
  }
  bool to_value(const text::text_field& f, const text::text_value& v, std::uint32_t& out) {
    return to_uint32(f, v, out);
  }
  bool to_value(const text::text_field& f, const text::text_value& v, Float& out) {
    return to_float(f, v, out);
  }
  bool to_value(const text::text_field& f, const text::text_value& v, calibration_data_type& out) {
    return to_data_type(f, v, out);
  }

  // A message of scalar fields (ARQuantize, ADAquantize, FMRQuantize, HFMGQuantize,
  // DMQBalancer), bound through its field list (`Msg::fields()`, model.hpp).
  template <class Msg>
  void bind_fields(const text::text_message& msg, Msg& m) {
    for (const auto& f : msg) {
      const bool known = std::apply(
          [&](const auto&... fd) { return (bind_field(f, m, fd) || ...); }, Msg::fields());
      if (!known) {
        unknown(
            f, Msg::proto_name,
            std::apply([](const auto&... fd) { return std::vector<std::string_view>{fd.name...}; },
                       Msg::fields()));
      }
    }
  }
  template <class Msg, class T>
  bool bind_field(const text::text_field& f, Msg& m, const field_ref<Msg, T>& fd) {
    if (f.name != fd.name)
      return false;
    using conversion =
        bool (config_binder::*)(const text::text_field&, const text::text_value&, T&);
    bind_scalar(f, m.*(fd.member), static_cast<conversion>(&config_binder::to_value));
    return true;
  }

  void bind_override_type(const text::text_message& msg, basic_override_layer_type<Float>& o) {
    for (const auto& f : msg) {
      if (f.name == "layer_type") {
        bind_scalar(f, o.layer_type, &base::to_string_value);
      } else if (f.name == "calibration_config") {
        bind_single_message(f, o.calibration_config, &config_binder::bind_calibration);
      } else {
        unknown(f, "OverrideLayerType", {"layer_type", "calibration_config"});
      }
    }
  }

  void bind_override_layer(const text::text_message& msg, basic_override_layer<Float>& o) {
    for (const auto& f : msg) {
      if (f.name == "layer_name") {
        bind_scalar(f, o.layer_name, &base::to_string_value);
      } else if (f.name == "calibration_config") {
        bind_single_message(f, o.calibration_config, &config_binder::bind_calibration);
      } else {
        unknown(f, "OverrideLayer", {"layer_name", "calibration_config"});
      }
    }
  }
};

/// Where the first CR that no LF follows is (line and column as the lexer counts them), or
/// {0, 0} when there is none.
[[nodiscard]] inline source_position first_lone_cr(std::string_view text) noexcept {
  source_position at{1, 1};
  std::size_t i = starts_with_bom(text) ? utf8_bom.size() : 0;
  for (; i < text.size(); ++i) {
    if (text[i] == '\r' && detail::ends_line(text, i))
      return at;
    if (text[i] == '\n') {
      ++at.line;
      at.column = 1;
    } else {
      ++at.column;
    }
  }
  return {};
}

}  // namespace detail

/// Parses simple-config text (either dialect) into the typed model and, unless
/// `options.validate` is off, checks it (docs/errors.md). Never throws a config error: errors and
/// warnings come back in the result, each with a code and a `line:col` region.
template <class Float = float>
[[nodiscard]] result<basic_amct_config<Float>> try_parse_config(std::string_view text,
                                                                parse_options options = {}) {
  auto tree = text::parse_text_tree(text, options.limits);
  if (!tree)
    return result<basic_amct_config<Float>>(tree.diagnostics());
  std::vector<error> diags;
  if (const auto cr = detail::first_lone_cr(text); cr.line != 0) {
    diags.push_back({errc::lone_cr_line_end,
                     severity::warning,
                     "this line ends with a CR alone (classic Mac OS line ends): ptq reads it as a "
                     "line end, but protobuf's text format, and so the toolkit, reads it as a "
                     "space, where a '#' comment hides the rest of the file",
                     {cr, {cr.line, cr.column + 1}},
                     "save the file with LF (or CR LF) line ends"});
  }
  basic_amct_config<Float> config;
  detail::config_binder<Float>(diags).bind_root(tree.value(), config);
  check_required_fields(config, diags);
  if (options.validate)
    validate_config(config, diags);
  if (std::any_of(diags.begin(), diags.end(), is_error)) {
    return result<basic_amct_config<Float>>(std::move(diags));
  }
  return result<basic_amct_config<Float>>(std::move(config), std::move(diags));
}

// A program that links ptq::session (CMake's ptq::ptq does) has the float parser compiled there
// once (src/session/), so the TUs that parse a config do not instantiate it again.
#if defined(PTQ_SESSION_COMPILED) && PTQ_SESSION_COMPILED
extern template result<basic_amct_config<float>> try_parse_config<float>(std::string_view,
                                                                         parse_options);
#endif

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
