// Phase 4's choice for one batch of a layer: the one-pass observer, the order-invariant
// histogram, the bounded memory mode's two passes or this rank's shard, as the session's
// options say. An input that is not float32 in C order goes a block at a time into the one-pass
// observer, and is converted whole, into a buffer the caller reuses, only for the paths that
// need it so.
// Depends on: core and algorithms.
#pragma once

#include <cstddef>
#include <type_traits>
#include <variant>
#include <vector>

#include "ptq/algorithms/activations/view_blocks.hpp"
#include "ptq/algorithms/layer/tensor.hpp"
#include "ptq/core/abi.hpp"
#include "ptq/core/error.hpp"
#include "ptq/core/tensor_view.hpp"
#include "ptq/session/bounded_activations.hpp"
#include "ptq/session/checks.hpp"
#include "ptq/session/phases.hpp"
#include "ptq/session/session_layer.hpp"
#include "ptq/session/session_options.hpp"
#include "ptq/session/sharded_activations.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {

namespace detail {

/// A checked batch as float32 in C order: where it lies, or converted on `threads` into
/// `converted` (after the input checks, so the conversion reads only what the shape holds).
[[nodiscard]] inline result<tensor_view> batch_as_float32(const layer_desc& l, const tensor_view& x,
                                                          unsigned threads,
                                                          std::vector<float>& converted) {
  if (auto st = check_layer_input(l, x); !st)
    return st.error();
  const float* data = x.in_place();
  if (data == nullptr) {
    converted.resize(x.size());
    convert_view(x, converted.data(), threads);
    data = converted.data();
  }
  return view_of(data, x.shape, x.name);
}

/// One batch of layer `l` observed as the session's activation mode says.
[[nodiscard]] inline result<> observe_session_batch(session_layer& l, const tensor_view& input,
                                                    const batch_context& ctx) {
  using kind = activation_mode::kind;
  const session_options& o = ctx.options;
  const kind mode = o.activation.pass;
  const auto* const order_invariant_hfmg = [&]() -> const hfmg_settings* {
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
  auto f = detail::batch_as_float32(l.desc, input, o.threads, ctx.converted);
  if (!f)
    return f.error();
  const tensor_view& x = f.value();
  if (mode == kind::sharded)
    return observe_layer_batch_sharded(l, x, ctx);
  if (mode == kind::bounded)
    return observe_layer_batch_bounded(l, x, ctx);
  return observe_layer_batch_invariant(l, x, *order_invariant_hfmg, ctx);
}

}  // namespace detail
}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
