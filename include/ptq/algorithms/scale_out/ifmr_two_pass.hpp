// Exact bounded-memory IFMR in two passes over the batches (docs/scale-out.md), giving the
// store-everything mode's scale and offset bit for bit:
//   pass 1, `ifmr_tails_state`: per batch its size and, over all batches, the exact k largest
//     and k smallest values, k = N - floor(p·N) (tiny); N, the total element count, must be
//     known before pass 1 (the CLI reads it from the .npy headers) because the k depends on it.
//   `ifmr_plan_of`: the start values and the candidates, and the batches' offsets.
//   pass 2, `ifmr_losses_state`: each candidate's loss as partial sums per block of
//     `ifmr_block` elements of the concatenation of the batches in batch order - the very
//     blocks of the one-pass mode - added in block order. A block that straddles a batch
//     boundary is kept as its pieces until they are all there, so any split of the batches over
//     observers (shards, in any order) reduces the same blocks in the same order.
// Both states merge (`merge`) and serialize (ifmr_wire.hpp). Memory: O(k) in pass 1;
// O(K·blocks waiting + ifmr_block) in pass 2, which is O(K + ifmr_block) when the batches come
// in order.
// Depends on: core.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "ptq/algorithms/activations/ifmr.hpp"
#include "ptq/core/abi.hpp"
#include "ptq/core/error.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {

/// Pass 1 of the two-pass IFMR: the batch sizes and the exact tails of the whole data.
struct ifmr_tails_state {
  std::uint64_t total = 0;    ///< N, the element count of all batches (known up front)
  std::uint64_t k_large = 1;  ///< ranks of the percentile start values for N
  std::uint64_t k_small = 1;
  std::vector<std::uint64_t> sizes;  ///< per batch index: its element count, 0 = not seen
  std::vector<float> large;          ///< the k_large largest values seen, descending
  std::vector<float> small;          ///< the k_small smallest values seen, ascending

  [[nodiscard]] std::uint64_t seen() const noexcept {
    std::uint64_t n = 0;
    for (const auto c : sizes)
      n += c;
    return n;
  }
};

/// An empty pass-1 state for `total` elements in all.
[[nodiscard]] inline result<ifmr_tails_state> make_ifmr_tails(const ifmr_settings& s,
                                                              std::uint64_t total) {
  if (auto st = ifmr_check_settings(s); !st)
    return st.error();
  if (total == 0)
    return make_error(errc::no_data, "IFMR: no data observed");
  ifmr_tails_state t;
  t.total = total;
  t.k_large = detail::ifmr_percentile_rank(s.max_percentile, static_cast<std::size_t>(total));
  t.k_small = detail::ifmr_percentile_rank(s.min_percentile, static_cast<std::size_t>(total));
  return t;
}

namespace detail {

/// Keeps the `k` values of `v` that come first under `before` (a strict weak order), sorted.
template <class Before>
void keep_first(std::vector<float>& v, std::uint64_t k, Before before) {
  std::sort(v.begin(), v.end(), before);
  if (v.size() > k)
    v.resize(static_cast<std::size_t>(k));
}

[[nodiscard]] inline result<> mark_batch(std::vector<std::uint64_t>& sizes, std::size_t batch,
                                         std::uint64_t n, const std::string& name) {
  if (batch >= sizes.size())
    sizes.resize(batch + 1, 0);
  if (sizes[batch] != 0) {
    return make_error(errc::state_mismatch,
                      name + ": batch " + std::to_string(batch + 1) + " was already observed");
  }
  sizes[batch] = n;
  return {};
}

/// Adds to `kept` (sorted by `before`, at most k values) the values of x that belong to the k
/// first of the union. A value equal to the k-th kept one is not added: the k first values, as
/// a multiset of floats, are the same either way. Values are buffered up to 2k + 64 before a
/// sort, so the cost is one compare per element once the kept set is full.
template <class Before>
void keep_extremes(std::vector<float>& kept, const float* x, std::size_t n, std::uint64_t k,
                   Before before) {
  const auto cap = static_cast<std::size_t>(2 * k + 64);
  bool full = kept.size() >= k;
  float thr = full ? kept[static_cast<std::size_t>(k - 1)] : 0.0f;
  for (std::size_t i = 0; i < n; ++i) {
    if (full && !before(x[i], thr))
      continue;
    kept.push_back(x[i]);
    if (kept.size() >= cap) {
      keep_first(kept, k, before);
      full = true;
      thr = kept[static_cast<std::size_t>(k - 1)];
    }
  }
  keep_first(kept, k, before);
}

}  // namespace detail

