// The compile-time calibration policies (design card: policy classes pick the weight and the
// activation algorithm). A policy is a stateless trait: its settings type, how those settings
// come from a resolved config entry (`from_plan`), and the function (weight policies) or the
// observer and state types (activation policies) that compute. Weight: `arq` (min/max), `ada`
// (AdaRound, which needs the layer's input samples). Activation: `ifmr`, `hfmg`.
//
// An activation policy serves every activation mode: its `observer` the one pass; its
// `first_pass` / `second_pass` state types and the static functions on them (begin, observe,
// next_pass, finalize, merge, read) the two passes of the bounded and sharded modes
// (two_pass_observer<Policy>, two_pass_exchange.hpp). docs/architecture.md says what a new
// activation algorithm adds.
//
// `weight_policies` / `activation_policies` list them, once; `with_weight_policy` /
// `with_activation_policy` are the one place where the config's `weight_algo` /
// `activation_algo` enums turn into these types (make_layer_calibrator, activation_observer,
// calibrate_weights and the tool's two-pass commands go through them).
//
// State and policy are apart on purpose: everything a calibration accumulates lives in a state
// aggregate (the observers' concatenated batches or histogram, the two passes' states), never
// in the policy or the settings, so states merge and serialize without changing how one
// process computes. The weight policies have no state of their own: ARQ is a function of the
// weight, ADA of the weight and the gathered samples.
// Depends on: core, kernels and config (the resolved layer).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "ptq/algorithms/activations/hfmg.hpp"
#include "ptq/algorithms/activations/ifmr.hpp"
#include "ptq/algorithms/scale_out/hfmg_two_pass.hpp"
#include "ptq/algorithms/scale_out/ifmr_two_pass.hpp"
#include "ptq/algorithms/scale_out/ifmr_wire.hpp"
#include "ptq/algorithms/scale_out/state_wire.hpp"
#include "ptq/algorithms/weights/ada.hpp"
#include "ptq/algorithms/weights/ada_kl.hpp"
#include "ptq/algorithms/weights/arq.hpp"
#include "ptq/config/plan.hpp"
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
      const tensor_view& w, layer_type op, std::size_t groups, const settings& s,
      const kernels::kernel_set& k = kernels::default_kernels()) {
    return arq_calibrate(w, op, groups, s, k);
  }

  /// The settings' own checks, made before any weight is seen.
  [[nodiscard]] static result<> check(const settings& s) {
    if (!valid_bits(s.bits)) {
      return make_error(errc::invalid_argument,
                        "ARQ bits must be in [2, 16], got " + std::to_string(s.bits));
    }
    return {};
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
      const tensor_view& w, layer_type op, std::size_t groups, const settings& s,
      const kernels::kernel_set& k = kernels::default_kernels()) {
    return ada_kl_calibrate(w, op, groups, s.channel_wise, k);
  }

  /// The learned rounding: scales and the fake-quantized weight.
  [[nodiscard]] static result<ada_result> round(
      const ada_problem& p, const settings& s,
      const kernels::kernel_set& k = kernels::default_kernels()) {
    return ada_round(p, s, k);
  }

  /// The settings' own checks (those that need the layer's shapes come with its problem, in
  /// round()).
  [[nodiscard]] static result<> check(const settings& s) { return detail::check_ada_settings(s); }
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

  /// The settings' own checks, the search range's included, made before any batch is seen.
  [[nodiscard]] static result<> check(const settings& s) { return ifmr_validate_settings(s); }

  /// Two passes (ifmr_two_pass.hpp): pass 1 keeps the tails, pass 2 sums the candidates' losses.
  using first_pass = ifmr_tails_state;
  using second_pass = ifmr_losses_state;

  /// Pass 1 for `total` elements over all batches (the percentile ranks depend on it).
  [[nodiscard]] static result<first_pass> begin(const settings& s, std::uint64_t total) {
    return make_ifmr_tails(s, total);
  }
  [[nodiscard]] static result<> observe(first_pass& st, std::size_t batch, const float* x,
                                        std::size_t n, const settings&,
                                        const kernels::kernel_set& k, const std::string& name) {
    return ptq::observe(st, batch, x, n, k, name);
  }
  [[nodiscard]] static result<> observe(second_pass& st, std::size_t batch, const float* x,
                                        std::size_t n, const settings& s,
                                        const kernels::kernel_set& k, const std::string& name) {
    return ptq::observe(st, batch, x, n, s.threads, k, name);
  }
  /// Pass 2's candidates from everything pass 1 saw.
  [[nodiscard]] static result<second_pass> next_pass(const first_pass& st, const settings& s) {
    auto plan = ifmr_plan_of(st, s);
    if (!plan)
      return plan.error();
    return make_ifmr_losses(std::move(plan).value());
  }
  [[nodiscard]] static result<activation_quant_result> finalize(const second_pass& st,
                                                                const settings& s,
                                                                const kernels::kernel_set&) {
    auto r = ptq::finalize(st, s);
    if (!r)
      return r.error();
    return r.value().result;
  }
  [[nodiscard]] static result<> merge(first_pass& st, const first_pass& other,
                                      const kernels::kernel_set&) {
    return ptq::merge(st, other);
  }
  [[nodiscard]] static result<> merge(second_pass& st, const second_pass& other,
                                      const kernels::kernel_set& k) {
    return ptq::merge(st, other, k);
  }
  /// A state from its frame (ifmr_wire.hpp); `what` names it in errors.
  [[nodiscard]] static result<first_pass> read_first_pass(std::string_view bytes,
                                                          std::string_view what,
                                                          const kernels::kernel_set&) {
    return deserialize_ifmr_tails(bytes, what);
  }
  [[nodiscard]] static result<second_pass> read_second_pass(std::string_view bytes,
                                                            std::string_view what,
                                                            const kernels::kernel_set& k) {
    return deserialize_ifmr_losses(bytes, what, k);
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

  /// The settings' own checks, made before any batch is seen.
  [[nodiscard]] static result<> check(const settings& s) { return hfmg_check_settings(s); }

  /// Two passes (hfmg_two_pass.hpp): pass 1 each batch's range, pass 2 the histograms on the
  /// merged ranges.
  using first_pass = hfmg_ranges_state;
  using second_pass = hfmg_bins_state;

  /// Pass 1; HFMG needs no element count.
  [[nodiscard]] static result<first_pass> begin(const settings&, std::uint64_t) {
    return first_pass{};
  }
  [[nodiscard]] static result<> observe(first_pass& st, std::size_t batch, const float* x,
                                        std::size_t n, const settings&,
                                        const kernels::kernel_set& k, const std::string& name) {
    return ptq::observe(st, batch, x, n, k, name);
  }
  [[nodiscard]] static result<> observe(second_pass& st, std::size_t batch, const float* x,
                                        std::size_t n, const settings& s,
                                        const kernels::kernel_set& k, const std::string& name) {
    return ptq::observe(st, batch, x, n, k, name, s.threads);
  }
  [[nodiscard]] static result<second_pass> next_pass(const first_pass& st, const settings& s) {
    return make_hfmg_bins(st, s);
  }
  [[nodiscard]] static result<activation_quant_result> finalize(const second_pass& st,
                                                                const settings& s,
                                                                const kernels::kernel_set& k) {
    auto r = ptq::finalize(st, s, k);
    if (!r)
      return r.error();
    return r.value().result;
  }
  template <class State>  // first_pass or second_pass
  [[nodiscard]] static result<> merge(State& st, const State& other, const kernels::kernel_set&) {
    return ptq::merge(st, other);
  }
  /// A state from its frame (state_wire.hpp); `what` names it in errors.
  [[nodiscard]] static result<first_pass> read_first_pass(std::string_view bytes,
                                                          std::string_view what,
                                                          const kernels::kernel_set&) {
    return deserialize_hfmg_ranges(bytes, what);
  }
  [[nodiscard]] static result<second_pass> read_second_pass(std::string_view bytes,
                                                            std::string_view what,
                                                            const kernels::kernel_set&) {
    return deserialize_hfmg_bins(bytes, what);
  }
};

