// The two-pass mode as a sharded run does it, for the tests: the batches dealt round-robin to
// `shards` observers (shard s gets batches s, s + shards, ...; each visits its batches in
// `reverse` order when asked), every shard's state sent through its wire format and the states
// merged in reverse shard order, between the passes and at the end.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "ptq/algorithms/dispatch.hpp"
#include "ptq/algorithms/state_wire.hpp"

namespace ptq_test {

using batches_t = std::vector<std::vector<float>>;

template <class State, class Observe, class Deserialize, class Merge>
ptq::result<State> sharded_pass(const State& empty, const batches_t& batches, std::size_t shards,
                                bool reverse, Observe observe, Deserialize deserialize,
                                Merge merge) {
  std::vector<State> parts(shards, empty);
  for (std::size_t i = 0; i < batches.size(); ++i) {
    const std::size_t b = reverse ? batches.size() - 1 - i : i;
    auto st = observe(parts[b % shards], b, batches[b]);
    if (!st)
      return st.error();
  }
  auto acc = deserialize(ptq::serialize(parts[shards - 1]));
  if (!acc)
    return acc.error();
  State out = std::move(acc).value();
  for (std::size_t s = shards - 1; s-- > 0;) {
    auto part = deserialize(ptq::serialize(parts[s]));
    if (!part)
      return part.error();
    auto m = merge(out, part.value());
    if (!m)
      return m.error();
  }
  return out;
}

/// The bounded mode's result over `batches` with `shards` shards.
inline ptq::result<ptq::activation_quant_result> run_sharded(const ptq::activation_settings& s,
                                                             const batches_t& batches,
                                                             std::size_t shards, bool reverse,
                                                             const ptq::kernels::kernel_set& k) {
  using namespace ptq;
  if (s.algo == activation_algo::ifmr) {
    std::uint64_t total = 0;
    for (const auto& b : batches)
      total += b.size();
    auto empty = make_ifmr_tails(s.ifmr, total);
    if (!empty)
      return empty.error();
    auto tails = sharded_pass(
        empty.value(), batches, shards, reverse,
        [&](ifmr_tails_state& st, std::size_t b, const std::vector<float>& x) {
          return observe(st, b, x.data(), x.size(), k);
        },
        [](const std::string& bytes) { return deserialize_ifmr_tails(bytes); },
        [](ifmr_tails_state& a, const ifmr_tails_state& b) { return merge(a, b); });
    if (!tails)
      return tails.error();
    auto plan = ifmr_plan_of(tails.value(), s.ifmr);
    if (!plan)
      return plan.error();
    auto losses = sharded_pass(
        make_ifmr_losses(std::move(plan).value()), batches, shards, reverse,
        [&](ifmr_losses_state& st, std::size_t b, const std::vector<float>& x) {
          return observe(st, b, x.data(), x.size(), s.ifmr.threads, k);
        },
        [&](const std::string& bytes) { return deserialize_ifmr_losses(bytes, "state", k); },
        [&](ifmr_losses_state& a, const ifmr_losses_state& b) { return merge(a, b, k); });
    if (!losses)
      return losses.error();
    auto r = finalize(losses.value(), s.ifmr);
    if (!r)
      return r.error();
    return r.value().result;
  }
  auto ranges = sharded_pass(
      hfmg_ranges_state{}, batches, shards, reverse,
      [&](hfmg_ranges_state& st, std::size_t b, const std::vector<float>& x) {
        return observe(st, b, x.data(), x.size(), k);
      },
      [](const std::string& bytes) { return deserialize_hfmg_ranges(bytes); },
      [](hfmg_ranges_state& a, const hfmg_ranges_state& b) { return merge(a, b); });
  if (!ranges)
    return ranges.error();
  auto empty = make_hfmg_bins(ranges.value(), s.hfmg);
  if (!empty)
    return empty.error();
  auto bins = sharded_pass(
      empty.value(), batches, shards, reverse,
      [&](hfmg_bins_state& st, std::size_t b, const std::vector<float>& x) {
        return observe(st, b, x.data(), x.size(), k);
      },
      [](const std::string& bytes) { return deserialize_hfmg_bins(bytes); },
      [](hfmg_bins_state& a, const hfmg_bins_state& b) { return merge(a, b); });
  if (!bins)
    return bins.error();
  auto r = finalize(bins.value(), s.hfmg, k);
  if (!r)
    return r.error();
  return r.value().result;
}

}  // namespace ptq_test