/// Pass 1, one batch (flattened) with its index. Errors: empty batch, NaN/Inf (naming the batch
/// and index), a batch seen twice, more elements than `total`.
[[nodiscard]] inline result<> observe(ifmr_tails_state& t, std::size_t batch, const float* x,
                                      std::size_t n, const kernels::kernel_set& k,
                                      const std::string& name = "activation") {
  const std::string label = name + " batch " + std::to_string(batch + 1);
  auto mm = checked_minmax(label, x, n, k.minmax);
  if (!mm)
    return mm.error();
  if (batch < t.sizes.size() && t.sizes[batch] != 0) {
    return make_error(errc::state_mismatch,
                      name + ": batch " + std::to_string(batch + 1) + " was already observed");
  }
  if (t.seen() + n > t.total) {
    return make_error(errc::state_mismatch, label + ": " + std::to_string(t.seen() + n) +
                                                " elements observed, more than the " +
                                                std::to_string(t.total) + " announced");
  }
  if (auto st = detail::mark_batch(t.sizes, batch, n, name); !st)
    return st;
  detail::keep_extremes(t.large, x, n, t.k_large, std::greater<>());
  detail::keep_extremes(t.small, x, n, t.k_small, std::less<>());
  return {};
}

/// Adds `other` (other batches of the same N) into `t`.
[[nodiscard]] inline result<> merge(ifmr_tails_state& t, const ifmr_tails_state& other) {
  if (other.total != t.total || other.k_large != t.k_large || other.k_small != t.k_small) {
    return make_error(errc::state_mismatch,
                      "IFMR tails: cannot merge states for " + std::to_string(other.total) +
                          " and " + std::to_string(t.total) + " elements (or other percentiles)");
  }
  if (t.seen() + other.seen() > t.total) {
    return make_error(errc::state_mismatch, "IFMR tails: the merged states hold more than the " +
                                                std::to_string(t.total) + " elements announced");
  }
  for (std::size_t b = 0; b < other.sizes.size(); ++b) {
    if (other.sizes[b] == 0)
      continue;
    if (auto st = detail::mark_batch(t.sizes, b, other.sizes[b], "IFMR tails"); !st)
      return st;
  }
  t.large.insert(t.large.end(), other.large.begin(), other.large.end());
  t.small.insert(t.small.end(), other.small.begin(), other.small.end());
  detail::keep_first(t.large, t.k_large, std::greater<>());
  detail::keep_first(t.small, t.k_small, std::less<>());
  return {};
}

/// What pass 2 needs from pass 1: the start values, the candidates and every batch's offset in
/// the concatenation.
struct ifmr_plan {
  float max0 = 0.0f;
  float min0 = 0.0f;
  std::vector<kernels::mse_candidate> candidates;
  std::vector<std::uint64_t> offsets;  ///< batch b starts at offsets[b]; offsets.back() == N
};

/// The plan, once pass 1 saw all N elements in batches 0..B-1 (no index missing).
[[nodiscard]] inline result<ifmr_plan> ifmr_plan_of(const ifmr_tails_state& t,
                                                    const ifmr_settings& s) {
  if (t.seen() != t.total) {
    return make_error(errc::no_data, "IFMR: pass 1 saw " + std::to_string(t.seen()) + " of the " +
                                         std::to_string(t.total) + " elements announced");
  }
  ifmr_plan p;
  p.offsets.push_back(0);
  for (std::size_t b = 0; b < t.sizes.size(); ++b) {
    if (t.sizes[b] == 0) {
      return make_error(errc::no_data, "IFMR: pass 1 has no batch " + std::to_string(b + 1) +
                                           " (batches 1.." + std::to_string(t.sizes.size()) +
                                           " are needed)");
    }
    p.offsets.push_back(p.offsets.back() + t.sizes[b]);
  }
  if (t.large.size() != t.k_large || t.small.size() != t.k_small)
    return make_error(errc::state_invalid, "IFMR tails: fewer values kept than the ranks");
  ifmr_search start;
  detail::ifmr_set_start(start, t.large.back(), t.small.back());
  p.max0 = start.max0;
  p.min0 = start.min0;
  auto c = detail::ifmr_candidates(s, p.max0, p.min0);
  if (!c)
    return c.error();
  p.candidates = std::move(c).value();
  return p;
}

/// A piece of a block that straddles a batch boundary: where in the block, and its values.
struct ifmr_piece {
  std::uint32_t at = 0;
  std::vector<float> values;
};

/// Pass 2 of the two-pass IFMR: the candidates' losses over the blocks seen so far.
struct ifmr_losses_state {
  ifmr_plan plan;
  std::vector<std::uint8_t> seen;  ///< per batch: observed in pass 2
  std::uint64_t folded = 0;        ///< blocks [0, folded) are summed into `loss`
  std::vector<double> loss;        ///< per candidate: the sum of the folded blocks, in order
  std::map<std::uint64_t, std::vector<double>> pending;     ///< complete blocks not yet folded
  std::map<std::uint64_t, std::vector<ifmr_piece>> pieces;  ///< incomplete straddling blocks

