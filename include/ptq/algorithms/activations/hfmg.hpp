// HFMG activation calibration (docs/numerics.md, HFMG): a fixed-size histogram from the first
// batch, merged with every later batch (proportional split, upper index clamped to B-1), then
// the candidate shrinking, the L2 loss of each candidate (float32 terms, double sums), the first
// argmin and the min/max kernel. Counts are 64-bit.
// Depends on: core and kernels.
#pragma once

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ptq/algorithms/activations/activation.hpp"
#include "ptq/algorithms/activations/view_blocks.hpp"
#include "ptq/algorithms/layer/tensor.hpp"
#include "ptq/core/abi.hpp"
#include "ptq/core/hfmg_bins.hpp"
#include "ptq/core/quant.hpp"
#include "ptq/kernels/kernel_set.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {

/// HFMG settings (JSON `activation_quant_params` of an hfmg layer).
struct hfmg_settings {
  std::size_t num_of_bins = 4096;  ///< 1024, 2048, 4096 or 8192
  int bits = 8;
  bool asymmetric = true;
  /// For the histogram and the search; 0 = hardware concurrency; results do not depend on it.
  unsigned threads = 1;
};

namespace detail {

/// Python-style floor division of float32 values (torch's div_floor_floating): fmod-based, so it
/// can differ from floor(a / b) when the quotient rounds up to an integer.
[[nodiscard]] inline float floor_divide(float a, float b) noexcept {
  if (b == 0.0f)
    return a / b;
  const float mod = std::fmod(a, b);
  float div = (a - mod) / b;
  if (mod != 0.0f && ((b < 0.0f) != (mod < 0.0f)))
    div -= 1.0f;
  if (div == 0.0f)
    return std::copysign(0.0f, a / b);
  float fl = std::floor(div);
  if (div - fl > 0.5f)
    fl += 1.0f;
  return fl;
}

}  // namespace detail

/// A histogram over [lo, hi] with 64-bit counts.
struct hfmg_histogram {
  float lo = 0.0f;
  float hi = 0.0f;
  std::vector<std::int64_t> counts;
};

/// One L2-loss candidate: source bins [left, right].
struct hfmg_candidate {
  std::size_t left = 0;
  std::size_t right = 0;
};

namespace detail {

/// The candidate list built by repeated shrinking (count step ceil(total/1e5), minimum width
/// ceil(B/4)); the full range is never a candidate.
[[nodiscard]] inline std::vector<hfmg_candidate> hfmg_search_range(
    const std::vector<std::int64_t>& counts) {
  std::vector<hfmg_candidate> out;
  if (counts.empty())
    return out;
  std::int64_t total = 0;
  for (auto c : counts)
    total += c;
  double stepd = std::ceil(static_cast<double>(total) / 100000.0);
  const std::int64_t step = stepd < 1.0 ? 1 : static_cast<std::int64_t>(stepd);
  const auto nb = static_cast<std::int64_t>(counts.size());
  const std::int64_t min_bins = (nb + 3) / 4;
  std::int64_t left = 0, right = nb - 1;
  while (right - left > min_bins) {
    std::int64_t tl = left, tr = right, sl = 0, sr = 0;
    while (tl < tr && sl < step)
      sl += counts[static_cast<std::size_t>(tl++)];
    while (tl < tr && sr < step)
      sr += counts[static_cast<std::size_t>(tr--)];
    if ((right - tr) >= (tl - left)) {
      right = tr;
    } else {
      left = tl;
    }
    out.push_back(hfmg_candidate{static_cast<std::size_t>(left), static_cast<std::size_t>(right)});
  }
  return out;
}

/// The bin width the search uses: the toolkit rebuilds its edges as lo + float32(i·w) with
/// w = (hi-lo)/B, and then takes (top edge - lo)/B.
[[nodiscard]] inline float hfmg_search_width(const hfmg_histogram& h) noexcept {
  const auto nb = static_cast<float>(h.counts.size());
  const float w0 = (h.hi - h.lo) / nb;
  const float top = h.lo + nb * w0;
  return (top - h.lo) / nb;
}

/// The nonzero bins of a histogram and their densities count / w (float32, as the toolkit).
struct hfmg_bins {
  std::vector<std::int32_t> index;
  std::vector<float> rho;
};

[[nodiscard]] inline hfmg_bins nonzero_bins(const std::vector<std::int64_t>& counts, float w) {
  hfmg_bins nz;
  for (std::size_t b = 0; b < counts.size(); ++b) {
    if (counts[b] == 0)
      continue;
    nz.index.push_back(static_cast<std::int32_t>(b));
    nz.rho.push_back(static_cast<float>(counts[b]) / w);
  }
  return nz;
}

[[nodiscard]] inline double hfmg_loss_nz(const hfmg_bins& nz, const hfmg_candidate& c, int bits,
                                         float w, const kernels::kernel_set& k) noexcept {
  const kernels::hfmg_loss_params p = kernels::make_hfmg_loss_params(
      static_cast<std::int32_t>(c.left), static_cast<std::int32_t>(c.right), w, bits);
  if (p.d < FLT_EPSILON)
    return 0.0;  // as the toolkit: a destination bin below FLT_EPSILON costs nothing
  return k.hfmg_loss(nz.index.data(), nz.rho.data(), nz.index.size(), p);
}

}  // namespace detail

