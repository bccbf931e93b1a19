// Per-layer resolution of a simple config against a model's layer list (docs/config.md): the
// toolkit's precedence, defaults and degradations, giving the detailed per-layer config (the
// plan types are in config/plan.hpp).
// Depends on: core, detail and prototext.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "ptq/config/layer_types.hpp"
#include "ptq/config/model.hpp"
#include "ptq/config/plan.hpp"
#include "ptq/core/abi.hpp"
#include "ptq/core/algorithm_kind.hpp"
#include "ptq/detail/find.hpp"
#include "ptq/detail/suggest.hpp"
#include "ptq/prototext/diagnostics.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {

/// Options of `resolve_config`.
struct resolve_options {
  /// Reproduce the toolkit's rejection of `channel_wise: true` inherited from common_config by
  /// a Linear or AvgPool2d layer. Off (default): fall back to per tensor with a warning.
  bool strict_channel_wise = false;
};

namespace detail {

enum class block_source : std::uint8_t { none, common, legacy, override_type, override_layer };

template <class Float>
class config_resolver {
 public:
  config_resolver(const basic_amct_config<Float>& c, resolve_options opt,
                  std::vector<ptq::error>& diags)
      : c_(c), opt_(opt), diags_(diags) {}

  std::optional<basic_resolved_config<Float>> run(const std::vector<layer_info>& layers) {
    const std::size_t errors_before = error_count();
    check_layer_list(layers);
    if (error_count() != errors_before)
      return std::nullopt;
    check_names(layers);
    index_config();

    basic_resolved_config<Float> out;
    out.batch_num = c_.batch_num.value_or(defaults::batch_num);
    out.activation_offset = c_.activation_offset.value_or(defaults::activation_offset);
    out.do_fusion = c_.do_fusion.value_or(defaults::do_fusion);
    out.fakequant_precision_mode = c_.fakequant_precision_mode.value;
    for (const auto& s : c_.skip_fusion_layers)
      out.skip_fusion_layers.push_back(s.value);

    bool any_enabled = false;
    for (const auto& l : layers) {
      out.layers.push_back(resolve_layer(l));
      any_enabled = any_enabled || out.layers.back().quant_enable;
    }
    if (!any_enabled && error_count() == errors_before) {
      error(errc::nothing_to_quantize,
            "no layer is left to quantize: every layer is skipped by skip_layers or "
            "skip_layer_types",
            {});
    }
    std::sort(out.layers.begin(), out.layers.end(),
              [](const auto& a, const auto& b) { return a.name < b.name; });
    if (error_count() != errors_before)
      return std::nullopt;
    return out;
  }

 private:
  using calib = basic_calibration_config<Float>;

  [[nodiscard]] std::size_t error_count() const {
    return static_cast<std::size_t>(std::count_if(diags_.begin(), diags_.end(), is_error));
  }
  void error(errc code, std::string message, source_region where, std::string note = {}) {
    diags_.emplace_back(code, severity::error, std::move(message), where, std::move(note));
  }
  void warning(std::string message, source_region where) {
    if (skipped_layer_)  // a layer the config skips runs in float: its degradations do not matter
      return;
    diags_.push_back({errc::degraded_setting, severity::warning, std::move(message), where, {}});
  }

  void check_layer_list(const std::vector<layer_info>& layers) {
    if (layers.empty()) {
      error(errc::bad_layer_list, "the layer list is empty: the model has no layer to quantize",
            {});
    }
    std::unordered_set<std::string_view> names;
    names.reserve(layers.size());
    for (std::size_t i = 0; i < layers.size(); ++i) {
      if (layers[i].name.empty()) {
        error(errc::bad_layer_list, "layer " + std::to_string(i) + " of the layer list has no name",
              {});
      } else if (!names.insert(layers[i].name).second) {
        error(errc::bad_layer_list, "the layer list names layer '" + layers[i].name + "' twice",
              {});
      }
    }
  }

