// The compile-time calibration policies (design card: policy classes pick the weight and the
// activation algorithm). A policy is a stateless trait: its settings type, how those settings
// come from a resolved config entry (`from_plan`), and the function (weight policies) or the
// observer type (activation policies) that computes. Weight: `arq` (min/max), `ada` (AdaRound,
// which needs the layer's input samples). Activation: `ifmr`, `hfmg`.
//
// `with_weight_policy` / `with_activation_policy` are the one place where the config's
// `weight_algo` / `activation_algo` enums turn into these types; make_layer_calibrator,
// activation_observer and calibrate_weights go through them. Code that needs no policy type
// branches on the enums itself: two_pass_observer and deserialize_state (the scale-out
// passes), the session's batch paths (observe_batch.hpp, sharded_activations.hpp, which read
// the enum back from a calibrator with `activation_settings_of`), weight_algo_of below, the
// config reader and writer, the report and the tool.
//
// State and policy are apart on purpose: everything a calibration accumulates lives in the
// observer's `state_type` aggregate (ifmr_state: the concatenated batches; hfmg_state: the
// merged histogram), never in the policy or the settings. A scale-out can therefore add, to
// exactly these two policies, `merge(state&, const state&)` and a serialized form of `state`
// without changing how a single process computes. The weight policies have no state of their
// own: ARQ is a function of the weight, ADA of the weight and the gathered samples.
// Depends on config (the resolved layer), core, kernels and the algorithms.
#pragma once

#include <cstddef>
#include <utility>

#include "ptq/algorithms/ada.hpp"
#include "ptq/algorithms/ada_kl.hpp"
#include "ptq/algorithms/arq.hpp"
#include "ptq/algorithms/hfmg.hpp"
#include "ptq/algorithms/ifmr.hpp"
#include "ptq/config/resolve.hpp"
#include "ptq/core/abi.hpp"
#include "ptq/core/algorithm_kind.hpp"
#include "ptq/kernels/kernel_set.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {

/// ARQ weight policy (docs/numerics.md, ARQ): per-tensor or per-channel min/max, offset 0.
struct arq {
  using settings = arq_settings;
  static constexpr weight_algo algo = weight_algo::arq;
  /// ARQ needs only the weight.
  static constexpr bool needs_samples = false;

  /// The layer's `weight_quant_params`; a layer without them (ADA given to a type without
  /// AdaRound, which the toolkit quantizes with ARQ defaults, docs/config.md) gets 8 bits, per
  /// channel where the type supports it.
  [[nodiscard]] static settings from_plan(const resolved_layer& l) noexcept {
    settings s;
    if (l.weight && l.weight->algo == weight_algo::arq) {
      s.bits = static_cast<int>(l.weight->num_bits);
      s.channel_wise = l.weight->channel_wise;
    } else {
      s.channel_wise = !l.type || supports_channel_wise(*l.type);
    }
    return s;
  }

  [[nodiscard]] static result<weight_quant_result> calibrate(
      const tensor_ref& w, layer_type op, std::size_t groups, const settings& s,
      const kernels::kernel_set& k = kernels::default_kernels()) {
    return arq_calibrate(w, op, groups, s, k);
  }
};

/// ADA weight policy (docs/ada.md): KL initial scales, then a rounding learned from samples.
struct ada {
  using settings = ada_settings;
  static constexpr weight_algo algo = weight_algo::ada;
  /// The rounding is learned from the layer's input samples (`round`).
  static constexpr bool needs_samples = true;

  /// The ADA fields of the layer's `weight_quant_params` (seed, threads and progress are the
  /// run's: set them on the result).
  [[nodiscard]] static settings from_plan(const resolved_layer& l) {
    settings s;
    if (!l.weight)
      return s;
    const auto& w = *l.weight;
    s.num_iteration = w.num_iteration;
    s.reg_param = w.reg_param;
    s.warm_start = w.warm_start;
    s.beta_range_start = w.beta_range_start;
    s.beta_range_end = w.beta_range_end;
    s.channel_wise = w.channel_wise;
    return s;
  }

  /// The quant params alone: the KL initial scales (docs/ada.md, Initial scale).
  [[nodiscard]] static result<weight_quant_result> calibrate(
      const tensor_ref& w, layer_type op, std::size_t groups, const settings& s,
      const kernels::kernel_set& k = kernels::default_kernels()) {
    return ada_kl_calibrate(w, op, groups, s.channel_wise, k);
  }

  /// The learned rounding: scales and the fake-quantized weight.
  [[nodiscard]] static result<ada_result> round(
      const ada_problem& p, const settings& s,
      const kernels::kernel_set& k = kernels::default_kernels()) {
    return ada_round(p, s, k);
  }
};

/// IFMR activation policy (docs/numerics.md, IFMR).
struct ifmr {
  using settings = ifmr_settings;
  using observer = ifmr_observer;
  static constexpr activation_algo algo = activation_algo::ifmr;

  /// The layer's `activation_quant_params` (threads are the run's: set them on the result).
  [[nodiscard]] static settings from_plan(const resolved_layer& l) noexcept {
    const auto& a = l.activation;
    settings s;
    s.search_range_start = a.search_range_start;
    s.search_range_end = a.search_range_end;
    s.search_step = a.search_step;
    s.max_percentile = a.max_percentile;
    s.min_percentile = a.min_percentile;
    s.bits = static_cast<int>(a.num_bits);
    s.asymmetric = a.asymmetric;
    return s;
  }
};

/// HFMG activation policy (docs/numerics.md, HFMG).
struct hfmg {
  using settings = hfmg_settings;
  using observer = hfmg_observer;
  static constexpr activation_algo algo = activation_algo::hfmg;

  /// The layer's `activation_quant_params` (threads are the run's: set them on the result).
  [[nodiscard]] static settings from_plan(const resolved_layer& l) noexcept {
    const auto& a = l.activation;
    settings s;
    s.num_of_bins = a.num_of_bins;
    s.bits = static_cast<int>(a.num_bits);
    s.asymmetric = a.asymmetric;
    return s;
  }
};

/// Calls fn(Policy{}) with the weight policy of `algo`: the one weight_algo -> type switch.
template <class Fn>
decltype(auto) with_weight_policy(weight_algo algo, Fn&& fn) {
  if (algo == weight_algo::ada)
    return std::forward<Fn>(fn)(ada{});
  return std::forward<Fn>(fn)(arq{});
}

/// Calls fn(Policy{}) with the activation policy of `algo`: the one activation_algo -> type
/// switch.
template <class Fn>
decltype(auto) with_activation_policy(activation_algo algo, Fn&& fn) {
  if (algo == activation_algo::hfmg)
    return std::forward<Fn>(fn)(hfmg{});
  return std::forward<Fn>(fn)(ifmr{});
}

/// The weight policy of a resolved layer: ADA only where the layer has ADA params and its type
/// supports AdaRound (otherwise the toolkit's ARQ defaults, docs/config.md, Resolution).
[[nodiscard]] inline weight_algo weight_algo_of(const resolved_layer& l) noexcept {
  const bool ada_round_type = !l.type || supports_ada_round(*l.type);
  return l.weight && l.weight->algo == weight_algo::ada && ada_round_type ? weight_algo::ada
                                                                          : weight_algo::arq;
}

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