  [[nodiscard]] std::uint64_t total() const noexcept { return plan.offsets.back(); }
  [[nodiscard]] std::uint64_t blocks() const noexcept {
    return (total() + detail::ifmr_block - 1) / detail::ifmr_block;
  }
  [[nodiscard]] std::size_t block_size(std::uint64_t j) const noexcept {
    const std::uint64_t rest = total() - j * detail::ifmr_block;
    return static_cast<std::size_t>(rest < detail::ifmr_block ? rest : detail::ifmr_block);
  }
};

[[nodiscard]] inline ifmr_losses_state make_ifmr_losses(ifmr_plan plan) {
  ifmr_losses_state st;
  st.loss.assign(plan.candidates.size(), 0.0);
  st.seen.assign(plan.offsets.size() - 1, 0);
  st.plan = std::move(plan);
  return st;
}

namespace detail {

/// Folds the complete blocks that follow the folded prefix, in block order: the one-pass
/// mode's `loss[j] += partial[b][j]` for b = 0, 1, ... exactly.
inline void fold_blocks(ifmr_losses_state& st) {
  for (auto it = st.pending.begin(); it != st.pending.end() && it->first == st.folded;) {
    for (std::size_t j = 0; j < st.loss.size(); ++j)
      st.loss[j] += it->second[j];
    ++st.folded;
    it = st.pending.erase(it);
  }
}

/// Adds a piece to a straddling block; when its pieces cover it, computes its partial sums
/// from the values in place, as the one-pass mode does on the contiguous data. Errors (only a
/// corrupt deserialized state can cause them): a piece outside its block or overlapping another.
[[nodiscard]] inline result<> add_piece(ifmr_losses_state& st, std::uint64_t j, ifmr_piece p,
                                        const kernels::kernel_set& k) {
  if (j >= st.blocks() || j < st.folded || st.pending.count(j) != 0 ||
      p.values.size() > st.block_size(j) - std::min<std::size_t>(p.at, st.block_size(j)) ||
      p.at >= st.block_size(j)) {
    return make_error(errc::state_invalid, "IFMR losses: a piece of block " + std::to_string(j) +
                                               " lies outside it or in a finished block");
  }
  auto& ps = st.pieces[j];
  ps.push_back(std::move(p));
  std::sort(ps.begin(), ps.end(),
            [](const ifmr_piece& a, const ifmr_piece& b) { return a.at < b.at; });
  std::size_t have = 0;
  for (std::size_t i = 0; i < ps.size(); ++i) {
    if (i > 0 && ps[i - 1].at + ps[i - 1].values.size() > ps[i].at) {
      return make_error(errc::state_invalid,
                        "IFMR losses: overlapping pieces of block " + std::to_string(j));
    }
    have += ps[i].values.size();
  }
  const std::size_t len = st.block_size(j);
  if (have != len)
    return {};
  std::vector<float> block(len);
  for (const auto& q : ps)
    std::copy(q.values.begin(), q.values.end(), block.begin() + q.at);
  std::vector<double> part(st.plan.candidates.size(), 0.0);
  k.candidate_mse(block.data(), len, st.plan.candidates.data(), part.size(), part.data());
  st.pieces.erase(j);
  st.pending.emplace(j, std::move(part));
  return {};
}

}  // namespace detail

