// The typed simple-config model: both dialects of the toolkit's `AMCTConfig` (the PyTorch
// `calibration_config_pytorch.proto` and the older `calibration_config.proto`) read into one set
// of aggregates.
//
// Every optional field is a `setting<T>` (prototext/setting.hpp), which keeps "unset" apart from
// "set" (the `asymmetric` precedence depends on it) and remembers where it was set, so later
// stages can point at the line that caused an error.
// Depends on: core and prototext.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "ptq/core/abi.hpp"
#include "ptq/prototext/diagnostics.hpp"
#include "ptq/prototext/setting.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {

namespace detail {
/// A scalar field of a calibration message: its name in the proto and its member. Each such
/// message lists its fields once, in field-number order (`fields()`); the parser, the writer
/// and `==` go through that list.
template <class Msg, class T>
struct field_ref {
  std::string_view name;
  setting<T> Msg::*member;
};

template <class Msg, class T>
[[nodiscard]] constexpr field_ref<Msg, T> field(std::string_view name,
                                                setting<T> Msg::*member) noexcept {
  return {name, member};
}

/// `a == b` over the listed fields of a message (values only, as `setting` compares).
template <class Msg>
[[nodiscard]] bool fields_equal(const Msg& a, const Msg& b) {
  return std::apply([&](const auto&... f) { return ((a.*(f.member) == b.*(f.member)) && ...); },
                    Msg::fields());
}
}  // namespace detail

/// `enum FakequantPrecisionMode { FORCE_FP16_QUANT = 1; }`
enum class fakequant_precision_mode : std::uint8_t { force_fp16_quant = 1 };
/// `enum CalibrationDataType { INT8 = 1; INT16 = 2; }`
enum class calibration_data_type : std::uint8_t { int8 = 1, int16 = 2 };

/// `ARQuantize`: weights by min/max, per tensor or per output channel.
struct arq_quantize {
  setting<bool> channel_wise;
  setting<std::uint32_t> quant_bits;
  source_region where;
  static constexpr std::string_view proto_name = "ARQuantize";
  static constexpr auto fields() {
    return std::make_tuple(detail::field("channel_wise", &arq_quantize::channel_wise),
                           detail::field("quant_bits", &arq_quantize::quant_bits));
  }
  friend bool operator==(const arq_quantize& a, const arq_quantize& b) {
    return detail::fields_equal(a, b);
  }
};

/// `ADAquantize`: AdaRound.
template <class Float = float>
struct basic_ada_quantize {
  setting<std::uint32_t> num_iteration;
  setting<Float> reg_param;
  setting<Float> beta_range_start;
  setting<Float> beta_range_end;
  setting<Float> warm_start;
  setting<bool> channel_wise;
  source_region where;
  static constexpr std::string_view proto_name = "ADAquantize";
  static constexpr auto fields() {
    using m = basic_ada_quantize;
    return std::make_tuple(detail::field("num_iteration", &m::num_iteration),
                           detail::field("reg_param", &m::reg_param),
                           detail::field("beta_range_start", &m::beta_range_start),
                           detail::field("beta_range_end", &m::beta_range_end),
                           detail::field("warm_start", &m::warm_start),
                           detail::field("channel_wise", &m::channel_wise));
  }
  friend bool operator==(const basic_ada_quantize& a, const basic_ada_quantize& b) {
    return detail::fields_equal(a, b);
  }
};

/// `FMRQuantize`: IFMR activation calibration.
template <class Float = float>
struct basic_fmr_quantize {
  setting<Float> search_range_start;
  setting<Float> search_range_end;
  setting<Float> search_step;
  setting<Float> max_percentile;
  setting<Float> min_percentile;
  setting<bool> asymmetric;
  setting<calibration_data_type> dst_type;
  source_region where;
  static constexpr std::string_view proto_name = "FMRQuantize";
  static constexpr auto fields() {
    using m = basic_fmr_quantize;
    return std::make_tuple(detail::field("search_range_start", &m::search_range_start),
                           detail::field("search_range_end", &m::search_range_end),
                           detail::field("search_step", &m::search_step),
                           detail::field("max_percentile", &m::max_percentile),
                           detail::field("min_percentile", &m::min_percentile),
                           detail::field("asymmetric", &m::asymmetric),
                           detail::field("dst_type", &m::dst_type));
  }
  friend bool operator==(const basic_fmr_quantize& a, const basic_fmr_quantize& b) {
    return detail::fields_equal(a, b);
  }
};

/// `HFMGQuantize`: histogram-based activation calibration.
struct hfmg_quantize {
  setting<std::uint32_t> num_of_bins;
  setting<bool> asymmetric;
  setting<calibration_data_type> dst_type;
  source_region where;
  static constexpr std::string_view proto_name = "HFMGQuantize";
  static constexpr auto fields() {
    return std::make_tuple(detail::field("num_of_bins", &hfmg_quantize::num_of_bins),
                           detail::field("asymmetric", &hfmg_quantize::asymmetric),
                           detail::field("dst_type", &hfmg_quantize::dst_type));
  }
  friend bool operator==(const hfmg_quantize& a, const hfmg_quantize& b) {
    return detail::fields_equal(a, b);
  }
};

/// `DMQBalancer`.
template <class Float = float>
struct basic_dmq_balancer {
  setting<Float> migration_strength;
  source_region where;
  static constexpr std::string_view proto_name = "DMQBalancer";
  static constexpr auto fields() {
    return std::make_tuple(
        detail::field("migration_strength", &basic_dmq_balancer::migration_strength));
  }
  friend bool operator==(const basic_dmq_balancer& a, const basic_dmq_balancer& b) {
    return detail::fields_equal(a, b);
  }
};

