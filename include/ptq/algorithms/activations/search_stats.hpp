// What an activation search saw and chose, kept for a calibration report (ptq/report/): the
// observed range as a small histogram, the clip range chosen, IFMR's percentile start values,
// every candidate's loss (IFMR: against the clip ratio; HFMG: along its shrinking search path)
// and the fraction of values outside the clip range. `finalize_with_stats` is the calibrator's
// finalize() plus these details: the search runs once, and its result is the one finalize()
// returns, so keeping the statistics changes no scale.
//
// Cost: HFMG's display histogram and clipped counts come from the histogram it already holds
// (adjacent bins summed); IFMR holds its batches, and the statistics take one min/max, one
// histogram and one counting pass over that held data (the search itself makes one fused pass
// for its ~60 candidates) - no batch is fed twice.
// Depends on: core and kernels.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "ptq/algorithms/activations/hfmg.hpp"
#include "ptq/algorithms/activations/ifmr.hpp"
#include "ptq/algorithms/layer_calibrator.hpp"
#include "ptq/core/abi.hpp"
#include "ptq/core/algorithm_kind.hpp"
#include "ptq/kernels/float_segments.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {

/// Bins of the display histogram: HFMG's 1024-8192 bins are summed in groups of B/128 (each
/// display bin is exactly the sum of its source bins); IFMR's data is binned into 128 equal
/// bins over its observed [min, max].
inline constexpr std::size_t display_bins = 128;

/// One layer's activation search, for a report.
struct activation_search_stats {
  activation_algo algo = activation_algo::ifmr;
  std::uint64_t count = 0;  ///< values observed (all batches; after the DMQ division)
  float data_min = 0.0f;    ///< the range the histogram covers
  float data_max = 0.0f;
  std::vector<std::int64_t> histogram;  ///< display_bins equal bins over [data_min, data_max]
  float clip_min = 0.0f;                ///< the clip range of the chosen candidate
  float clip_max = 0.0f;
  bool has_percentile = false;  ///< IFMR: the percentile start values below are set
  float percentile_min = 0.0f;  ///< IFMR start values (min0 after min(., 0), max0 after max(., 0))
  float percentile_max = 0.0f;
  /// Per candidate, in search order. IFMR: the clip ratio r_i (clip max = r_i · bound) and the
  /// summed squared error. HFMG: the step of the shrinking search, its clip range and the L2
  /// loss.
  std::vector<double> candidate_x;
  std::vector<float> candidate_lo;
  std::vector<float> candidate_hi;
  std::vector<double> candidate_loss;
  std::size_t best = 0;  ///< the chosen candidate (first minimum)
  std::uint64_t clipped_below = 0;
  std::uint64_t clipped_above = 0;
};

/// The statistics of an IFMR search on the data the observer holds.
[[nodiscard]] inline activation_search_stats ifmr_stats(const ifmr_observer& o,
                                                        const ifmr_search& r,
                                                        const kernels::kernel_set& k) {
  activation_search_stats st;
  st.algo = activation_algo::ifmr;
  const kernels::float_segments x = o.data();
  st.count = x.size();
  st.data_min = HUGE_VALF;
  st.data_max = -HUGE_VALF;
  x.for_each_part(0, x.size(), [&](const float* p, std::size_t n) {
    const auto mm = k.minmax(p, n);
    st.data_min = std::min(st.data_min, mm.min);
    st.data_max = std::max(st.data_max, mm.max);
  });
  st.histogram.assign(display_bins, 0);
  if (st.data_max > st.data_min) {
    x.for_each_part(0, x.size(), [&](const float* p, std::size_t n) {
      k.histogram(p, n, st.data_min, st.data_max, display_bins, st.histogram.data());
    });
  } else {
    st.histogram.front() = static_cast<std::int64_t>(x.size());  // constant data: one bin
  }
  st.has_percentile = true;
  st.percentile_min = r.min0;
  st.percentile_max = r.max0;
  const auto ratios = detail::ifmr_ratios(o.settings());
  for (std::size_t j = 0; j < r.candidates.size(); ++j) {
    st.candidate_x.push_back(ratios && j < ratios.value().size() ? ratios.value()[j] : 0.0);
    st.candidate_lo.push_back(r.candidates[j].lo);
    st.candidate_hi.push_back(r.candidates[j].hi);
    st.candidate_loss.push_back(r.losses[j]);
  }
  st.best = r.best;
  if (!r.candidates.empty()) {
    st.clip_min = r.candidates[r.best].lo;
    st.clip_max = r.candidates[r.best].hi;
  }
  x.for_each_part(0, x.size(), [&](const float* p, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) {
      st.clipped_below += p[i] < st.clip_min ? 1 : 0;
      st.clipped_above += p[i] > st.clip_max ? 1 : 0;
    }
  });
  return st;
}

/// The statistics of an HFMG search, from its histogram alone.
[[nodiscard]] inline activation_search_stats hfmg_stats(const hfmg_observer& o,
                                                        const hfmg_search& r) {
  activation_search_stats st;
  st.algo = activation_algo::hfmg;
  const auto& h = o.histogram();
  st.data_min = h.lo;
  st.data_max = h.hi;
  const std::size_t nb = h.counts.size();
  const std::size_t groups = nb < display_bins ? nb : display_bins;
  st.histogram.assign(groups, 0);
  for (std::size_t b = 0; b < nb; ++b) {
    st.histogram[b * groups / nb] += h.counts[b];
    st.count += static_cast<std::uint64_t>(h.counts[b]);
  }
  const float w = detail::hfmg_search_width(h);
  for (std::size_t j = 0; j < r.candidates.size(); ++j) {
    const auto& c = r.candidates[j];
    st.candidate_x.push_back(static_cast<double>(j + 1));
    st.candidate_lo.push_back(h.lo + static_cast<float>(c.left) * w);
    st.candidate_hi.push_back(h.lo + static_cast<float>(c.right + 1) * w);
    st.candidate_loss.push_back(r.losses[j]);
  }
  st.best = r.best;
  st.clip_min = r.clip_min;
  st.clip_max = r.clip_max;
  std::size_t left = 0, right = nb == 0 ? 0 : nb - 1;
  if (!r.candidates.empty()) {
    left = r.candidates[r.best].left;
    right = r.candidates[r.best].right;
  }
  for (std::size_t b = 0; b < nb; ++b) {
    const auto c = static_cast<std::uint64_t>(h.counts[b]);
    st.clipped_below += b < left ? c : 0;
    st.clipped_above += b > right ? c : 0;
  }
  return st;
}

/// finalize() of `c`, with the search's statistics in `stats`.
[[nodiscard]] inline result<activation_quant_result> finalize_with_stats(
    const any_layer_calibrator& c, activation_search_stats& stats) {
  return std::visit(
      [&](const auto& cal) -> result<activation_quant_result> {
        using observer = typename std::decay_t<decltype(cal)>::observer_type;
        auto r = cal.observer().search();
        if (!r)
          return r.error();
        if constexpr (std::is_same_v<observer, ifmr_observer>) {
          stats = ifmr_stats(cal.observer(), r.value(), cal.kernel_set());
        } else {
          stats = hfmg_stats(cal.observer(), r.value());
        }
        return r.value().result;
      },
      c);
}

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
