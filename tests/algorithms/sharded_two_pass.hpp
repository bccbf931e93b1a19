// The two-pass mode as a sharded run does it, for the tests: the batches dealt round-robin to
// `shards` observers (shard s gets batches s, s + shards, ...; each visits its batches in
// `reverse` order when asked), every shard's state sent through its wire format and the states
// merged in reverse shard order, between the passes and at the end; any activation policy.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ptq/algorithms/activation_observer.hpp"
#include "ptq/algorithms/scale_out/state_wire.hpp"

namespace ptq_test {

using batches_t = std::vector<std::vector<float>>;

template <class State, class Observe, class Deserialize, class Merge>
ptq::result<State> sharded_pass(const State& empty, const batches_t& batches, std::size_t shards,
                                bool reverse, Observe observe, Deserialize deserialize,
                                Merge merge) {
  using ptq::serialize;  // and a policy's own, found by argument-dependent lookup
  std::vector<State> parts(shards, empty);
  for (std::size_t i = 0; i < batches.size(); ++i) {
    const std::size_t b = reverse ? batches.size() - 1 - i : i;
    auto st = observe(parts[b % shards], b, batches[b]);
    if (!st)
      return st.error();
  }
  auto acc = deserialize(serialize(parts[shards - 1]));
  if (!acc)
    return acc.error();
  State out = std::move(acc).value();
  for (std::size_t s = shards - 1; s-- > 0;) {
    auto part = deserialize(serialize(parts[s]));
    if (!part)
      return part.error();
    auto m = merge(out, part.value());
    if (!m)
      return m.error();
  }
  return out;
}

/// The two passes of activation policy `Policy` over `batches` with `shards` shards, through the
/// policy's own state types, frames and merges.
template <class Policy>
ptq::result<ptq::activation_quant_result> run_sharded_policy(const typename Policy::settings& s,
                                                             const batches_t& batches,
                                                             std::size_t shards, bool reverse,
                                                             const ptq::kernels::kernel_set& k) {
  std::uint64_t total = 0;
  for (const auto& b : batches)
    total += b.size();
  const auto observe = [&](auto& st, std::size_t b, const std::vector<float>& x) {
    return Policy::observe(st, b, x.data(), x.size(), s, k, "activation");
  };
  const auto merge = [&](auto& a, const auto& b) { return Policy::merge(a, b, k); };
  auto empty = Policy::begin(s, total);
  if (!empty)
    return empty.error();
  auto first = sharded_pass(
      empty.value(), batches, shards, reverse, observe,
      [&](const std::string& bytes) { return Policy::read_first_pass(bytes, "state", k); }, merge);
  if (!first)
    return first.error();
  auto second_empty = Policy::next_pass(first.value(), s);
  if (!second_empty)
    return second_empty.error();
  auto second = sharded_pass(
      second_empty.value(), batches, shards, reverse, observe,
      [&](const std::string& bytes) { return Policy::read_second_pass(bytes, "state", k); }, merge);
  if (!second)
    return second.error();
  return Policy::finalize(second.value(), s, k);
}

/// The bounded mode's result over `batches` with `shards` shards.
inline ptq::result<ptq::activation_quant_result> run_sharded(const ptq::activation_settings& s,
                                                             const batches_t& batches,
                                                             std::size_t shards, bool reverse,
                                                             const ptq::kernels::kernel_set& k) {
  return ptq::with_activation_policy(s.algo, [&](auto policy) {
    using P = decltype(policy);
    return run_sharded_policy<P>(ptq::settings_for<P>(s), batches, shards, reverse, k);
  });
}

}  // namespace ptq_test
