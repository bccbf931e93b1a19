// One layer's calibration with its algorithms fixed at compile time:
// `layer_calibrator<WeightPolicy, ActivationPolicy>` quantizes the weights, observes the
// activation batches and finalizes. An engine that knows its algorithms builds one from the
// policies' settings directly, with no config at all (examples/session_usage/main.cpp, region
// "policies", shown in docs/numerics.md).
//
// A config-driven caller (the session) holds `any_layer_calibrator`, the variant of every
// instantiation of policies.hpp's lists, made by `make_layer_calibrator(plan)`: the enum-to-type
// step happens there (through with_weight_policy / with_activation_policy) and nowhere else. The
// calibrator's mutable state is the observer's (see policies.hpp for how scale-out extends it).
// Depends on: core and kernels.
#pragma once

#include <cstddef>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "ptq/algorithms/activations/activation.hpp"
#include "ptq/algorithms/policies.hpp"
#include "ptq/core/abi.hpp"
#include "ptq/kernels/kernel_set.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {

template <class WeightPolicy, class ActivationPolicy>
class layer_calibrator {
 public:
  using weight_policy = WeightPolicy;
  using activation_policy = ActivationPolicy;
  using weight_settings_type = typename WeightPolicy::settings;
  using activation_settings_type = typename ActivationPolicy::settings;
  using observer_type = typename ActivationPolicy::observer;
  /// Whether the weights need the layer's input samples (ADA) or only the weight (ARQ).
  static constexpr bool needs_samples = WeightPolicy::needs_samples;

  /// `name` is the layer's, used in messages ("<name>.weight", "<name> input").
  layer_calibrator(weight_settings_type ws, activation_settings_type as,
                   const kernels::kernel_set& k = kernels::default_kernels(),
                   std::string name = "layer")
      : ws_(std::move(ws)), k_(k), name_(std::move(name)), observer_(as, k, name_ + " input") {}

  /// The settings of a resolved config entry; `threads` is the run's (results do not depend on
  /// it).
  [[nodiscard]] static layer_calibrator from_plan(
      const resolved_layer& plan, unsigned threads = 1,
      const kernels::kernel_set& k = kernels::default_kernels()) {
    auto ws = WeightPolicy::from_plan(plan);
    if constexpr (needs_samples)
      ws.threads = threads;
    auto as = ActivationPolicy::from_plan(plan);
    as.threads = threads;
    return layer_calibrator(std::move(ws), as, k, plan.name);
  }

  /// ARQ: calibrates the weight `w` (native layout, `shape`) and fake-quantizes it in place;
  /// returns scale_w / offset_w.
  template <class W = WeightPolicy, std::enable_if_t<!W::needs_samples, int> = 0>
  [[nodiscard]] result<weight_quant_result> quantize_weights(float* w,
                                                             const std::vector<std::size_t>& shape,
                                                             layer_type op, std::size_t groups) {
    auto p = calibrate_weights(w, shape, op, groups);
    if (!p)
      return p;
    if (auto st = fake_quantize_weights(w, shape, op, groups, p.value()); !st)
      return st.error();
    return p;
  }
  /// quantize_weights in two steps, for a caller that checks every layer before changing any:
  /// scale_w / offset_w of `w` (not changed), ...
  template <class W = WeightPolicy, std::enable_if_t<!W::needs_samples, int> = 0>
  [[nodiscard]] result<weight_quant_result> calibrate_weights(const float* w,
                                                              const std::vector<std::size_t>& shape,
                                                              layer_type op,
                                                              std::size_t groups) const {
    return W::calibrate(tensor_ref{w, shape, name_ + ".weight"}, op, groups, ws_, k_);
  }
  /// ... then `w` fake-quantized in place with them.
  template <class W = WeightPolicy, std::enable_if_t<!W::needs_samples, int> = 0>
  [[nodiscard]] result<> fake_quantize_weights(float* w, const std::vector<std::size_t>& shape,
                                               layer_type op, std::size_t groups,
                                               const weight_quant_result& p) const {
    if (auto st = arq_fake_quantize(w, shape, op, groups, p, k_); !st)
      return make_error(st.error().code, name_ + ".weight: " + st.error().message);
    return {};
  }

