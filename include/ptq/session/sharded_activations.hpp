// Phase 4 sharded over processes (`activation_mode::kind::sharded`, docs/scale-out.md). Rank r of R
// feeds the batches b with b % R == r, in order, through each layer's two-pass observer; after
// each pass the ranks exchange their states (shard_exchange.hpp): rank 0 merges them, every rank
// adopts the merge. After pass 1 that is the merged pass-1 state (so every rank plans the same
// pass 2), after pass 2 the finalized activation parameters. The states are keyed by the global
// batch index and reduce in one canonical order, so the result is the one-process run's bit for
// bit for every R, including ranks without batches.
// Depends on: core and algorithms.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "ptq/algorithms/scale_out/two_pass_exchange.hpp"
#include "ptq/core/abi.hpp"
#include "ptq/core/error.hpp"
#include "ptq/core/wire.hpp"
#include "ptq/session/bounded_activations.hpp"
#include "ptq/session/session_layer.hpp"
#include "ptq/session/session_options.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {
namespace detail {

/// One of this rank's activation batches of a layer: its i-th is the global batch
/// rank + i·count, pass 1 for the first shard_batch_count of them, then (after the exchange)
/// pass 2 for as many again.
[[nodiscard]] inline result<> observe_layer_batch_sharded(session_layer& l,
                                                          const tensor_view& input,
                                                          const batch_context& ctx) {
  if (auto st = check_layer_input(l.desc, input); !st)
    return st;
  const shard_info& shard = ctx.options.activation.shard;
  const std::size_t batch_num = ctx.batch_num;
  const std::size_t own = shard_batch_count(shard, batch_num);
  const bool first_pass = l.batches_seen < own;
  const bool in_pass_2 = std::visit(
      [](const auto& t) {
        using T = std::decay_t<decltype(t)>;
        if constexpr (std::is_same_v<T, std::monostate> || std::is_same_v<T, invariant_histogram>) {
          return false;
        } else {
          return t.observer.pass() == 2;
        }
      },
      l.activation_pass);
  if (own == 0 || (!first_pass && !in_pass_2)) {
    return make_error(errc::session_call_invalid,
                      own == 0 ? l.desc.name + ": rank " + std::to_string(shard.rank) + " of " +
                                     std::to_string(shard.count) + " has none of the " +
                                     std::to_string(batch_num) + " batch(es)"
                               : l.desc.name + ": this rank fed its " + std::to_string(own) +
                                     " batch(es) of pass 1; exchange the states "
                                     "(exchange_shard_states) before pass 2");
  }
  return detail::observe_two_pass_batch(l, input, shard.rank + (l.batches_seen % own) * shard.count,
                                        first_pass, ctx);
}

[[nodiscard]] inline error shard_error(std::string message) {
  return make_error(errc::shard_invalid, std::move(message));
}

/// What a rank sends after pass `stage` (1 or 2): per enabled layer its state, if it has one.
[[nodiscard]] inline result<std::string> pack_shard_states(const std::vector<session_layer>& layers,
                                                           const shard_info& shard,
                                                           std::size_t batch_num, int stage) {
  const std::size_t own = shard_batch_count(shard, batch_num);
  wire_writer w;
  w.u8(static_cast<std::uint8_t>(stage));
  w.u64(shard.rank);
  w.u64(shard.count);
  std::size_t enabled = 0;
  for (const auto& l : layers)
    enabled += l.plan.quant_enable ? 1 : 0;
  w.u64(enabled);
  for (const auto& l : layers) {
    if (!l.plan.quant_enable)
      continue;
    if (l.batches_seen != own * static_cast<std::size_t>(stage)) {
      return make_error(
          errc::session_call_invalid,
          "exchange after pass " + std::to_string(stage) + ": layer '" + l.desc.name +
              "' was fed " +
              std::to_string(l.batches_seen - own * static_cast<std::size_t>(stage - 1)) +
              " of this rank's " + std::to_string(own) + " batch(es)");
    }
    w.bytes(l.desc.name);
    auto bytes = std::visit(
        [](const auto& t) -> result<std::string> {
          using T = std::decay_t<decltype(t)>;
          if constexpr (std::is_same_v<T, std::monostate> ||
                        std::is_same_v<T, invariant_histogram>) {
            return std::string();  // no batches of the layer on this rank
          } else {
            return serialize_state(t.observer.state());
          }
        },
        l.activation_pass);
    if (!bytes)
      return in_layer(l.desc.name, bytes.error());
    w.u8(bytes.value().empty() ? 0 : 1);
    if (!bytes.value().empty())
      w.bytes(bytes.value());
  }
  return wire_frame(state_kind::shard_states, w.out);
}

/// Reads every rank's shard_states (`all[r]` from rank r) into per-layer lists of the ranks'
/// states, checking that they are of this session, this stage and this rank count.
[[nodiscard]] inline result<std::vector<std::vector<std::string_view>>> unpack_shard_states(
    const std::vector<session_layer>& layers, const shard_info& shard, int stage,
    const std::vector<std::string>& all) {
  if (all.size() != shard.count) {
    return shard_error("exchange: " + std::to_string(all.size()) +
                       " rank(s) sent states, the "
                       "session is sharded over " +
                       std::to_string(shard.count));
  }
  std::vector<std::vector<std::string_view>> out;  // per layer, per rank (empty: none)
  for (std::size_t r = 0; r < all.size(); ++r) {
    const std::string what = "rank " + std::to_string(r) + " states";
    auto p = wire_unframe(all[r], state_kind::shard_states, what);
    if (!p)
      return p.error();
    wire_reader rd(p.value());
    const int got_stage = rd.u8();
    const std::uint64_t rank = rd.u64();
    const std::uint64_t count = rd.u64();
    const std::uint64_t n = rd.u64();
    if (rd.failed())
      return wire_payload_error(what, "ended early");
    if (got_stage != stage || rank != r || count != shard.count) {
      return shard_error(what + ": pass " + std::to_string(got_stage) + " of rank " +
                         std::to_string(rank) + " of " + std::to_string(count) +
                         ", expected pass " + std::to_string(stage) + " of rank " +
                         std::to_string(r) + " of " + std::to_string(shard.count));
    }
    std::size_t i = 0;
    for (const auto& l : layers) {
      if (!l.plan.quant_enable)
        continue;
      if (out.size() <= i)
        out.emplace_back();
      const std::string_view name = i < n ? rd.bytes() : std::string_view();
      const bool present = rd.u8() != 0;
      const std::string_view bytes = present ? rd.bytes() : std::string_view();
      if (rd.failed())
        return wire_payload_error(what, "ended early");
      if (name != l.desc.name) {
        return shard_error(what + ": layer '" + std::string(name) + "' where this session has '" +
                           l.desc.name + "' (another model or config)");
      }
      out[i].push_back(bytes);
      ++i;
    }
    if (n != i || !rd.at_end()) {
      return shard_error(what + ": " + std::to_string(n) + " layers, this session has " +
                         std::to_string(i));
    }
  }
  return out;
}

/// The layer's two-pass observer in pass 2, planned from rank 0's merged pass-1 state `bytes`
/// (the layer's batch size kept: a rank without batches of the layer has none yet).
[[nodiscard]] inline result<activation_pass_state> resumed_two_pass(const session_layer& l,
                                                                    std::string_view bytes,
                                                                    const kernels::kernel_set& k) {
  return with_layer_activation_policy(
      l, [&](auto policy, const auto& s) -> result<activation_pass_state> {
        using P = decltype(policy);
        auto st = deserialize_state<P>(bytes, 1, l.desc.name + " input", k);
        if (!st)
          return st.error();
        const auto* mine = std::get_if<two_pass_layer<P>>(&l.activation_pass);
        two_pass_layer<P> t{two_pass_observer<P>(s, k, l.desc.name + " input"),
                            mine != nullptr ? mine->batch_size : 0};
        // Neither fails on rank 0's merge: it read the state for this policy and planned pass 2.
        if (auto r = t.observer.resume(std::move(st).value()); !r)
          return in_layer(l.desc.name, r.error());
        if (auto r = t.observer.next_pass(); !r)
          return in_layer(l.desc.name, r.error());
        return activation_pass_state(std::move(t));
      });
}

/// Rank 0: what every rank adopts after pass `stage`, from `all` (rank r's shard_states at
/// all[r]): after pass 1 each layer's merged pass-1 state, after pass 2 each layer's finalized
/// activation parameters (FORCE_FP16_QUANT applied when `fp16`).
[[nodiscard]] inline result<std::string> merge_shard_states(
    const std::vector<session_layer>& layers, const shard_info& shard, int stage,
    const std::vector<std::string>& all, bool fp16, const kernels::kernel_set& k) {
  auto per_layer = detail::unpack_shard_states(layers, shard, stage, all);
  if (!per_layer)
    return per_layer.error();
  wire_writer w;
  w.u8(static_cast<std::uint8_t>(stage));
  w.u64(per_layer.value().size());
  std::size_t i = 0;
  for (const auto& l : layers) {
    if (!l.plan.quant_enable)
      continue;
    w.bytes(l.desc.name);
    auto st = with_layer_activation_policy(l, [&](auto policy, const auto& s) -> result<> {
      using P = decltype(policy);
      auto merged = merge_rank_states<P>(per_layer.value()[i], stage, l.desc.name + " input", k);
      if (!merged)
        return merged.error();
      two_pass_observer<P> o(s, k, l.desc.name + " input");
      if (stage == 1) {  // plan pass 2 here, so a missing batch fails the exchange on rank 0
        auto bytes = serialize_state(merged.value());
        if (!bytes)
          return bytes.error();
        w.bytes(bytes.value());
        if (auto r = o.resume(std::move(merged).value()); !r)
          return r;
        return o.next_pass();
      }
      if (auto r = o.resume(std::move(merged).value()); !r)
        return r;
      auto r = o.finalize();
      if (!r)
        return r.error();
      write_activation_result(w, fp16 ? with_fp16_scale(r.value()) : r.value());
      return {};
    });
    if (!st)
      return st.error();  // named by the observer or the merge
    ++i;
  }
  return wire_frame(stage == 1 ? state_kind::shard_states : state_kind::shard_results, w.out);
}

/// Every rank: adopts rank 0's merge after pass `stage`: pass 2 starts from the merged pass-1
/// states, or the layers get their activation parameters.
[[nodiscard]] inline result<> adopt_shard_states(std::vector<session_layer>& layers, int stage,
                                                 std::string_view merged,
                                                 const kernels::kernel_set& k) {
  const char* what = "the merged states";
  auto p =
      wire_unframe(merged, stage == 1 ? state_kind::shard_states : state_kind::shard_results, what);
  if (!p)
    return p.error();
  wire_reader rd(p.value());
  const int got_stage = rd.u8();
  const std::uint64_t n = rd.u64();
  if (rd.failed() || got_stage != stage)
    return detail::shard_error(std::string(what) + ": not those of pass " + std::to_string(stage));
  // Read everything first, then change the layers: an error leaves them as they were.
  std::vector<activation_pass_state> states;
  std::vector<activation_quant_result> results;
  std::size_t i = 0;
  for (const auto& l : layers) {
    if (!l.plan.quant_enable)
      continue;
    const std::string_view name = i++ < n ? rd.bytes() : std::string_view();
    if (rd.failed() || name != l.desc.name) {
      return detail::shard_error(std::string(what) + ": layer '" + std::string(name) +
                                 "' where this session has '" + l.desc.name + "'");
    }
    if (stage == 2) {
      results.push_back(read_activation_result(rd));
      continue;
    }
    auto st = detail::resumed_two_pass(l, rd.bytes(), k);
    if (!st)
      return st.error();
    states.push_back(std::move(st).value());
  }
  if (rd.failed())
    return wire_payload_error(what, "ended early");
  if (n != i || !rd.at_end()) {
    return detail::shard_error(std::string(what) + ": " + std::to_string(n) +
                               " layers, this session has " + std::to_string(i));
  }
  i = 0;
  for (auto& l : layers) {
    if (!l.plan.quant_enable)
      continue;
    if (stage == 2) {
      l.activation_params = results[i++];
      l.calibrator.reset();
      l.activation_pass = {};
    } else {
      l.activation_pass = std::move(states[i++]);
    }
  }
  return {};
}

}  // namespace detail
}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
