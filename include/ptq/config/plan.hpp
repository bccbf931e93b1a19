// The resolved plan: the per-layer settings that resolution (config/resolve.hpp) produces and
// the detailed JSON config (config/layer_json.hpp) writes and reads, plus `layer_info`, what they
// are resolved against. Plain aggregates.
// Depends on: core and detail.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ptq/config/model.hpp"
#include "ptq/core/abi.hpp"
#include "ptq/core/algorithm_kind.hpp"
#include "ptq/core/layer_type.hpp"
#include "ptq/detail/find.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {

/// What a quantizable layer of the model is: the one description of a layer by name, type and
/// channels, which the config's resolution and the record's checks take (a layer list, or
/// layer_info_of of a session's layer_desc, which adds the tensors).
struct layer_info {
  std::string name;
  layer_type type = layer_type::conv2d;
  bool has_bias = true;                       ///< a Linear without bias cannot take INT16
  std::optional<std::uint32_t> in_channels;   ///< INT4 weights need an even Cin (unknown: even)
  std::uint32_t groups = 1;                   ///< INT4 weights need groups == 1
  std::optional<std::uint32_t> out_channels;  ///< Cout, for the record's checks (unknown: any)
};

/// `activation_quant_params` of one layer. IFMR fields are meaningful for IFMR only,
/// `num_of_bins` for HFMG only.
template <class Float = float>
struct basic_activation_params {
  std::uint32_t num_bits = 8;
  activation_algo algo = activation_algo::ifmr;
  bool asymmetric = true;
  Float max_percentile = static_cast<Float>(defaults::max_percentile);
  Float min_percentile = static_cast<Float>(defaults::min_percentile);
  Float search_range_start = static_cast<Float>(defaults::search_range_start);
  Float search_range_end = static_cast<Float>(defaults::search_range_end);
  Float search_step = static_cast<Float>(defaults::search_step);
  std::uint32_t num_of_bins = defaults::num_of_bins;
  friend bool operator==(const basic_activation_params& a, const basic_activation_params& b) {
    if (a.num_bits != b.num_bits || a.algo != b.algo || a.asymmetric != b.asymmetric)
      return false;
    if (a.algo == activation_algo::hfmg)
      return a.num_of_bins == b.num_of_bins;
    return a.max_percentile == b.max_percentile && a.min_percentile == b.min_percentile &&
           a.search_range_start == b.search_range_start &&
           a.search_range_end == b.search_range_end && a.search_step == b.search_step;
  }
};

/// `weight_quant_params` of one layer. The ADA fields are meaningful for ADA only.
template <class Float = float>
struct basic_weight_params {
  std::uint32_t num_bits = 8;
  weight_algo algo = weight_algo::arq;
  bool channel_wise = true;
  std::uint32_t num_iteration = defaults::num_iteration;
  Float reg_param = static_cast<Float>(defaults::reg_param);
  Float warm_start = static_cast<Float>(defaults::warm_start);
  Float beta_range_start = static_cast<Float>(defaults::beta_range_start);
  Float beta_range_end = static_cast<Float>(defaults::beta_range_end);
  friend bool operator==(const basic_weight_params& a, const basic_weight_params& b) {
    if (a.num_bits != b.num_bits || a.algo != b.algo || a.channel_wise != b.channel_wise) {
      return false;
    }
    if (a.algo == weight_algo::arq)
      return true;
    return a.num_iteration == b.num_iteration && a.reg_param == b.reg_param &&
           a.warm_start == b.warm_start && a.beta_range_start == b.beta_range_start &&
           a.beta_range_end == b.beta_range_end;
  }
};

/// One layer's effective config: an entry of the detailed JSON config.
template <class Float = float>
struct basic_resolved_layer {
  std::string name;
  std::optional<layer_type> type;  ///< unknown when read back from JSON
  bool quant_enable = true;
  std::optional<Float> dmq_balancer_param;
  basic_activation_params<Float> activation;
  /// Absent where the toolkit deletes the weight params: ADA given through common_config to a
  /// type without AdaRound. Such a layer's weights are calibrated with ARQ defaults.
  std::optional<basic_weight_params<Float>> weight;
  friend bool operator==(const basic_resolved_layer& a, const basic_resolved_layer& b) {
    return a.name == b.name && a.quant_enable == b.quant_enable &&
           a.dmq_balancer_param == b.dmq_balancer_param && a.activation == b.activation &&
           a.weight == b.weight;
  }
};

/// The detailed JSON quant config (docs/config.md): globals plus one entry per layer, by name.
template <class Float = float>
struct basic_resolved_config {
  std::uint32_t version = 1;
  std::uint32_t batch_num = defaults::batch_num;
  bool activation_offset = defaults::activation_offset;
  bool do_fusion = defaults::do_fusion;
  std::optional<ptq::fakequant_precision_mode> fakequant_precision_mode;
  std::vector<std::string> skip_fusion_layers;
  std::vector<basic_resolved_layer<Float>> layers;  ///< sorted by name

  [[nodiscard]] const basic_resolved_layer<Float>* find(std::string_view name) const noexcept {
    return detail::find_by(layers, &basic_resolved_layer<Float>::name, name);
  }
  friend bool operator==(const basic_resolved_config& a, const basic_resolved_config& b) {
    return a.version == b.version && a.batch_num == b.batch_num &&
           a.activation_offset == b.activation_offset && a.do_fusion == b.do_fusion &&
           a.fakequant_precision_mode == b.fakequant_precision_mode &&
           a.skip_fusion_layers == b.skip_fusion_layers && a.layers == b.layers;
  }
};

using resolved_layer = basic_resolved_layer<float>;
using resolved_config = basic_resolved_config<float>;

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
