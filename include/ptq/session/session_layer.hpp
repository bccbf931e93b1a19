// One layer's state in a calibration session: its description (weights fused, balanced and
// fake-quantized as the phases go), its resolved config entry, its algorithms and activation
// mode state, and what each phase produced; and the one helper that divides an input by the
// layer's DMQ factors.
// Depends on: core, config and algorithms (the layer calibrator).
#pragma once

#include <cmath>
#include <cstddef>
#include <limits>
#include <optional>
#include <type_traits>
#include <variant>
#include <vector>

#include "ptq/algorithms/activations/activation.hpp"
#include "ptq/algorithms/activations/dmq.hpp"
#include "ptq/algorithms/activations/invariant_histogram.hpp"
#include "ptq/algorithms/activations/search_stats.hpp"
#include "ptq/algorithms/layer_calibrator.hpp"
#include "ptq/algorithms/scale_out/two_pass_observer.hpp"
#include "ptq/algorithms/weights/arq.hpp"
#include "ptq/config/resolve.hpp"
#include "ptq/core/abi.hpp"
#include "ptq/core/error.hpp"
#include "ptq/session/layer.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {

/// Signal-to-quantization-noise ratio of `q` against `x` in dB (inf when they are equal).
[[nodiscard]] inline double sqnr_db(const float* x, const float* q, std::size_t n) noexcept {
  double signal = 0.0;
  double noise = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    const double d = static_cast<double>(x[i]) - static_cast<double>(q[i]);
    signal += static_cast<double>(x[i]) * static_cast<double>(x[i]);
    noise += d * d;
  }
  if (noise == 0.0)
    return std::numeric_limits<double>::infinity();
  if (signal == 0.0)
    return -std::numeric_limits<double>::infinity();
  return 10.0 * std::log10(signal / noise);
}

/// The bounded and sharded modes' observer of one layer, and the element count every batch
/// must have (the first batch's: IFMR's ranks need the total before pass 1).
template <class Policy>
struct two_pass_layer {
  two_pass_observer<Policy> observer;
  std::size_t batch_size = 0;
};

namespace detail {
template <class Policies>
struct pass_state_variant;
template <class... Policies>
struct pass_state_variant<policy_list<Policies...>> {
  using type = std::variant<std::monostate, two_pass_layer<Policies>..., invariant_histogram>;
};
}  // namespace detail

/// What an activation mode keeps per layer besides the calibrator (session_layer): nothing, the
/// two-pass observer of each activation policy (policies.hpp's list), or the order-invariant
/// histogram.
using activation_pass_state = typename detail::pass_state_variant<activation_policies>::type;

/// One layer's state in a session. Move-only: `desc`'s views point into its own storage.
struct session_layer {
  /// The engine's description, its views pointing at the session's working tensors after
  /// create (take_layer_tensors): `weight` (float32, C order) at `weight_out`, which is the
  /// engine's buffer or `weight_storage`, fused, balanced and fake-quantized as the phases go;
  /// `bias` at `bias_storage`.
  layer_desc desc;
  std::vector<float> weight_storage;   ///< the working weight when the engine gave no weight_out
  std::vector<float> bias_storage;     ///< the working bias as float32 (fused ones included)
  resolved_layer plan;                 ///< the resolved config entry
  bool fused = false;                  ///< BatchNorm folded into weight/bias
  std::vector<float> balance_factors;  ///< DMQ factors (Cin), empty without DMQ
  std::optional<weight_quant_result> weight_params;
  std::optional<activation_quant_result> activation_params;
  /// What the activation search saw and chose; set at finalization when the session keeps
  /// search statistics (session_options::keep_search_stats).
  std::optional<activation_search_stats> activation_stats;
  std::size_t batches_seen = 0;
  /// The layer's algorithms (make_layer_calibrator of `plan`), whose observer runs the one-pass
  /// modes; enabled layers only, reset once the activation is finalized.
  std::optional<any_layer_calibrator> calibrator;
  /// The activation mode's own state, between the first batch and the finalization: the
  /// two-pass observer of the bounded and sharded modes (of the calibrator's activation policy),
  /// or the order-invariant histogram; none in the one-pass mode.
  activation_pass_state activation_pass;
  /// 10·log10(Σw² / Σ(w − w_q)²) of the weight quantization, in dB (inf when exact).
  double weight_sqnr_db = 0.0;
  /// AdaRound layers: weights whose learned rounding differs from round-to-nearest.
  std::size_t ada_changed = 0;