/// L2 loss of one candidate: float32 terms as the toolkit computes them (kernels/hfmg_loss.hpp),
/// summed in double. Bins with zero count contribute exactly zero and are skipped.
[[nodiscard]] inline double hfmg_loss(const hfmg_histogram& h, const hfmg_candidate& c, int bits,
                                      float w,
                                      const kernels::kernel_set& k = kernels::default_kernels()) {
  return detail::hfmg_loss_nz(detail::nonzero_bins(h.counts, w), c, bits, w, k);
}

/// The search at the end of HFMG, with its details.
struct hfmg_search {
  activation_quant_result result;
  std::vector<hfmg_candidate> candidates;
  std::vector<double> losses;
  std::size_t best = 0;
  float clip_min = 0.0f;  ///< the clip range found (before the min/max kernel)
  float clip_max = 0.0f;
};

[[nodiscard]] inline result<hfmg_search> hfmg_run(
    const hfmg_histogram& h, int bits, bool asymmetric, unsigned threads = 1,
    const kernels::kernel_set& k = kernels::default_kernels()) {
  hfmg_search out;
  out.candidates = detail::hfmg_search_range(h.counts);
  const float w = detail::hfmg_search_width(h);
  const detail::hfmg_bins nz = detail::nonzero_bins(h.counts, w);
  out.losses.resize(out.candidates.size());
  // Candidates are independent: blocks of 64 candidates over the threads (results are the same
  // for any thread count).
  constexpr std::size_t per_block = 64;
  const std::size_t nblocks = (out.candidates.size() + per_block - 1) / per_block;
  kernels::parallel_blocks(nblocks, threads, [&](std::size_t blk) {
    const std::size_t end = std::min(out.candidates.size(), (blk + 1) * per_block);
    for (std::size_t j = blk * per_block; j < end; ++j) {
      out.losses[j] = detail::hfmg_loss_nz(nz, out.candidates[j], bits, w, k);
    }
  });
  for (std::size_t j = 1; j < out.losses.size(); ++j) {
    if (out.losses[j] < out.losses[out.best])
      out.best = j;
  }
  // No candidate at all (cannot happen for B >= 1024) would mean the full range.
  hfmg_candidate best{0, h.counts.size() - 1};
  if (!out.candidates.empty())
    best = out.candidates[out.best];
  out.clip_min = h.lo + static_cast<float>(best.left) * w;
  out.clip_max = h.lo + static_cast<float>(best.right + 1) * w;
  auto p = min_max_params(out.clip_max, out.clip_min, bits, asymmetric);
  if (!p)
    return p.error();
  out.result = make_activation_result(p.value());
  return out;
}

