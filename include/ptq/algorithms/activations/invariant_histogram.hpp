// The opt-in order-invariant histogram for HFMG (`ptq observe --algo hfmg --order-invariant`,
// docs/scale-out.md): B bins of width w = 2^e anchored at 0 (global bin k covers
// [k·w, (k+1)·w)), the window starting at the lowest nonzero bin. e is the smallest exponent for
// which the data's lowest and highest bins are fewer than B apart; when the range grows, e goes
// up by one and bin k moves to floor(k / 2): a bin pair merges exactly, no count is split. Both
// the exponent and every element's bin depend only on the set of values, so any order, any
// split into batches and any merge tree give the same bytes. HFMG's search runs on it as on the
// toolkit's histogram. This is not the toolkit's histogram: see docs/scale-out.md for how far
// the result can be from it.
// Depends on: core.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ptq/algorithms/activations/hfmg.hpp"
#include "ptq/core/abi.hpp"
#include "ptq/core/error.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {

/// The smallest bin exponent: below every float32's exponent, so all-zero data has one bin.
inline constexpr std::int32_t invariant_min_exponent = -160;

struct invariant_histogram {
  std::uint64_t bins = 0;                          ///< B
  std::int32_t exponent = invariant_min_exponent;  ///< w = 2^exponent
  std::int64_t start = 0;            ///< global index of counts[0] (the lowest nonzero bin)
  std::vector<std::int64_t> counts;  ///< B counts; empty before the first batch
};

namespace detail {

/// floor(k / 2^d) for any d >= 0.
[[nodiscard]] inline std::int64_t floor_shift(std::int64_t k, std::int32_t d) noexcept {
  if (d >= 63)
    return k < 0 ? -1 : 0;
  const std::int64_t p = std::int64_t{1} << d;
  const std::int64_t q = k / p;
  return (k % p != 0 && k < 0) ? q - 1 : q;
}

/// The global bin of x at exponent e (exact: a power-of-two scaling in double).
[[nodiscard]] inline double bin_of(float x, std::int32_t e) noexcept {
  return std::floor(std::ldexp(static_cast<double>(x), -e));
}

/// Whether [lo, hi] fits B bins at exponent e, with bin indices well inside int64.
[[nodiscard]] inline bool fits(float lo, float hi, std::int32_t e, std::uint64_t b) noexcept {
  const double kl = bin_of(lo, e), kh = bin_of(hi, e);
  return std::fabs(kl) < 0x1p62 && std::fabs(kh) < 0x1p62 && kh - kl < static_cast<double>(b);
}

/// `h` with its bins merged up to exponent e and its window starting at global bin `start`
/// (every nonzero bin must land in [start, start + B)).
inline void rebin(invariant_histogram& h, std::int32_t e, std::int64_t start) {
  std::vector<std::int64_t> out(h.counts.size(), 0);
  const std::int32_t d = e - h.exponent;
  for (std::size_t i = 0; i < h.counts.size(); ++i) {
    if (h.counts[i] == 0)
      continue;
    const std::int64_t k = floor_shift(h.start + static_cast<std::int64_t>(i), d);
    out[static_cast<std::size_t>(k - start)] += h.counts[i];
  }
  h.counts = std::move(out);
  h.exponent = e;
  h.start = start;
}

/// The lowest and highest nonzero global bins of a non-empty histogram.
[[nodiscard]] inline std::pair<std::int64_t, std::int64_t> occupied(const invariant_histogram& h) {
  std::size_t a = 0, z = h.counts.size() - 1;
  while (a < z && h.counts[a] == 0)
    ++a;
  while (z > a && h.counts[z] == 0)
    --z;
  return {h.start + static_cast<std::int64_t>(a), h.start + static_cast<std::int64_t>(z)};
}

}  // namespace detail

/// Adds `other` (any batches, in any order) into `h`. Both must have the same bin count.
[[nodiscard]] inline result<> merge(invariant_histogram& h, const invariant_histogram& other) {
  if (other.counts.empty())
    return {};
  if (h.counts.empty()) {
    h = other;
    return {};
  }
  if (h.bins != other.bins) {
    return make_error(errc::state_mismatch, "order-invariant histogram: cannot merge " +
                                                std::to_string(other.bins) + " bins into " +
                                                std::to_string(h.bins));
  }
  std::int32_t e = h.exponent > other.exponent ? h.exponent : other.exponent;
  auto [la, ha] = detail::occupied(h);
  auto [lb, hb] = detail::occupied(other);
  std::int64_t lo = std::min(detail::floor_shift(la, e - h.exponent),
                             detail::floor_shift(lb, e - other.exponent));
  std::int64_t hi = std::max(detail::floor_shift(ha, e - h.exponent),
                             detail::floor_shift(hb, e - other.exponent));
  while (static_cast<std::uint64_t>(hi - lo) >= h.bins) {  // a bin pair merges per step
    ++e;
    lo = detail::floor_shift(lo, 1);
    hi = detail::floor_shift(hi, 1);
  }
  invariant_histogram b = other;
  detail::rebin(h, e, lo);
  detail::rebin(b, e, lo);
  for (std::size_t i = 0; i < h.counts.size(); ++i)
    h.counts[i] += b.counts[i];
  return {};
}

/// One batch. Errors: empty batch, NaN/Inf (naming the batch), a bin count below 4.
[[nodiscard]] inline result<> observe(invariant_histogram& h, const float* x, std::size_t n,
                                      std::size_t bins, const kernels::kernel_set& k,
                                      const std::string& label = "activation") {
  if (bins < 4)
    return make_error(errc::invalid_argument, label + ": HFMG num_of_bins must be at least 4");
  auto mm = checked_minmax(label, x, n, k.minmax);
  if (!mm)
    return mm.error();
  invariant_histogram one;
  one.bins = bins;
  while (!detail::fits(mm.value().min, mm.value().max, one.exponent, bins))
    ++one.exponent;
  one.start = static_cast<std::int64_t>(detail::bin_of(mm.value().min, one.exponent));
  one.counts.assign(bins, 0);
  for (std::size_t i = 0; i < n; ++i) {
    const auto g = static_cast<std::int64_t>(detail::bin_of(x[i], one.exponent));
    ++one.counts[static_cast<std::size_t>(g - one.start)];
  }
  if (!h.counts.empty() && h.bins != bins) {
    return make_error(
        errc::state_mismatch,
        label + ": " + std::to_string(bins) + " bins, the histogram has " + std::to_string(h.bins));
  }
  return merge(h, one);
}

/// The histogram as HFMG's search sees it: [start·w, (start + B)·w] in float32.
[[nodiscard]] inline hfmg_histogram to_hfmg_histogram(const invariant_histogram& h) {
  hfmg_histogram out;
  out.lo = static_cast<float>(std::ldexp(static_cast<double>(h.start), h.exponent));
  out.hi = static_cast<float>(
      std::ldexp(static_cast<double>(h.start) + static_cast<double>(h.bins), h.exponent));
  out.counts = h.counts;
  return out;
}

/// HFMG's candidate search and min/max kernel on the order-invariant histogram.
[[nodiscard]] inline result<hfmg_search> finalize(const invariant_histogram& h,
                                                  const hfmg_settings& s,
                                                  const kernels::kernel_set& k) {
  if (h.counts.empty())
    return make_error(errc::no_data, "HFMG: no data observed");
  return hfmg_run(to_hfmg_histogram(h), s.bits, s.asymmetric, s.threads, k);
}

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
