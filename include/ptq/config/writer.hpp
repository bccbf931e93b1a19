// Writes a simple config back as canonical protobuf text: fields in field-number order, two-space
// indentation, floats in the shortest form that reads back to the same value. Parsing the output
// gives an equal config.
// Depends on: core and detail.
#pragma once

#include <cmath>
#include <string>
#include <string_view>
#include <tuple>

#include "ptq/config/model.hpp"
#include "ptq/core/abi.hpp"
#include "ptq/detail/float_format.hpp"
#include "ptq/detail/text_escape.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {
namespace detail {

template <class Float>
class config_writer {
 public:
  std::string out;

  void root(const basic_amct_config<Float>& c) {
    scalar(0, "batch_num", c.batch_num);
    scalar(0, "activation_offset", c.activation_offset);
    scalar(0, "weight_offset", c.weight_offset);
    for (const auto& s : c.skip_layers)
      line(0, "skip_layers: " + quote_text(s.value));
    for (const auto& s : c.skip_layer_types)
      line(0, "skip_layer_types: " + quote_text(s.value));
    if (c.fakequant_precision_mode.has_value())
      line(0, "fakequant_precision_mode: FORCE_FP16_QUANT");
    if (c.common_config)
      calibration(0, "common_config", *c.common_config);
    for (const auto& o : c.override_layer_types) {
      line(0, "override_layer_types {");
      if (o.layer_type.has_value())
        line(1, "layer_type: " + quote_text(*o.layer_type));
      if (o.calibration_config)
        calibration(1, "calibration_config", *o.calibration_config);
      line(0, "}");
    }
    for (const auto& o : c.override_layer_configs) {
      line(0, "override_layer_configs {");
      if (o.layer_name.has_value())
        line(1, "layer_name: " + quote_text(*o.layer_name));
      if (o.calibration_config)
        calibration(1, "calibration_config", *o.calibration_config);
      line(0, "}");
    }
    scalar(0, "do_fusion", c.do_fusion);
    for (const auto& s : c.skip_fusion_layers)
      line(0, "skip_fusion_layers: " + quote_text(s.value));
    if (c.conv_calibration_config)
      calibration(0, "conv_calibration_config", *c.conv_calibration_config);
    if (c.fc_calibration_config)
      calibration(0, "fc_calibration_config", *c.fc_calibration_config);
  }

 private:
  void line(int depth, const std::string& text) {
    out.append(static_cast<std::size_t>(depth) * 2, ' ');
    out += text;
    out += '\n';
  }
  static std::string value_text(bool v) { return v ? "true" : "false"; }
  static std::string value_text(std::uint32_t v) { return std::to_string(v); }
  static std::string value_text(float v) { return float_text(v); }
  static std::string value_text(double v) { return float_text(v); }
  static std::string value_text(calibration_data_type v) {
    return v == calibration_data_type::int16 ? "INT16" : "INT8";
  }
  template <class T>
  static std::string float_text(T v) {
    return std::isnan(v)
               ? "nan"
               : shortest_repr(v);  // to_chars writes "inf", "-inf" as the reader takes them
  }
  template <class T>
  void scalar(int depth, std::string_view name, const setting<T>& s) {
    if (s.has_value())
      line(depth, std::string(name) + ": " + value_text(*s));
  }

  // A message of scalar fields, in the order of its field list (field-number order).
  template <class Msg>
  void message(int depth, std::string_view name, const Msg& m) {
    line(depth, std::string(name) + " {");
    std::apply([&](const auto&... fd) { (scalar(depth + 1, fd.name, m.*(fd.member)), ...); },
               Msg::fields());
    line(depth, "}");
  }

  void calibration(int depth, std::string_view name, const basic_calibration_config<Float>& b) {
    line(depth, std::string(name) + " {");
    const int d = depth + 1;
    if (b.arq)
      message(d, "arq_quantize", *b.arq);
    if (b.ada)
      message(d, "ada_quantize", *b.ada);
    if (b.ifmr)
      message(d, "ifmr_quantize", *b.ifmr);
    if (b.hfmg)
      message(d, "hfmg_quantize", *b.hfmg);
    if (b.dmq)
      message(d, "dmq_balancer", *b.dmq);
    line(depth, "}");
  }
};

}  // namespace detail

/// The config as canonical protobuf text (what `ptq fmt` prints).
template <class Float>
[[nodiscard]] std::string write_config(const basic_amct_config<Float>& config) {
  detail::config_writer<Float> w;
  w.root(config);
  return std::move(w.out);
}

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
