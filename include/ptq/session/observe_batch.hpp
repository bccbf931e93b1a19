// Phase 4's choice for one batch of a layer: the one-pass observer, the order-invariant
// histogram, the bounded memory mode's two passes or this rank's shard, as the session's
// options say. The input is float32 (tensor_ref) or values as a file stores them
// (stored_tensor_ref); float16 goes a block at a time into the one-pass observer, and is
// converted whole, into a buffer the caller reuses, only for the paths that need it so.
// Depends on: core and algorithms.
#pragma once

#include <cstddef>
#include <type_traits>
#include <variant>
#include <vector>

#include "ptq/algorithms/activations/stored_batch.hpp"
#include "ptq/algorithms/layer/tensor.hpp"
#include "ptq/core/abi.hpp"
#include "ptq/core/error.hpp"
#include "ptq/session/bounded_activations.hpp"
#include "ptq/session/checks.hpp"
#include "ptq/session/phases.hpp"
#include "ptq/session/session_layer.hpp"
#include "ptq/session/session_options.hpp"
#include "ptq/session/sharded_activations.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {

namespace detail {

[[nodiscard]] inline result<tensor_ref> float_values(const layer_desc&, const tensor_ref& x,
                                                     unsigned, std::vector<float>&) {
  return x;
}

/// Stored values as float32: in place, or converted on `threads` into `converted` (after the
/// input checks, so the conversion reads only the values the shape holds).
[[nodiscard]] inline result<tensor_ref> float_values(const layer_desc& l,
                                                     const stored_tensor_ref& x, unsigned threads,
                                                     std::vector<float>& converted) {
  if (auto st = check_layer_input(l, x); !st)
    return st.error();
  const float* data = x.values.in_place();
  if (data == nullptr) {
    converted.resize(x.size());
    convert_stored(x.values, converted.data(), threads);
    data = converted.data();
  }
  return tensor_ref{data, x.shape, x.name};
}

}  // namespace detail

/// One batch of layer `l` observed as the session's activation mode says.
template <class Input>  // tensor_ref or stored_tensor_ref
[[nodiscard]] result<> observe_session_batch(session_layer& l, const Input& input,
                                             const batch_context& ctx) {
  using kind = activation_mode::kind;
  const session_options& o = ctx.options;
  const kind mode = o.activation.pass;
  const auto order_invariant_hfmg = [&]() -> const hfmg_settings* {
    if (mode != kind::order_invariant)
      return nullptr;
    return std::visit(
        [](const auto& lc) -> const hfmg_settings* {
          if constexpr (std::is_same_v<typename std::decay_t<decltype(lc)>::activation_policy,
                                       hfmg>) {
            return &lc.observer().settings();
          } else {
            return nullptr;  // IFMR layers run as in the one-pass mode
          }
        },
        *l.calibrator);
  }();
  if (mode == kind::one_pass || (mode == kind::order_invariant && order_invariant_hfmg == nullptr))
    return observe_layer_batch(l, input, ctx);
  auto f = detail::float_values(l.desc, input, o.threads, ctx.converted);
  if (!f)
    return f.error();
  const tensor_ref& x = f.value();
  if (mode == kind::sharded)
    return observe_layer_batch_sharded(l, x, ctx);
  if (mode == kind::bounded)
    return observe_layer_batch_bounded(l, x, ctx);
  return observe_layer_batch_invariant(l, x, *order_invariant_hfmg, ctx);
}

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