/// `CalibrationConfig`. `arq`/`ada` and `ifmr`/`hfmg` are oneofs: at most one of each pair is
/// set (the parser keeps the last one written, as the toolkit does).
template <class Float = float>
struct basic_calibration_config {
  std::optional<arq_quantize> arq;
  std::optional<basic_ada_quantize<Float>> ada;
  std::optional<basic_fmr_quantize<Float>> ifmr;
  std::optional<hfmg_quantize> hfmg;
  std::optional<basic_dmq_balancer<Float>> dmq;
  source_region where;
  friend bool operator==(const basic_calibration_config& a, const basic_calibration_config& b) {
    return a.arq == b.arq && a.ada == b.ada && a.ifmr == b.ifmr && a.hfmg == b.hfmg &&
           a.dmq == b.dmq;
  }
};

/// `OverrideLayerType`: a whole CalibrationConfig for every layer of one type.
template <class Float = float>
struct basic_override_layer_type {
  setting<std::string> layer_type;
  std::optional<basic_calibration_config<Float>> calibration_config;
  source_region where;
  friend bool operator==(const basic_override_layer_type& a, const basic_override_layer_type& b) {
    return a.layer_type == b.layer_type && a.calibration_config == b.calibration_config;
  }
};

/// `OverrideLayer`: a whole CalibrationConfig for one named layer.
template <class Float = float>
struct basic_override_layer {
  setting<std::string> layer_name;
  std::optional<basic_calibration_config<Float>> calibration_config;
  source_region where;
  friend bool operator==(const basic_override_layer& a, const basic_override_layer& b) {
    return a.layer_name == b.layer_name && a.calibration_config == b.calibration_config;
  }
};

/// `AMCTConfig`, the whole simple config. `Float` is the type of the float fields; the toolkit
/// stores them as float32, which is the default.
template <class Float = float>
struct basic_amct_config {
  setting<std::uint32_t> batch_num;
  setting<bool> activation_offset;
  setting<bool> weight_offset;  ///< older dialect; only false is valid
  std::vector<located<std::string>> skip_layers;
  std::vector<located<std::string>> skip_layer_types;
  setting<ptq::fakequant_precision_mode> fakequant_precision_mode;
  std::optional<basic_calibration_config<Float>> common_config;
  std::vector<basic_override_layer_type<Float>> override_layer_types;
  std::vector<basic_override_layer<Float>> override_layer_configs;
  setting<bool> do_fusion;
  std::vector<located<std::string>> skip_fusion_layers;
  /// Older dialect: applies to the channel-wise-capable types not overridden by name.
  std::optional<basic_calibration_config<Float>> conv_calibration_config;
  /// Older dialect: applies to Linear and AvgPool2d not overridden by name.
  std::optional<basic_calibration_config<Float>> fc_calibration_config;

  /// True when the file uses the older dialect's fields.
  [[nodiscard]] bool uses_legacy_fields() const noexcept {
    return weight_offset.has_value() || conv_calibration_config || fc_calibration_config;
  }
  /// True when the legacy blocks take part in resolution (docs/config.md, The older dialect): only
  /// when the file has neither `common_config` nor `override_layer_types`.
  [[nodiscard]] bool legacy_blocks_apply() const noexcept {
    return (conv_calibration_config || fc_calibration_config) && !common_config &&
           override_layer_types.empty();
  }

  friend bool operator==(const basic_amct_config& a, const basic_amct_config& b) {
    return a.batch_num == b.batch_num && a.activation_offset == b.activation_offset &&
           a.weight_offset == b.weight_offset && a.skip_layers == b.skip_layers &&
           a.skip_layer_types == b.skip_layer_types &&
           a.fakequant_precision_mode == b.fakequant_precision_mode &&
           a.common_config == b.common_config && a.override_layer_types == b.override_layer_types &&
           a.override_layer_configs == b.override_layer_configs && a.do_fusion == b.do_fusion &&
           a.skip_fusion_layers == b.skip_fusion_layers &&
           a.conv_calibration_config == b.conv_calibration_config &&
           a.fc_calibration_config == b.fc_calibration_config;
  }
  friend bool operator!=(const basic_amct_config& a, const basic_amct_config& b) {
    return !(a == b);
  }
};

using ada_quantize = basic_ada_quantize<float>;
using fmr_quantize = basic_fmr_quantize<float>;
using dmq_balancer = basic_dmq_balancer<float>;
using calibration_config = basic_calibration_config<float>;
using override_layer_type = basic_override_layer_type<float>;
using override_layer = basic_override_layer<float>;
using amct_config = basic_amct_config<float>;

/// The toolkit's defaults for fields the config leaves unset (docs/config.md, Resolution).
namespace defaults {
inline constexpr std::uint32_t batch_num = 1;
inline constexpr bool activation_offset = true;
inline constexpr bool do_fusion = true;
inline constexpr std::uint32_t quant_bits = 8;
inline constexpr std::uint32_t num_iteration = 10000;
inline constexpr double reg_param = 0.01;
inline constexpr double beta_range_start = 20.0;
inline constexpr double beta_range_end = 2.0;
inline constexpr double warm_start = 0.2;
inline constexpr double search_range_start = 0.7;
inline constexpr double search_range_end = 1.3;
inline constexpr double search_step = 0.01;
inline constexpr double max_percentile = 0.999999;
inline constexpr double min_percentile = 0.999999;
inline constexpr std::uint32_t num_of_bins = 4096;
inline constexpr double migration_strength = 0.5;
}  // namespace defaults

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
