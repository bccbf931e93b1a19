// Writes a simple config back as canonical protobuf text: fields in field-number order, two-space
// indentation, floats in the shortest form that reads back to the same value. Parsing the output
// gives an equal config. Standard library only.
#pragma once

#include <string>
#include <string_view>

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
    return v != v ? "nan"
                  : shortest_repr(v);  // to_chars writes "inf", "-inf" as the reader takes them
  }
  template <class T>
  void scalar(int depth, std::string_view name, const setting<T>& s) {
    if (s.has_value())
      line(depth, std::string(name) + ": " + value_text(*s));
  }

  void calibration(int depth, std::string_view name, const basic_calibration_config<Float>& b) {
    line(depth, std::string(name) + " {");
    const int d = depth + 1;
    if (b.arq) {
      line(d, "arq_quantize {");
      scalar(d + 1, "channel_wise", b.arq->channel_wise);
      scalar(d + 1, "quant_bits", b.arq->quant_bits);
      line(d, "}");
    }
    if (b.ada) {
      const auto& a = *b.ada;
      line(d, "ada_quantize {");
      scalar(d + 1, "num_iteration", a.num_iteration);
      scalar(d + 1, "reg_param", a.reg_param);
      scalar(d + 1, "beta_range_start", a.beta_range_start);
      scalar(d + 1, "beta_range_end", a.beta_range_end);
      scalar(d + 1, "warm_start", a.warm_start);
      scalar(d + 1, "channel_wise", a.channel_wise);
      line(d, "}");
    }
    if (b.ifmr) {
      const auto& q = *b.ifmr;
      line(d, "ifmr_quantize {");
      scalar(d + 1, "search_range_start", q.search_range_start);
      scalar(d + 1, "search_range_end", q.search_range_end);
      scalar(d + 1, "search_step", q.search_step);
      scalar(d + 1, "max_percentile", q.max_percentile);
      scalar(d + 1, "min_percentile", q.min_percentile);
      scalar(d + 1, "asymmetric", q.asymmetric);
      scalar(d + 1, "dst_type", q.dst_type);
      line(d, "}");
    }
    if (b.hfmg) {
      const auto& q = *b.hfmg;
      line(d, "hfmg_quantize {");
      scalar(d + 1, "num_of_bins", q.num_of_bins);
      scalar(d + 1, "asymmetric", q.asymmetric);
      scalar(d + 1, "dst_type", q.dst_type);
      line(d, "}");
    }
    if (b.dmq) {
      line(d, "dmq_balancer {");
      scalar(d + 1, "migration_strength", b.dmq->migration_strength);
      line(d, "}");
    }
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
