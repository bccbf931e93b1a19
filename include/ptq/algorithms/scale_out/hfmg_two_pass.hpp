// HFMG in two passes (docs/scale-out.md), giving the sequential mode's histogram and result bit
// for bit for any split of the batches over observers:
//   pass 1, `hfmg_ranges_state`: each batch's min/max, and so the toolkit's sequence of merged
//     ranges R_b = [min(lo_{b-1}, min_b), max(hi_{b-1}, max_b)];
//   pass 2, `hfmg_bins_state`: each batch binned into its own R_b, independently of the others;
//     the histograms are replayed in batch order exactly as the sequential observer merges
//     (H_0 = bins_0; H_b = bins_b + the proportional split of H_{b-1}), as soon as the next
//     batch's histogram is there.
// Memory: one histogram per batch waiting for an earlier one (none when the batches come in
// order).
// Depends on: core.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "ptq/algorithms/activations/hfmg.hpp"
#include "ptq/core/abi.hpp"
#include "ptq/core/error.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {

/// A batch's float range.
struct batch_range {
  float lo = 0.0f;
  float hi = 0.0f;
};

/// Pass 1 of the two-pass HFMG: the ranges of the batches seen.
struct hfmg_ranges_state {
  std::map<std::uint64_t, batch_range> batches;
};

/// Pass 1, one batch with its index. Errors: empty batch, NaN/Inf, a batch seen twice.
[[nodiscard]] inline result<> observe(hfmg_ranges_state& st, std::size_t batch, const float* x,
                                      std::size_t n, const kernels::kernel_set& k,
                                      const std::string& name = "activation") {
  const std::string label = name + " batch " + std::to_string(batch + 1);
  auto mm = checked_minmax(label, x, n, k.minmax);
  if (!mm)
    return mm.error();
  if (!st.batches.emplace(batch, batch_range{mm.value().min, mm.value().max}).second)
    return make_error(errc::state_mismatch, label + ": already observed");
  return {};
}

[[nodiscard]] inline result<> merge(hfmg_ranges_state& st, const hfmg_ranges_state& other) {
  for (const auto& [b, r] : other.batches) {
    if (!st.batches.emplace(b, r).second) {
      return make_error(errc::state_mismatch,
                        "HFMG ranges: batch " + std::to_string(b + 1) + " is in both states");
    }
  }
  return {};
}

/// The merged range of every batch prefix, once pass 1 saw batches 0..B-1.
[[nodiscard]] inline result<std::vector<batch_range>> hfmg_merged_ranges(
    const hfmg_ranges_state& st) {
  std::vector<batch_range> out;
  out.reserve(st.batches.size());
  for (const auto& [b, r] : st.batches) {
    if (b != out.size()) {
      return make_error(errc::no_data,
                        "HFMG: pass 1 has no batch " + std::to_string(out.size() + 1));
    }
    if (out.empty()) {
      out.push_back(r);
    } else {
      const batch_range& p = out.back();
      out.push_back(batch_range{r.lo < p.lo ? r.lo : p.lo, r.hi > p.hi ? r.hi : p.hi});
    }
  }
  if (out.empty())
    return make_error(errc::no_data, "HFMG: no data observed");
  return out;
}

/// Pass 2 of the two-pass HFMG.
struct hfmg_bins_state {
  std::uint64_t bins = 0;
  std::vector<batch_range> ranges;  ///< the merged range of each batch prefix (pass 1)
  std::vector<batch_range> own;     ///< each batch's own min/max, to check pass 2's data
  std::uint64_t folded = 0;         ///< batches [0, folded) are replayed into `merged`
  hfmg_histogram merged;
  std::map<std::uint64_t, std::vector<std::int64_t>> pending;  ///< binned, not yet replayed
};

/// The pass-2 state of a pass-1 result. Errors: bad settings, a missing batch.
[[nodiscard]] inline result<hfmg_bins_state> make_hfmg_bins(const hfmg_ranges_state& pass1,
                                                            const hfmg_settings& s) {
  if (!valid_bits(s.bits) || s.num_of_bins < 4) {
    return make_error(errc::invalid_argument,
                      "HFMG bits must be in [2, 16] and num_of_bins at least 4");
  }
  auto r = hfmg_merged_ranges(pass1);
  if (!r)
    return r.error();
  hfmg_bins_state st;
  st.bins = s.num_of_bins;
  st.ranges = std::move(r).value();
  for (const auto& [b, own] : pass1.batches)
    st.own.push_back(own);
  return st;
}