/// A list of policies: the one place each kind of policy is registered.
template <class... Policies>
struct policy_list {};

/// The weight and activation policies the config can name (weight_algo, activation_algo). A new
/// algorithm's policy is added here; every variant over the policies (any_layer_calibrator,
/// activation_observer, the session's activation_pass_state) follows from these lists.
using weight_policies = policy_list<arq, ada>;
using activation_policies = policy_list<ifmr, hfmg>;

/// Calls fn(Policy{}) with the policy of `list` whose `algo` is `algo` (the first one if none
/// is: ARQ, IFMR).
template <class Algo, class Fn, class Policy, class... Rest>
decltype(auto) with_policy(Algo algo, policy_list<Policy, Rest...>, Fn&& fn) {
  if constexpr (sizeof...(Rest) == 0) {
    return std::forward<Fn>(fn)(Policy{});
  } else {
    if (algo == Policy::algo || !((algo == Rest::algo) || ...))
      return std::forward<Fn>(fn)(Policy{});
    return with_policy(algo, policy_list<Rest...>{}, std::forward<Fn>(fn));
  }
}

/// Calls fn(Policy{}) with the weight policy of `algo`: the one weight_algo -> type switch.
template <class Fn>
decltype(auto) with_weight_policy(weight_algo algo, Fn&& fn) {
  return with_policy(algo, weight_policies{}, std::forward<Fn>(fn));
}

/// Calls fn(Policy{}) with the activation policy of `algo`: the one activation_algo -> type
/// switch.
template <class Fn>
decltype(auto) with_activation_policy(activation_algo algo, Fn&& fn) {
  return with_policy(algo, activation_policies{}, std::forward<Fn>(fn));
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