  /// ADA: learns the rounding of the layer `p` from its samples; returns the KL scales and the
  /// fake-quantized weight (the float weight `p.weight` is not changed).
  template <class W = WeightPolicy, std::enable_if_t<W::needs_samples, int> = 0>
  [[nodiscard]] result<ada_result> quantize_weights(const ada_problem& p) const {
    return W::round(p, ws_, k_);
  }

  /// Makes room for `values` activation values in all, where the observer keeps them (IFMR's
  /// concatenated batches), so the batches are appended without reallocating.
  void reserve_activation(std::size_t values) { observer_.reserve(values); }
  /// One activation batch (flattened).
  [[nodiscard]] result<> observe(const float* x, std::size_t n) { return observer_.observe(x, n); }
  /// One batch as a file stores it (float16 converted a block at a time, not as a whole copy).
  [[nodiscard]] result<> observe(const stored_values& v) { return observer_.observe(v); }
  /// scale_d / offset_d from the batches observed.
  [[nodiscard]] result<activation_quant_result> finalize() const { return observer_.finalize(); }

  [[nodiscard]] const weight_settings_type& weight_settings() const noexcept { return ws_; }
  /// Mutable, for the run's options that are not in a config (ADA seed, progress callback).
  [[nodiscard]] weight_settings_type& weight_settings() noexcept { return ws_; }
  [[nodiscard]] const observer_type& observer() const noexcept { return observer_; }
  [[nodiscard]] const kernels::kernel_set& kernel_set() const noexcept { return k_; }
  [[nodiscard]] const std::string& name() const noexcept { return name_; }

 private:
  weight_settings_type ws_;
  kernels::kernel_set k_;
  std::string name_;
  observer_type observer_;
};

namespace detail {

template <class... Variants>
struct variant_concat;
template <class... A>
struct variant_concat<std::variant<A...>> {
  using type = std::variant<A...>;
};
template <class... A, class... B, class... Rest>
struct variant_concat<std::variant<A...>, std::variant<B...>, Rest...>
    : variant_concat<std::variant<A..., B...>, Rest...> {};

template <class Weight, class... Activations>
using calibrators_of = std::variant<layer_calibrator<Weight, Activations>...>;

template <class Weights, class Activations>
struct calibrator_variant;
template <class... Weights, class... Activations>
struct calibrator_variant<policy_list<Weights...>, policy_list<Activations...>> {
  using type = typename variant_concat<calibrators_of<Weights, Activations...>...>::type;
};

}  // namespace detail

/// Every weight policy with every activation policy (policies.hpp's lists), for a caller that
/// picks the algorithms at run time: <arq, ifmr>, <arq, hfmg>, <ada, ifmr>, <ada, hfmg>.
using any_layer_calibrator =
    typename detail::calibrator_variant<weight_policies, activation_policies>::type;

/// The calibrator a resolved config entry asks for: its weight and activation policies, with
/// settings from the entry. The only place (with the with_*_policy switches it uses) where a
/// config enum becomes a type.
[[nodiscard]] inline any_layer_calibrator make_layer_calibrator(
    const resolved_layer& plan, unsigned threads = 1,
    const kernels::kernel_set& k = kernels::default_kernels()) {
  return with_weight_policy(weight_algo_of(plan), [&](auto w) {
    return with_activation_policy(plan.activation.algo, [&](auto a) {
      using calibrator = layer_calibrator<decltype(w), decltype(a)>;
      return any_layer_calibrator(calibrator::from_plan(plan, threads, k));
    });
  });
}

/// Whether the calibrator's weight policy learns from samples (ADA).
[[nodiscard]] inline bool needs_samples(const any_layer_calibrator& c) noexcept {
  return std::visit([](const auto& x) { return std::decay_t<decltype(x)>::needs_samples; }, c);
}

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