namespace detail {

/// Replays the binned batches that follow the replayed prefix, in batch order.
inline void replay_batches(hfmg_bins_state& st) {
  for (auto it = st.pending.begin(); it != st.pending.end() && it->first == st.folded;) {
    hfmg_histogram fresh{st.ranges[st.folded].lo, st.ranges[st.folded].hi, std::move(it->second)};
    if (st.folded > 0)
      hfmg_merge_into(st.merged, fresh);
    st.merged = std::move(fresh);
    ++st.folded;
    it = st.pending.erase(it);
  }
}

}  // namespace detail

/// Pass 2, one batch with its index, its min/max and histogram on `threads` threads (the same
/// results for any number). Errors: NaN/Inf, an index pass 1 did not see, a range that differs from
/// pass 1's (the batch changed between the passes), a batch seen twice.
[[nodiscard]] inline result<> observe(hfmg_bins_state& st, std::size_t batch, const float* x,
                                      std::size_t n, const kernels::kernel_set& k,
                                      const std::string& name = "activation",
                                      unsigned threads = 1) {
  const std::string label = name + " batch " + std::to_string(batch + 1);
  auto mm = checked_minmax(label, x, n, kernels::threaded_minmax{k, threads});
  if (!mm)
    return mm.error();
  if (batch >= st.ranges.size()) {
    return make_error(errc::state_mismatch,
                      label + ": pass 1 had " + std::to_string(st.ranges.size()) + " batches");
  }
  const batch_range& own = st.own[batch];
  if (mm.value().min != own.lo || mm.value().max != own.hi) {
    return make_error(errc::state_mismatch,
                      label +
                          ": its range differs from pass 1's (the batch changed between "
                          "passes)");
  }
  if (batch < st.folded || st.pending.count(batch) != 0)
    return make_error(errc::state_mismatch, label + ": already observed in pass 2");
  std::vector<std::int64_t> counts(static_cast<std::size_t>(st.bins), 0);
  kernels::parallel_histogram(k, x, n, st.ranges[batch].lo, st.ranges[batch].hi, counts.size(),
                              counts.data(), threads);
  st.pending.emplace(batch, std::move(counts));
  detail::replay_batches(st);
  return {};
}

/// Adds `other` (other batches of the same pass-1 result) into `st`.
[[nodiscard]] inline result<> merge(hfmg_bins_state& st, const hfmg_bins_state& other) {
  const auto same = [](const std::vector<batch_range>& a, const std::vector<batch_range>& b) {
    if (a.size() != b.size())
      return false;
    for (std::size_t i = 0; i < a.size(); ++i) {
      if (a[i].lo != b[i].lo || a[i].hi != b[i].hi)
        return false;
    }
    return true;
  };
  if (st.bins != other.bins || !same(st.ranges, other.ranges) || !same(st.own, other.own)) {
    return make_error(errc::state_mismatch,
                      "HFMG bins: cannot merge states of different pass-1 results or bin counts");
  }
  if (st.folded > 0 && other.folded > 0)
    return make_error(errc::state_mismatch, "HFMG bins: batch 0 is in both states");
  hfmg_bins_state out = other.folded > st.folded ? other : st;
  const hfmg_bins_state& add = other.folded > st.folded ? st : other;
  for (const auto& [b, counts] : add.pending) {
    if (b < out.folded || !out.pending.emplace(b, counts).second) {
      return make_error(errc::state_mismatch,
                        "HFMG bins: batch " + std::to_string(b + 1) + " is in both states");
    }
  }
  detail::replay_batches(out);
  st = std::move(out);
  return {};
}

/// The result once pass 2 saw every batch.
[[nodiscard]] inline result<hfmg_search> finalize(const hfmg_bins_state& st, const hfmg_settings& s,
                                                  const kernels::kernel_set& k) {
  if (st.folded != st.ranges.size()) {
    return make_error(errc::no_data, "HFMG: pass 2 replayed " + std::to_string(st.folded) + " of " +
                                         std::to_string(st.ranges.size()) + " batches");
  }
  return hfmg_run(st.merged, s.bits, s.asymmetric, s.threads, k);
}

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