namespace detail {

/// Merges `old` into `fresh` (binned on the merged range), as docs/numerics.md, HFMG, says.
inline void hfmg_merge_into(const hfmg_histogram& old, hfmg_histogram& fresh) {
  const std::size_t nb = fresh.counts.size();
  const auto eps = static_cast<double>(FLT_EPSILON);
  const bool same = std::fabs(static_cast<double>(fresh.lo) - static_cast<double>(old.lo)) <= eps &&
                    std::fabs(static_cast<double>(fresh.hi) - static_cast<double>(old.hi)) <= eps;
  if (same) {
    for (std::size_t b = 0; b < nb; ++b)
      fresh.counts[b] += old.counts[b];
    return;
  }
  const auto nbf = static_cast<float>(nb);
  const float w = (old.hi - old.lo) / nbf;
  const float mw = (fresh.hi - fresh.lo) / nbf;
  const auto top = static_cast<std::int64_t>(nb) - 1;
  for (std::size_t b = 0; b < nb; ++b) {
    const std::int64_t cnt = old.counts[b];
    if (cnt == 0)
      continue;
    const float lower = old.lo + static_cast<float>(b) * w;
    const float upper = old.lo + static_cast<float>(b + 1) * w;
    auto lo_idx = static_cast<std::int64_t>(floor_divide(lower - fresh.lo, mw));
    auto hi_idx = static_cast<std::int64_t>(floor_divide(upper - fresh.lo, mw));
    lo_idx = lo_idx < 0 ? 0 : (lo_idx > top ? top : lo_idx);  // clamp to B-1 (toolkit: IndexError)
    hi_idx = hi_idx < 0 ? 0 : (hi_idx > top ? top : hi_idx);
    if (lo_idx == hi_idx) {
      fresh.counts[static_cast<std::size_t>(lo_idx)] += cnt;
    } else {
      const float edge = fresh.lo + static_cast<float>(lo_idx + 1) * mw;
      const float frac = (edge - lower) / (upper - lower);
      const auto lower_count = static_cast<std::int64_t>(static_cast<float>(cnt) * frac);
      fresh.counts[static_cast<std::size_t>(lo_idx)] += lower_count;
      fresh.counts[static_cast<std::size_t>(hi_idx)] += cnt - lower_count;
    }
  }
}

}  // namespace detail

/// What an HFMG observer accumulates: the merged histogram of the batches so far. Kept apart
/// from the settings and kernels so that a later scale-out can merge two of them (the
/// proportional split of hfmg_merge_into, in batch order) and serialize them.
struct hfmg_state {
  hfmg_histogram histogram;
  std::size_t batches = 0;
};

/// HFMG observer: observe() each calibration batch, then finalize(). Holds its kernel set by
/// value, so it never points into a moved-from owner.
/// The settings checks of HFMG: bits in [2, 16], and the toolkit's histogram sizes (E304, as
/// the config's `num_of_bins`).
[[nodiscard]] inline result<> hfmg_check_settings(const hfmg_settings& s) {
  if (!valid_bits(s.bits)) {
    return make_error(errc::invalid_argument,
                      "HFMG bits must be in [2, 16], got " + std::to_string(s.bits));
  }
  if (!is_supported_num_of_bins(s.num_of_bins)) {
    return make_error(
        errc::num_of_bins_invalid,
        "HFMG num_of_bins " + std::to_string(s.num_of_bins) + supported_num_of_bins_text);
  }
  return {};
}

class hfmg_observer {
 public:
  using settings_type = hfmg_settings;

  explicit hfmg_observer(hfmg_settings s = {},
                         const kernels::kernel_set& k = kernels::default_kernels(),
                         std::string name = "activation")
      : s_(s), k_(k), name_(std::move(name)) {}

