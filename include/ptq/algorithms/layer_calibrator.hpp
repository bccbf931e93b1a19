// One layer's calibration with its algorithms fixed at compile time:
// `layer_calibrator<WeightPolicy, ActivationPolicy>` quantizes the weights, observes the
// activation batches, finalizes and builds the layer's record entry. An engine that knows its
// algorithms makes one from the policies' settings directly, with no config at all
// (`layer_calibrator::make`, which checks the settings before any batch is seen;
// examples/session_usage/main.cpp, region "policies", shown in docs/numerics.md and
// docs/calibrate.md). FORCE_FP16_QUANT is an option of it; DMQ is not: the balance factors need
// the layer's input before its weights are quantized, which the session's phases give
// (docs/calibrate.md, "The policy path").
//
// A config-driven caller (the session) holds `any_layer_calibrator`, the variant of every
// instantiation of policies.hpp's lists, made by `make_layer_calibrator(plan)`: the enum-to-type
// step happens there (through with_weight_policy / with_activation_policy) and nowhere else. The
// calibrator's mutable state is the observer's (see policies.hpp for how scale-out extends it).
// Depends on: core and kernels.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "ptq/algorithms/activations/activation.hpp"
#include "ptq/algorithms/policies.hpp"
#include "ptq/core/abi.hpp"
#include "ptq/core/error.hpp"
#include "ptq/core/layer_record.hpp"
#include "ptq/kernels/kernel_set.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {

/// How a layer_calibrator runs.
struct layer_calibrator_options {
  std::string name = "layer";  ///< the layer's, in messages: "<name>.weight", "<name> input"
  const kernels::kernel_set* kernels = nullptr;  ///< nullptr: kernels::default_kernels()
  unsigned threads = 1;                          ///< results do not depend on it
  /// FORCE_FP16_QUANT: finalize() gives scale_d rounded to float16 as the toolkit does
  /// (with_fp16_scale), and the record entry is marked with the mode.
  bool force_fp16 = false;
};