  /// The nearest layer name, for the note of an unknown one; only the first few unknown names
  /// get one, as each costs a pass over every layer name.
  std::string closest(const std::vector<layer_info>& layers, std::string_view name) {
    if (++suggestions_ > max_suggestions)
      return {};
    std::vector<std::string_view> names;
    names.reserve(layers.size());
    for (const auto& l : layers)
      names.push_back(l.name);
    return did_you_mean(name, names);
  }

  void check_names(const std::vector<layer_info>& layers) {
    const name_index<layer_info> index(layers, &layer_info::name);
    const auto find = [&](std::string_view name) { return index.find(name); };
    for (const auto& s : c_.skip_layers) {
      if (!find(s.value)) {
        error(errc::unknown_layer,
              "skip_layers names layer '" + s.value + "', which is not in the model", s.where,
              closest(layers, s.value));
      }
    }
    for (const auto& o : c_.override_layer_configs) {
      if (o.layer_name.has_value() && !find(*o.layer_name)) {
        error(
            errc::unknown_layer,
            "override_layer_configs names layer '" + *o.layer_name + "', which is not in the model",
            o.layer_name.where, closest(layers, *o.layer_name));
      }
    }
    for (const auto& s : c_.skip_fusion_layers) {
      const auto* l = find(s.value);
      if (!l) {
        error(errc::unknown_layer,
              "skip_fusion_layers names layer '" + s.value + "', which is not in the model",
              s.where, closest(layers, s.value));
      } else if (!supports_bn_fusion(l->type)) {
        error(errc::not_fusable,
              "skip_fusion_layers names layer '" + s.value + "' of type " +
                  std::string(to_string(l->type)) +
                  "; only Conv1d, Conv2d and Conv3d layers are fused with BatchNorm",
              s.where);
      }
    }
  }

  struct chosen {
    const calib* block = nullptr;
    block_source source = block_source::none;
    [[nodiscard]] bool via_override() const noexcept {
      return source == block_source::override_type || source == block_source::override_layer;
    }
  };

  /// The layer-name lookups of every layer's resolution, made once: the override blocks by
  /// layer name (the last of duplicates, which are an error anyway) and the skipped names.
  void index_config() {
    for (const auto& o : c_.override_layer_configs) {
      if (o.layer_name.has_value() && o.calibration_config)
        layer_overrides_[*o.layer_name] = &*o.calibration_config;
    }
    for (const auto& s : c_.skip_layers)
      skipped_layers_.insert(s.value);
  }

  chosen choose(const layer_info& l) const {
    const calib* found = nullptr;
    if (const auto it = layer_overrides_.find(l.name); it != layer_overrides_.end())
      return {it->second, block_source::override_layer};
    for (const auto& o : c_.override_layer_types) {
      if (o.layer_type.has_value() && *o.layer_type == to_string(l.type) && o.calibration_config) {
        found = &*o.calibration_config;
      }
    }
    if (found)
      return {found, block_source::override_type};
    if (c_.legacy_blocks_apply()) {
      const auto& legacy =
          supports_channel_wise(l.type) ? c_.conv_calibration_config : c_.fc_calibration_config;
      if (legacy)
        return {&*legacy, block_source::legacy};
      return {};
    }
    if (c_.common_config)
      return {&*c_.common_config, block_source::common};
    return {};
  }

  std::string source_name(const chosen& ch) const {
    switch (ch.source) {
      case block_source::override_layer:
        return "override_layer_configs";
      case block_source::override_type:
        return "override_layer_types";
      case block_source::legacy:
        return "the older dialect's calibration config";
      default:
        return "common_config";
    }
  }

  // A setting that the layer cannot take: an error through an override, else a warning.
  bool unsupported(const chosen& ch, const layer_info& l, const std::string& what,
                   const std::string& fallback, source_region where) {
    const std::string layer = "layer '" + l.name + "' (" + std::string(to_string(l.type)) + ")";
    if (ch.via_override()) {
      error(errc::unsupported_setting,
            what + " is not supported by " + layer + "; set through " + source_name(ch), where);
      return false;
    }
    warning(what + " from " + source_name(ch) + " is not supported by " + layer + "; " + fallback,
            where);
    return true;
  }