  [[nodiscard]] result<> observe(const float* x, std::size_t n) { return observe(view_of(x, {n})); }
  /// Adds one batch in any layout a tensor_view reads (a mapped float16 file, a strided
  /// tensor), read twice (min/max, then the histogram) a block at a time, so it is never
  /// converted whole (view_blocks.hpp). E909 for a view it cannot read.
  [[nodiscard]] result<> observe(const tensor_view& v) {
    if (auto st = check_settings(); !st)
      return st;
    const std::string label = name_ + " batch " + std::to_string(state_.batches + 1);
    if (std::string problem = tensor_view_problem(v); !problem.empty())
      return make_error(errc::tensor_view_invalid, label + ": " + problem);
    auto mm = checked_minmax(label, v, k_, s_.threads);
    if (!mm)
      return mm.error();
    const float mn = mm.value().min, mx = mm.value().max;
    hfmg_histogram& h = state_.histogram;
    if (state_.batches == 0) {
      h.lo = mn;
      h.hi = mx;
      h.counts.assign(s_.num_of_bins, 0);
      view_histogram(k_, v, h.lo, h.hi, s_.num_of_bins, h.counts.data(), s_.threads);
    } else {
      hfmg_histogram fresh;
      fresh.lo = mn < h.lo ? mn : h.lo;
      fresh.hi = mx > h.hi ? mx : h.hi;
      fresh.counts.assign(s_.num_of_bins, 0);
      view_histogram(k_, v, fresh.lo, fresh.hi, s_.num_of_bins, fresh.counts.data(), s_.threads);
      detail::hfmg_merge_into(h, fresh);
      h = std::move(fresh);
    }
    ++state_.batches;
    return {};
  }
  template <class C>
  [[nodiscard]] result<> observe(const C& batch) {
    return observe(batch.data(), batch.size());
  }
  /// For a caller that treats every observer alike (ifmr_observer::reserve): HFMG keeps only
  /// its histogram, so there is nothing to make room for.
  void reserve(std::size_t /*values*/) noexcept {}

  /// scale_d / offset_d of the batches observed so far. It changes nothing: observing may go on
  /// after it (a training loop's running estimate costs one search over the histogram).
  [[nodiscard]] result<activation_quant_result> finalize() const {
    auto r = search();
    if (!r)
      return r.error();
    return r.value().result;
  }
  /// finalize() under the name a training loop reads best.
  [[nodiscard]] result<activation_quant_result> estimate() const { return finalize(); }
  /// Forgets every batch (the settings, kernels and name stay).
  void reset() noexcept { state_ = hfmg_state{}; }
  /// finalize() with the details of the search (candidates, losses, clip range): the same
  /// computation, for a caller that reports it.
  [[nodiscard]] result<hfmg_search> search() const {
    if (auto st = check_settings(); !st)
      return st.error();
    if (state_.batches == 0) {
      return make_error(errc::no_data, name_ + ": HFMG finalize before observe");
    }
    auto r = hfmg_run(state_.histogram, s_.bits, s_.asymmetric, s_.threads, k_);
    if (!r)
      return make_error(r.error().code, name_ + ": " + r.error().message, r.error().note);
    return r;
  }

  [[nodiscard]] const hfmg_histogram& histogram() const noexcept { return state_.histogram; }
  [[nodiscard]] std::size_t batches() const noexcept { return state_.batches; }
  [[nodiscard]] const hfmg_settings& settings() const noexcept { return s_; }
  [[nodiscard]] const std::string& name() const noexcept { return name_; }

 private:
  [[nodiscard]] result<> check_settings() const {
    if (auto st = hfmg_check_settings(s_); !st)
      return make_error(st.error().code, name_ + ": " + st.error().message);
    return {};
  }

  hfmg_settings s_;
  kernels::kernel_set k_;
  std::string name_;
  hfmg_state state_;
};

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