/// The record entry of a layer from its weight and activation results: what the session writes
/// for each layer and layer_calibrator::record() for its own. `force_fp16` marks the entry
/// FORCE_FP16_QUANT (scale_d must already be the rounded one).
[[nodiscard]] inline layer_record layer_record_of(const weight_quant_result& w,
                                                  const activation_quant_result& a,
                                                  std::vector<float> balance_factors = {},
                                                  bool force_fp16 = false) {
  layer_record r;
  r.scale_d = a.scale;
  r.offset_d = a.offset;
  r.scale_w = w.scale;
  r.offset_w = w.offset;
  r.tensor_balance_factor = std::move(balance_factors);
  r.act_type = "INT" + std::to_string(a.bits);
  r.wts_type = "INT" + std::to_string(w.bits);
  if (force_fp16)
    r.fakequant_precision_mode = "FORCE_FP16_QUANT";
  return r;
}

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

  /// `name` is the layer's, used in messages ("<name>.weight", "<name> input"). The settings
  /// are not checked here (see make).
  layer_calibrator(weight_settings_type ws, activation_settings_type as,
                   const kernels::kernel_set& k = kernels::default_kernels(),
                   std::string name = "layer")
      : ws_(std::move(ws)), k_(k), name_(std::move(name)), observer_(as, k, name_ + " input") {}

  /// The calibrator `options` describe, with their threads set on both settings; the settings
  /// are not checked here (see make).
  layer_calibrator(weight_settings_type ws, activation_settings_type as,
                   const layer_calibrator_options& options)
      : layer_calibrator(with_threads(std::move(ws), options.threads),
                         with_threads(std::move(as), options.threads),
                         options.kernels != nullptr ? *options.kernels : kernels::default_kernels(),
                         options.name) {
    fp16_ = options.force_fp16;
  }

  /// The calibrator, after the checks of both settings (bits, ranges, the IFMR search range,
  /// the HFMG histogram size): a bad setting is found before the first batch, not at finalize.
  [[nodiscard]] static result<layer_calibrator> make(weight_settings_type ws,
                                                     activation_settings_type as,
                                                     const layer_calibrator_options& options = {}) {
    if (auto st = WeightPolicy::check(ws); !st)
      return make_error(st.error().code, options.name + ".weight: " + st.error().message);
    if (auto st = ActivationPolicy::check(as); !st)
      return make_error(st.error().code, options.name + " input: " + st.error().message);
    return layer_calibrator(std::move(ws), std::move(as), options);
  }

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

  /// ARQ: calibrates the weight `w` (native layout, in any layout a tensor_view reads) and
  /// writes it fake-quantized into `out` (float32 in C order, w.size() values: the weight's own
  /// memory when it is float32 in C order, so it is quantized where it lies, or a buffer the
  /// caller gives); returns scale_w / offset_w.
  template <class W = WeightPolicy, std::enable_if_t<!W::needs_samples, int> = 0>
  [[nodiscard]] result<weight_quant_result> quantize_weights(const tensor_view& w, layer_type op,
                                                             std::size_t groups, float* out) {
    auto p = calibrate_weights(w, op, groups);
    if (!p)
      return p;
    if (auto st = fake_quantize_weights(w, op, groups, p.value(), out); !st)
      return st.error();
    weights_ = p.value();
    return p;
  }
  /// quantize_weights in two steps, for a caller that checks every layer before changing any:
  /// scale_w / offset_w of `w`, ...
  template <class W = WeightPolicy, std::enable_if_t<!W::needs_samples, int> = 0>
  [[nodiscard]] result<weight_quant_result> calibrate_weights(const tensor_view& w, layer_type op,
                                                              std::size_t groups) const {
    return W::calibrate(weight_named(w), op, groups, ws_, k_);
  }
  /// ... then `w` fake-quantized with them into `out` (as quantize_weights).
  template <class W = WeightPolicy, std::enable_if_t<!W::needs_samples, int> = 0>
  [[nodiscard]] result<> fake_quantize_weights(const tensor_view& w, layer_type op,
                                               std::size_t groups, const weight_quant_result& p,
                                               float* out) const {
    return arq_fake_quantize(weight_named(w), op, groups, p, out, k_);
  }

  /// ADA: learns the rounding of the layer `p` from its samples; returns the KL scales and the
  /// fake-quantized weight (the float weight `p.weight` is not changed).
  template <class W = WeightPolicy, std::enable_if_t<W::needs_samples, int> = 0>
  [[nodiscard]] result<ada_result> quantize_weights(const ada_problem& p) {
    auto r = W::round(p, ws_, k_);
    if (r)
      weights_ = r.value().params;
    return r;
  }

  /// Makes room for `values` activation values in all, where the observer keeps them (IFMR's
  /// concatenated batches), so the batches are appended without reallocating.
  void reserve_activation(std::size_t values) { observer_.reserve(values); }
  /// One activation batch (flattened).
  [[nodiscard]] result<> observe(const float* x, std::size_t n) { return observer_.observe(x, n); }
  /// One batch in any layout a tensor_view reads (float16, bfloat16 or strided values are
  /// converted a block at a time, never as a whole copy).
  [[nodiscard]] result<> observe(const tensor_view& v) { return observer_.observe(v); }
  /// scale_d / offset_d from the batches observed (float16-rounded with force_fp16). It changes
  /// nothing, so a training loop may ask after any batch and go on observing.
  [[nodiscard]] result<activation_quant_result> finalize() const {
    auto r = observer_.finalize();
    if (r && fp16_)
      return with_fp16_scale(r.value());
    return r;
  }
  /// finalize() under the name a training loop reads best (its cost: docs/calibrate.md).
  [[nodiscard]] result<activation_quant_result> estimate() const { return finalize(); }
  /// Forgets every activation batch (the weights' result stays).
  void reset() noexcept { observer_.reset(); }

  /// The layer's record entry: the weights' scales (quantize_weights first) and the
  /// activations' (finalize of the batches so far), FORCE_FP16_QUANT marked when set.
  [[nodiscard]] result<layer_record> record() const {
    if (!weights_) {
      return make_error(errc::no_data,
                        name_ +
                            ": record() before quantize_weights(): the layer has no weight "
                            "scales yet");
    }
    auto a = finalize();
    if (!a)
      return failure_of(a);
    return layer_record_of(*weights_, a.value(), {}, fp16_);
  }
  /// Whether finalize() applies FORCE_FP16_QUANT.
  [[nodiscard]] bool force_fp16() const noexcept { return fp16_; }

  [[nodiscard]] const weight_settings_type& weight_settings() const noexcept { return ws_; }
  /// Mutable, for the run's options that are not in a config (ADA seed, progress callback).
  [[nodiscard]] weight_settings_type& weight_settings() noexcept { return ws_; }
  [[nodiscard]] const observer_type& observer() const noexcept { return observer_; }
  [[nodiscard]] const kernels::kernel_set& kernel_set() const noexcept { return k_; }
  [[nodiscard]] const std::string& name() const noexcept { return name_; }

 private:
  /// `w` named as the layer's weight in messages ("<name>.weight").
  [[nodiscard]] tensor_view weight_named(tensor_view w) const {
    w.name = name_ + ".weight";
    return w;
  }

  template <class S>
  [[nodiscard]] static S with_threads(S s, unsigned threads) {
    if constexpr (std::is_same_v<S, activation_settings_type> || needs_samples)
      s.threads = threads;
    return s;
  }

  weight_settings_type ws_;
  kernels::kernel_set k_;
  std::string name_;
  observer_type observer_;
  bool fp16_ = false;
  std::optional<weight_quant_result> weights_;  ///< the last quantize_weights' scales
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