  basic_resolved_layer<Float> resolve_layer(const layer_info& l) {
    const chosen ch = choose(l);
    static const calib empty_block{};
    const calib& b = ch.block ? *ch.block : empty_block;
    basic_resolved_layer<Float> out;
    out.name = l.name;
    out.type = l.type;
    out.quant_enable = !skipped(l);
    skipped_layer_ = !out.quant_enable;
    resolve_activation(ch, b, l, out.activation);
    if (b.dmq) {
      if (!supports_dmq(l.type)) {
        unsupported(ch, l, "dmq_balancer", "it is dropped", b.dmq->where);
      } else {
        out.dmq_balancer_param =
            b.dmq->migration_strength.value_or(static_cast<Float>(defaults::migration_strength));
      }
    }
    resolve_weight(ch, b, l, out.weight);
    skipped_layer_ = false;
    return out;
  }

  bool skipped(const layer_info& l) const {
    if (skipped_layers_.count(l.name) != 0u)
      return true;
    for (const auto& s : c_.skip_layer_types) {
      if (s.value == to_string(l.type))
        return true;
    }
    return false;
  }

  void resolve_activation(const chosen& ch, const calib& b, const layer_info& l,
                          basic_activation_params<Float>& a) {
    const setting<calibration_data_type>* dst = nullptr;
    const setting<bool>* asym = nullptr;
    if (b.hfmg) {
      a.algo = activation_algo::hfmg;
      a.num_of_bins = b.hfmg->num_of_bins.value_or(defaults::num_of_bins);
      dst = &b.hfmg->dst_type;
      asym = &b.hfmg->asymmetric;
    } else if (b.ifmr) {
      const auto& q = *b.ifmr;
      a.max_percentile = q.max_percentile.value_or(a.max_percentile);
      a.min_percentile = q.min_percentile.value_or(a.min_percentile);
      a.search_range_start = q.search_range_start.value_or(a.search_range_start);
      a.search_range_end = q.search_range_end.value_or(a.search_range_end);
      a.search_step = q.search_step.value_or(a.search_step);
      dst = &q.dst_type;
      asym = &q.asymmetric;
    }
    if (dst && dst->has_value() && **dst == calibration_data_type::int16) {
      a.num_bits = 16;
      if (!supports_int16_activation(l.type, l.has_bias)) {
        const std::string why = l.type == layer_type::linear ? " without bias" : "";
        if (unsupported(ch, l, "INT16 activations (dst_type: INT16)" + why, "activations use INT8",
                        dst->where)) {
          a.num_bits = 8;
        }
      }
    }
    // Precedence: the chosen block, then common_config when it names the same algorithm, then
    // activation_offset (docs/config.md, Resolution).
    const setting<bool>* common_asym = nullptr;
    if (c_.common_config) {
      const auto& cc = *c_.common_config;
      const activation_algo common_algo = cc.hfmg ? activation_algo::hfmg : activation_algo::ifmr;
      if (common_algo == a.algo) {
        common_asym = cc.hfmg ? &cc.hfmg->asymmetric : cc.ifmr ? &cc.ifmr->asymmetric : nullptr;
      }
    }
    if (asym && asym->has_value()) {
      a.asymmetric = **asym;
      if (a.asymmetric && symmetric_only(l.type)) {
        unsupported(ch, l, "asymmetric: true", "it is quantized symmetric", asym->where);
      }
    } else if (common_asym && common_asym->has_value()) {
      a.asymmetric = **common_asym;
      if (a.asymmetric && symmetric_only(l.type)) {
        const chosen from_common{c_.common_config ? &*c_.common_config : nullptr,
                                 block_source::common};
        unsupported(from_common, l, "asymmetric: true", "it is quantized symmetric",
                    common_asym->where);
      }
    } else {
      a.asymmetric = c_.activation_offset.value_or(defaults::activation_offset);
    }
    if (symmetric_only(l.type))
      a.asymmetric = false;
  }

