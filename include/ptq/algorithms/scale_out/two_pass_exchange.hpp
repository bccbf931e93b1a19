// A two_pass_observer's state as bytes and back, and the merge of two of them, for any
// activation policy and pass: what a sharded activation phase sends between processes
// (session/sharded_activations.hpp). Each state keeps its own frame (ifmr_wire.hpp,
// state_wire.hpp) and the policy reads it back.
// And `observe_sharded`: one activation's two passes over the batches of many processes (`ptq
// observe --mpi`).
// Depends on: core.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "ptq/algorithms/scale_out/two_pass_observer.hpp"
#include "ptq/core/abi.hpp"
#include "ptq/core/error.hpp"
#include "ptq/core/shard_reduce.hpp"
#include "ptq/core/wire.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {

/// The state's frame; an error for a state before `begin`.
template <class State>  // a two_pass_state<Policy>
[[nodiscard]] result<std::string> serialize_state(const State& st) {
  return std::visit(
      [](const auto& x) -> result<std::string> {
        if constexpr (std::is_same_v<std::decay_t<decltype(x)>, std::monostate>) {
          return make_error(errc::session_call_invalid, "serialize: the observer has not begun");
        } else {
          return serialize(x);
        }
      },
      st);
}

/// A pass-`pass` (1 or 2) state of `Policy` from its frame; `what` names it in errors.
template <class Policy>
[[nodiscard]] result<two_pass_state<Policy>> deserialize_state(std::string_view bytes, int pass,
                                                               std::string_view what,
                                                               const kernels::kernel_set& k) {
  const auto wrap = [](auto r) -> result<two_pass_state<Policy>> {
    if (!r)
      return r.error();
    return two_pass_state<Policy>(std::move(r).value());
  };
  return pass == 1 ? wrap(Policy::read_first_pass(bytes, what, k))
                   : wrap(Policy::read_second_pass(bytes, what, k));
}

/// Adds `other` into `st`; both must be of the same pass (state_mismatch otherwise).
template <class Policy>
[[nodiscard]] result<> merge_state(two_pass_state<Policy>& st, const two_pass_state<Policy>& other,
                                   const kernels::kernel_set& k) {
  if (st.index() != other.index())
    return make_error(errc::state_mismatch, "merge: states of different passes");
  return std::visit(
      [&](auto& x) -> result<> {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::monostate>) {
          return make_error(errc::session_call_invalid, "merge: the observer has not begun");
        } else {
          return Policy::merge(x, std::get<T>(other), k);
        }
      },
      st);
}

/// An activation result as wire fields: scale f32, offset i32 (as u32), bits u32, clip_min f32,
/// clip_max f32.
inline void write_activation_result(wire_writer& w, const activation_quant_result& a) {
  w.f32(a.scale);
  w.u32(static_cast<std::uint32_t>(a.offset));
  w.u32(static_cast<std::uint32_t>(a.bits));
  w.f32(a.clip_min);
  w.f32(a.clip_max);
}

[[nodiscard]] inline activation_quant_result read_activation_result(wire_reader& r) {
  activation_quant_result a;
  a.scale = r.f32();
  a.offset = static_cast<std::int32_t>(r.u32());
  a.bits = static_cast<int>(r.u32());
  a.clip_min = r.f32();
  a.clip_max = r.f32();
  return a;
}

/// Merges every rank's serialized state of pass `pass` (rank order; an empty string: a rank
/// without batches) into one state of `Policy`.
template <class Policy>
[[nodiscard]] result<two_pass_state<Policy>> merge_rank_states(
    const std::vector<std::string_view>& all, int pass, const std::string& name,
    const kernels::kernel_set& k) {
  two_pass_state<Policy> merged;
  bool any = false;
  for (std::size_t r = 0; r < all.size(); ++r) {
    if (all[r].empty())
      continue;
    auto st = deserialize_state<Policy>(all[r], pass, "rank " + std::to_string(r) + ": " + name, k);
    if (!st)
      return st.error();
    if (!any) {
      merged = std::move(st).value();
      any = true;
    } else if (auto m = merge_state<Policy>(merged, st.value(), k); !m) {
      return make_error(m.error().code, name + ": " + m.error().message, m.error().note);
    }
  }
  if (!any)
    return make_error(errc::no_data, name + ": no rank observed any batch");
  return merged;
}

[[nodiscard]] inline std::vector<std::string_view> views_of(const std::vector<std::string>& all) {
  return {all.begin(), all.end()};
}

/// One activation over the batches of `comm.size()` processes: every rank calls it with an
/// observer made from the same settings, `total` (all ranks' elements, for IFMR) and
/// `feed(observer)`, which observes this rank's batches (with their global indices) in the
/// current pass. The states meet on rank 0 after each pass (core/shard_reduce.hpp); every rank
/// returns the result, identical to one observer over all batches, or the lowest failing
/// rank's error.
template <class Policy, class Comm, class Feed>
[[nodiscard]] result<activation_quant_result> observe_sharded(two_pass_observer<Policy>& o,
                                                              Comm& comm, std::uint64_t total,
                                                              Feed&& feed,
                                                              const kernels::kernel_set& k) {
  const auto& s = o.settings();
  const auto mine = [&](const result<>& local) -> result<std::string> {
    if (!local)
      return local.error();
    if (auto st = feed(o); !st)
      return st.error();
    return serialize_state(o.state());
  };
  auto pass1 = shard_reduce(
      comm, mine(o.begin(total)), [&](const std::vector<std::string>& all) -> result<std::string> {
        auto m = merge_rank_states<Policy>(views_of(all), 1, o.name(), k);
        if (!m)
          return m.error();
        two_pass_observer<Policy> plan(s, k, o.name());  // checks pass 2's plan
        if (auto st = plan.resume(m.value()); !st)
          return st.error();
        if (auto st = plan.next_pass(); !st)
          return st.error();
        return serialize_state(m.value());
      });
  if (!pass1)
    return pass1.error();
  auto merged = deserialize_state<Policy>(pass1.value(), 1, o.name(), k);
  result<> local = merged ? o.resume(std::move(merged).value()) : result<>(merged.error());
  if (local)
    local = o.next_pass();
  auto out = shard_reduce(comm, mine(local),
                          [&](const std::vector<std::string>& all) -> result<std::string> {
                            auto m = merge_rank_states<Policy>(views_of(all), 2, o.name(), k);
                            if (!m)
                              return m.error();
                            two_pass_observer<Policy> fin(s, k, o.name());
                            if (auto st = fin.resume(std::move(m).value()); !st)
                              return st.error();
                            auto r = fin.finalize();
                            if (!r)
                              return r.error();
                            wire_writer w;
                            write_activation_result(w, r.value());
                            return std::move(w.out);
                          });
  if (!out)
    return out.error();
  wire_reader rd(out.value());
  const activation_quant_result a = read_activation_result(rd);
  if (rd.failed() || !rd.at_end())
    return wire_payload_error(o.name(), "the merged result");
  return a;
}

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
