// A two_pass_observer's state as bytes and back, and the merge of two of them, whatever the
// algorithm and pass: what a sharded activation phase sends between processes
// (session/shard_exchange.hpp). Each state keeps its own frame (ifmr_wire.hpp, state_wire.hpp).
// Depends on the algorithms.
#pragma once

#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>

#include "ptq/algorithms/ifmr_wire.hpp"
#include "ptq/algorithms/state_wire.hpp"
#include "ptq/algorithms/two_pass_observer.hpp"
#include "ptq/core/abi.hpp"
#include "ptq/core/error.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {

using two_pass_state = two_pass_observer::state_variant;

/// The state's frame; an error for a state before `begin`.
[[nodiscard]] inline result<std::string> serialize_state(const two_pass_state& st) {
  if (std::holds_alternative<std::monostate>(st))
    return make_error(errc::session_call_invalid, "serialize: the observer has not begun");
  return std::visit(
      [](const auto& x) -> std::string {
        if constexpr (std::is_same_v<std::decay_t<decltype(x)>, std::monostate>)
          return {};
        else
          return serialize(x);
      },
      st);
}

/// A pass-`pass` (1 or 2) state of `algo` from its frame; `what` names it in errors.
[[nodiscard]] inline result<two_pass_state> deserialize_state(std::string_view bytes,
                                                              activation_algo algo, int pass,
                                                              std::string_view what,
                                                              const kernels::kernel_set& k) {
  const auto wrap = [](auto r) -> result<two_pass_state> {
    if (!r)
      return r.error();
    return two_pass_state(std::move(r).value());
  };
  if (algo == activation_algo::ifmr) {
    return pass == 1 ? wrap(deserialize_ifmr_tails(bytes, what))
                     : wrap(deserialize_ifmr_losses(bytes, what, k));
  }
  return pass == 1 ? wrap(deserialize_hfmg_ranges(bytes, what))
                   : wrap(deserialize_hfmg_bins(bytes, what));
}

/// Adds `other` into `st`; both must hold the same alternative (state_mismatch otherwise).
[[nodiscard]] inline result<> merge_state(two_pass_state& st, const two_pass_state& other,
                                          const kernels::kernel_set& k) {
  if (st.index() != other.index())
    return make_error(errc::state_mismatch, "merge: states of different algorithms or passes");
  return std::visit(
      [&](auto& x) -> result<> {
        using T = std::decay_t<decltype(x)>;
        const T& y = std::get<T>(other);
        if constexpr (std::is_same_v<T, std::monostate>)
          return make_error(errc::session_call_invalid, "merge: the observer has not begun");
        else if constexpr (std::is_same_v<T, ifmr_losses_state>)
          return merge(x, y, k);
        else
          return merge(x, y);
      },
      st);
}

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