  void resolve_weight(const chosen& ch, const calib& b, const layer_info& l,
                      std::optional<basic_weight_params<Float>>& out) {
    basic_weight_params<Float> w;
    w.channel_wise = supports_channel_wise(l.type);
    const setting<bool>* cw = nullptr;
    if (b.ada) {
      if (!supports_ada_round(l.type)) {
        if (unsupported(ch, l, "ada_quantize", "its weights are quantized by ARQ with defaults",
                        b.ada->where)) {
          out.reset();
        }
        return;
      }
      const auto& a = *b.ada;
      w.algo = weight_algo::ada;
      w.num_iteration = a.num_iteration.value_or(w.num_iteration);
      w.reg_param = a.reg_param.value_or(w.reg_param);
      w.warm_start = a.warm_start.value_or(w.warm_start);
      w.beta_range_start = a.beta_range_start.value_or(w.beta_range_start);
      w.beta_range_end = a.beta_range_end.value_or(w.beta_range_end);
      cw = &a.channel_wise;
    } else if (b.arq) {
      const auto& q = *b.arq;
      cw = &q.channel_wise;
      if (q.quant_bits.has_value()) {
        w.num_bits = *q.quant_bits;
        if ((w.num_bits == 6 || w.num_bits == 7) && !supports_winograd_bits(l.type)) {
          if (unsupported(ch, l, "quant_bits: " + std::to_string(w.num_bits), "weights use 8 bits",
                          q.quant_bits.where)) {
            w.num_bits = 8;
          }
        } else if (w.num_bits == 4 &&
                   (l.groups > 1 || (l.in_channels && *l.in_channels % 2 != 0))) {
          const std::string why =
              l.groups > 1 ? " with groups " + std::to_string(l.groups)
                           : " with an odd input channel count " + std::to_string(*l.in_channels);
          if (unsupported(ch, l, "quant_bits: 4" + why, "weights use 8 bits", q.quant_bits.where)) {
            w.num_bits = 8;
          }
        }
      }
    }
    if (cw && cw->has_value()) {
      w.channel_wise = **cw;
      if (w.channel_wise && !supports_channel_wise(l.type)) {
        const bool strict = opt_.strict_channel_wise && !ch.via_override();
        if (strict) {
          error(errc::unsupported_setting,
                "channel_wise: true is not supported by layer '" + l.name + "' (" +
                    std::string(to_string(l.type)) + "); set through " + source_name(ch) +
                    " (strict mode, as the toolkit)",
                cw->where);
        } else if (unsupported(ch, l, "channel_wise: true", "it is quantized per tensor",
                               cw->where)) {
          w.channel_wise = false;
        }
      }
    }
    out = w;
  }

  static constexpr std::size_t max_suggestions = 20;
  const basic_amct_config<Float>& c_;
  std::unordered_map<std::string_view, const calib*> layer_overrides_;
  std::unordered_set<std::string_view> skipped_layers_;
  std::size_t suggestions_ = 0;
  bool skipped_layer_ = false;  ///< resolving a layer the config skips: no W605
  resolve_options opt_;
  std::vector<ptq::error>& diags_;
};

}  // namespace detail

/// Resolves every layer's effective config (docs/config.md, Resolution). Errors (unknown names,
/// settings a layer cannot take through an override, nothing to quantize) come back with the config
/// position that caused them; degradations of common_config values come back as warnings.
template <class Float>
[[nodiscard]] result<basic_resolved_config<Float>> resolve_config(
    const basic_amct_config<Float>& config, const std::vector<layer_info>& layers,
    resolve_options options = {}) {
  std::vector<error> diags;
  auto out = detail::config_resolver<Float>(config, options, diags).run(layers);
  if (!out)
    return result<basic_resolved_config<Float>>(std::move(diags));
  return result<basic_resolved_config<Float>>(std::move(*out), std::move(diags));
}

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
