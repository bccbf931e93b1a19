// The activation and weight calibrations chosen at run time, for callers without a config
// (`ptq observe`, an engine calling the library directly): a small runtime description (which
// algorithm + its settings) and the compile-time policies it picks (policies.hpp). The session
// uses make_layer_calibrator (layer_calibrator.hpp) instead.
// Depends on: core.
#pragma once

#include <string>
#include <type_traits>
#include <variant>

#include "ptq/algorithms/policies.hpp"
#include "ptq/core/abi.hpp"
#include "ptq/core/algorithm_kind.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {

/// Runtime description of an activation calibration.
struct activation_settings {
  activation_algo algo = activation_algo::ifmr;
  ifmr_settings ifmr{};
  hfmg_settings hfmg{};
};

/// `s`'s settings for activation policy `Policy` (ifmr or hfmg).
template <class Policy>
[[nodiscard]] const typename Policy::settings& settings_for(const activation_settings& s) noexcept {
  if constexpr (std::is_same_v<Policy, hfmg>) {
    return s.hfmg;
  } else {
    return s.ifmr;
  }
}

/// Either observer behind one interface.
class activation_observer {
 public:
  explicit activation_observer(const activation_settings& s,
                               const kernels::kernel_set& k = kernels::default_kernels(),
                               const std::string& name = "activation")
      : obs_(make(s, k, name)),
        algo_(with_activation_policy(s.algo, [](auto policy) { return decltype(policy)::algo; })) {}

  [[nodiscard]] result<> observe(const float* x, std::size_t n) {
    return std::visit([&](auto& o) { return o.observe(x, n); }, obs_);
  }
  /// One batch in any layout a tensor_view reads, converted as the observer needs.
  [[nodiscard]] result<> observe(const tensor_view& v) {
    return std::visit([&](auto& o) { return o.observe(v); }, obs_);
  }
  template <class C>
  [[nodiscard]] result<> observe(const C& batch) {
    return observe(batch.data(), batch.size());
  }
  /// Room for `values` values in all where the observer keeps them (ifmr_observer::reserve).
  void reserve(std::size_t values) {
    std::visit([values](auto& o) { o.reserve(values); }, obs_);
  }
  [[nodiscard]] result<activation_quant_result> finalize() const {
    return std::visit([](const auto& o) { return o.finalize(); }, obs_);
  }
  /// The result of the batches so far; observing may go on (see the observers' estimate()).
  [[nodiscard]] result<activation_quant_result> estimate() const { return finalize(); }
  /// Forgets every batch.
  void reset() noexcept {
    std::visit([](auto& o) { o.reset(); }, obs_);
  }
  /// The algorithm that runs (the policy chosen for the settings' `algo`).
  [[nodiscard]] activation_algo algo() const noexcept { return algo_; }

 private:
  template <class Policies>
  struct observer_variant;
  template <class... Policies>
  struct observer_variant<policy_list<Policies...>> {
    using type = std::variant<typename Policies::observer...>;
  };
  using variant_t = typename observer_variant<activation_policies>::type;
  static variant_t make(const activation_settings& s, const kernels::kernel_set& k,
                        const std::string& name) {
    return with_activation_policy(s.algo, [&](auto policy) {
      using policy_t = decltype(policy);
      return variant_t(std::in_place_type<typename policy_t::observer>, settings_for<policy_t>(s),
                       k, name);
    });
  }
  variant_t obs_;
  activation_algo algo_;
};

/// Runtime description of a weight calibration.
struct weight_settings {
  weight_algo algo = weight_algo::arq;
  arq_settings arq{};
  ada_settings ada{};
};

/// Weight calibration by runtime algorithm: the quant params (scale_w / offset_w). For ADA these
/// are the KL initial scales; the learned rounding needs data (`ada_round`).
[[nodiscard]] inline result<weight_quant_result> calibrate_weights(
    const weight_settings& s, const tensor_view& w, layer_type op, std::size_t groups,
    const kernels::kernel_set& k = kernels::default_kernels()) {
  return with_weight_policy(s.algo, [&](auto policy) {
    using policy_t = decltype(policy);
    if constexpr (std::is_same_v<policy_t, ada>) {
      return policy_t::calibrate(w, op, groups, s.ada, k);
    } else {
      return policy_t::calibrate(w, op, groups, s.arq, k);
    }
  });
}

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