/// Pass 2, one batch with its index. Errors: a batch index or size that pass 1 did not see, a
/// batch seen twice in pass 2, NaN/Inf.
[[nodiscard]] inline result<> observe(ifmr_losses_state& st, std::size_t batch, const float* x,
                                      std::size_t n, unsigned threads, const kernels::kernel_set& k,
                                      const std::string& name = "activation") {
  const std::string label = name + " batch " + std::to_string(batch + 1);
  if (batch >= st.seen.size()) {
    return make_error(errc::state_mismatch,
                      label + ": pass 1 had " + std::to_string(st.seen.size()) + " batches");
  }
  const std::uint64_t o = st.plan.offsets[batch];
  const std::uint64_t want = st.plan.offsets[batch + 1] - o;
  if (n != want) {
    return make_error(errc::state_mismatch, label + ": " + std::to_string(n) +
                                                " elements in pass 2, " + std::to_string(want) +
                                                " in pass 1 (the batch changed between passes)");
  }
  if (st.seen[batch] != 0)
    return make_error(errc::state_mismatch, label + ": already observed in pass 2");
  auto mm = checked_minmax(label, x, n, k.minmax);
  if (!mm)
    return mm.error();
  st.seen[batch] = 1;
  // The head piece (up to the first block boundary), the whole blocks, the tail piece.
  const auto head_in = static_cast<std::size_t>(o % detail::ifmr_block);
  const std::size_t head =
      head_in == 0 ? 0 : std::min<std::size_t>(n, detail::ifmr_block - head_in);
  const std::uint64_t first_whole = (o + head) / detail::ifmr_block;
  const std::size_t whole = (n - head) / detail::ifmr_block;
  // The rest is a piece even when it is the (short) last block of all: add_piece computes a
  // block as soon as its pieces cover it.
  const std::size_t tail = n - head - whole * detail::ifmr_block;
  const std::size_t nk = st.plan.candidates.size();
  std::vector<double> partial(whole * nk, 0.0);
  const float* wx = x + head;
  kernels::parallel_blocks(whole, threads, [&](std::size_t b) {
    k.candidate_mse(wx + b * detail::ifmr_block, detail::ifmr_block, st.plan.candidates.data(), nk,
                    partial.data() + b * nk);
  });
  for (std::size_t b = 0; b < whole; ++b) {
    st.pending.emplace(
        first_whole + b,
        std::vector<double>(partial.begin() + static_cast<std::ptrdiff_t>(b * nk),
                            partial.begin() + static_cast<std::ptrdiff_t>((b + 1) * nk)));
  }
  if (head != 0) {
    auto r = detail::add_piece(
        st, o / detail::ifmr_block,
        ifmr_piece{static_cast<std::uint32_t>(head_in), std::vector<float>(x, x + head)}, k);
    if (!r)
      return r;
  }
  if (tail != 0) {
    const float* tx = x + head + whole * detail::ifmr_block;
    auto r = detail::add_piece(st, first_whole + whole,
                               ifmr_piece{0, std::vector<float>(tx, tx + tail)}, k);
    if (!r)
      return r;
  }
  detail::fold_blocks(st);
  return {};
}

/// Adds `other` (other batches of the same plan) into `st`.
[[nodiscard]] inline result<> merge(ifmr_losses_state& st, const ifmr_losses_state& other,
                                    const kernels::kernel_set& k) {
  const auto same_cand = [](const kernels::mse_candidate& a, const kernels::mse_candidate& b) {
    return a.lo == b.lo && a.hi == b.hi && a.scale == b.scale;
  };
  if (other.plan.offsets != st.plan.offsets ||
      other.plan.candidates.size() != st.plan.candidates.size() ||
      !std::equal(st.plan.candidates.begin(), st.plan.candidates.end(),
                  other.plan.candidates.begin(), same_cand)) {
    return make_error(errc::state_mismatch,
                      "IFMR losses: cannot merge states of different pass-1 plans");
  }
  for (std::size_t b = 0; b < st.seen.size(); ++b) {
    if (st.seen[b] != 0 && other.seen[b] != 0) {
      return make_error(errc::state_mismatch,
                        "IFMR losses: batch " + std::to_string(b + 1) + " is in both states");
    }
  }
  // A block is folded only when every block before it is whole in the same state, so at most
  // one of two disjoint states has folded any: it is the base, the other's blocks follow.
  if (st.folded > 0 && other.folded > 0)
    return make_error(errc::state_invalid, "IFMR losses: both states folded leading blocks");
  ifmr_losses_state out = other.folded > st.folded ? other : st;
  const ifmr_losses_state& add = other.folded > st.folded ? st : other;
  for (std::size_t b = 0; b < out.seen.size(); ++b)
    out.seen[b] = static_cast<std::uint8_t>(out.seen[b] | add.seen[b]);
  for (const auto& [j, part] : add.pending) {
    if (j < out.folded || !out.pending.emplace(j, part).second) {
      return make_error(errc::state_invalid,
                        "IFMR losses: block " + std::to_string(j) + " is in both states");
    }
  }
  for (const auto& [j, ps] : add.pieces) {
    for (const auto& p : ps) {
      if (auto r = detail::add_piece(out, j, p, k); !r)
        return r;
    }
  }
  detail::fold_blocks(out);
  st = std::move(out);
  return {};
}

/// The result once pass 2 saw every batch.
[[nodiscard]] inline result<ifmr_search> finalize(const ifmr_losses_state& st,
                                                  const ifmr_settings& s) {
  if (st.folded != st.blocks()) {
    return make_error(errc::no_data, "IFMR: pass 2 summed " + std::to_string(st.folded) + " of " +
                                         std::to_string(st.blocks()) + " blocks");
  }
  ifmr_search out;
  out.max0 = st.plan.max0;
  out.min0 = st.plan.min0;
  out.candidates = st.plan.candidates;
  out.losses = st.loss;
  detail::ifmr_conclude(out, s);
  return out;
}

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