  session_layer() = default;
  session_layer(session_layer&&) = default;  // vectors keep their memory when moved
  session_layer& operator=(session_layer&&) = default;
  session_layer(const session_layer&) = delete;
  session_layer& operator=(const session_layer&) = delete;
  ~session_layer() = default;
};

namespace detail {

/// Phase 0, at create: the layer's weight (any dtype and strides) as float32 in C order at its
/// weight_out, or in weight_storage, and its bias in bias_storage; `desc`'s views then point at
/// them. E801 for a view that cannot be read or a weight_out that overlaps a weight it is not
/// the float32 C-order memory of.
[[nodiscard]] inline result<> take_layer_tensors(session_layer& l) {
  layer_desc& d = l.desc;
  const auto fail = [&](const error& e) {
    return make_error(errc::session_layer_invalid, "layer '" + d.name + "': " + e.message);
  };
  if (d.type != layer_type::avg_pool2d) {
    d.weight.name = d.name + ".weight";
    if (d.weight_out == nullptr) {
      if (auto st = check_tensor_view(d.weight); !st)
        return fail(st.error());
      l.weight_storage.resize(d.weight.size());
      d.weight_out = l.weight_storage.data();
    } else if (auto st = check_output_buffer(d.weight, d.weight_out); !st) {
      return fail(st.error());
    }
    if (d.weight_out != d.weight.in_place())
      d.weight.convert(0, d.weight.size(), d.weight_out);
    d.weight = view_of(d.weight_out, d.weight.shape, d.weight.name);
  }
  if (d.bias) {
    d.bias->name = d.name + ".bias";
    if (auto st = check_tensor_view(*d.bias); !st)
      return fail(st.error());
    l.bias_storage.resize(d.bias->size());
    d.bias->convert(0, d.bias->size(), l.bias_storage.data());
    d.bias = view_of(l.bias_storage.data(), {l.bias_storage.size()}, d.bias->name);
  }
  return {};
}

}  // namespace detail

/// Whether the layer's weights are AdaRound's: the policy make_layer_calibrator picks for its
/// plan (weight_algo_of: ADA where the type supports it, otherwise the toolkit's ARQ defaults),
/// on an enabled layer with a weight. The one test the session, the report and the tool share.
[[nodiscard]] inline bool uses_ada_round(const session_layer& l) noexcept {
  return l.plan.quant_enable && weight_algo_of(l.plan) == weight_algo::ada &&
         l.desc.type != layer_type::avg_pool2d;
}

/// Whether the layer's weights are still to be learned from samples (`quantize_ada`).
[[nodiscard]] inline bool learns_from_samples(const session_layer& l) noexcept {
  return uses_ada_round(l) && l.calibrator.has_value();
}

/// Calls fn(Policy{}, settings) with the activation policy of the layer's calibrator and its
/// settings (threads included): how the mode-specific paths pick their state types.
template <class Fn>
decltype(auto) with_layer_activation_policy(const session_layer& l, Fn&& fn) {
  return std::visit(
      [&](const auto& c) -> decltype(auto) {
        using calibrator = std::decay_t<decltype(c)>;
        return fn(typename calibrator::activation_policy{}, c.observer().settings());
      },
      *l.calibrator);
}

/// The layer's input `x` (its `shape`, float32, in place) divided by its DMQ factors, as the
/// layer sees it; nothing without DMQ. The one place every path divides; callers name the
/// layer or file in the error as their path does.
[[nodiscard]] inline result<> divide_by_balance_factors(const layer_desc& d,
                                                        const std::vector<float>& factors, float* x,
                                                        const std::vector<std::size_t>& shape) {
  if (factors.empty())
    return {};
  return dmq_apply_to_activation(x, shape, d.type, factors);
}
[[nodiscard]] inline result<> divide_by_balance_factors(const session_layer& l, float* x,
                                                        const std::vector<std::size_t>& shape) {
  return divide_by_balance_factors(l.desc, l.balance_factors, x, shape);
}

/// Whether the layer takes part in the DMQ pass (enabled, with dmq_balancer).
[[nodiscard]] inline bool needs_dmq(const session_layer& l) noexcept {
  return l.plan.quant_enable && l.plan.dmq_balancer_param.has_value();
}

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
