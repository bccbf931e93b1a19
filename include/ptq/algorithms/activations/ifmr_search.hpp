// The IFMR search (docs/numerics.md, IFMR) on data already gathered: percentile start values by
// a one-pass top-k, then a search over clip-max candidates with a fused, blocked clip-round-MSE
// pass (all candidates per cache-resident block, loss sums in double), first minimum wins. The
// data may lie in several places (kernels::float_segments): the blocks are those of the values
// in order, so the result is the same as over one buffer. Also the settings and their checks.
// Depends on: core, detail and kernels.
#pragma once

#include <array>
#include <cfloat>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ptq/algorithms/activations/activation.hpp"
#include "ptq/algorithms/layer/tensor.hpp"
#include "ptq/core/abi.hpp"
#include "ptq/core/ifmr_search_size.hpp"
#include "ptq/core/quant.hpp"
#include "ptq/detail/float_format.hpp"
#include "ptq/kernels/float_segments.hpp"
#include "ptq/kernels/kernel_set.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {

/// How many IFMR candidates, and which ratios.
enum class candidate_rule {
  /// The toolkit's float32 arange(start, end, step): K = ceil((end - start) / step) in double,
  /// end usually excluded; ratios with torch's vectorised arange rounding.
  toolkit,
  /// The toolkit's documented intent: K = floor((end - start) / step + 0.5) + 1, end included,
  /// r_i = float32(start + i·step) computed in double.
  inclusive,
};

/// IFMR settings (JSON `activation_quant_params` of an ifmr layer). Decimal config values are
/// doubles, as the toolkit's Python sees them.
struct ifmr_settings {
  double search_range_start = 0.7;
  double search_range_end = 1.3;
  double search_step = 0.01;
  double max_percentile = 0.999999;
  double min_percentile = 0.999999;
  int bits = 8;
  bool asymmetric = true;
  candidate_rule candidates = candidate_rule::toolkit;
  unsigned threads = 1;  ///< 0 = hardware concurrency; results do not depend on it
};

namespace detail {

/// Lanes of one vectorised torch.arange step on the toolkit's build, and the loop block (two of
/// them); the last K % arange_block ratios are computed one by one.
inline constexpr std::size_t arange_lanes = 8;
inline constexpr std::size_t arange_block = 16;

/// The ratios r_0..r_{K-1} of the IFMR search.
[[nodiscard]] inline result<std::vector<float>> ifmr_ratios(const ifmr_settings& s) {
  const double start = s.search_range_start, end = s.search_range_end, step = s.search_step;
  const auto range = "IFMR search range [" + detail::value_text(start) + ", " +
                     detail::value_text(end) + "] with step " + detail::value_text(step);
  // The config's codes for the same conditions (docs/errors.md): one code per condition.
  if (!(end > start) || !std::isfinite(start) || !std::isfinite(end))
    return make_error(errc::search_range_invalid, range + ": it needs start < end and step > 0");
  if (!(step > 0.0))
    return make_error(errc::search_step_invalid, range + ": it needs start < end and step > 0");
  const bool inclusive = s.candidates == candidate_rule::inclusive;
  const double kd = inclusive ? detail::ifmr_inclusive_candidate_count(start, end, step)
                              : detail::ifmr_toolkit_candidate_count(start, end, step);
  if (!(kd >= 1.0) || kd > detail::ifmr_max_candidates) {
    return make_error(errc::search_step_invalid, range + " " + detail::ifmr_too_many_text(kd),
                      "use a larger search_step (the toolkit's default 0.01 gives 61)");
  }
  std::vector<float> r;
  if (inclusive) {
    const auto k = static_cast<std::size_t>(kd);
    r.reserve(k);
    for (std::size_t i = 0; i < k; ++i) {
      r.push_back(static_cast<float>(start + static_cast<double>(i) * step));
    }
    return r;
  }
  const auto k = static_cast<std::size_t>(kd);
  r.resize(k);
  const std::size_t vec_end = k - k % arange_block;
  for (std::size_t i0 = 0; i0 < vec_end; i0 += arange_lanes) {
    const auto base = static_cast<float>(start + step * static_cast<double>(i0));
    for (std::size_t l = 0; l < arange_lanes; ++l) {
      r[i0 + l] = static_cast<float>(static_cast<double>(base) + static_cast<double>(l) * step);
    }
  }
  for (std::size_t i = vec_end; i < k; ++i) {
    r[i] = static_cast<float>(start + step * static_cast<double>(i));
  }
  return r;
}

/// 1-based rank of the percentile start value: 1 when 1 - p < FLT_EPSILON, else
/// N - floor(p·N) (in double, as the toolkit's Python).
[[nodiscard]] inline std::size_t ifmr_percentile_rank(double p, std::size_t n) noexcept {
  if ((1.0 - p) < static_cast<double>(FLT_EPSILON))
    return 1;
  const auto k = n - static_cast<std::size_t>(p * static_cast<double>(n));
  return k == 0 ? 1 : (k > n ? n : k);
}

/// The IFMR candidates (clip ranges and processed scales) for given start values.
[[nodiscard]] inline result<std::vector<kernels::mse_candidate>> ifmr_candidates(
    const ifmr_settings& s, float max0, float min0) {
  auto ratios = ifmr_ratios(s);
  if (!ratios)
    return ratios.error();
  const quant_grid g = make_grid(s.bits);
  std::vector<kernels::mse_candidate> c;
  c.reserve(ratios.value().size());
  float bound = max0;
  auto limit = static_cast<float>((std::int64_t{1} << s.bits) - 1);
  if (!s.asymmetric) {
    const bool neg = std::fabs(max0) < std::fabs(min0);
    bound = std::fabs(max0) > std::fabs(min0) ? std::fabs(max0) : std::fabs(min0);
    limit = static_cast<float>(g.qmax + (neg ? 1 : 0));
  }
  for (const float r : ratios.value()) {
    const float cmax = r * bound;
    const float scale = s.asymmetric ? (cmax - min0) / limit : cmax / limit;
    auto p = process_scale(scale, 0.0f, s.asymmetric, s.bits);
    if (!p)
      return p.error();
    c.push_back(kernels::mse_candidate{s.asymmetric ? min0 : -cmax, cmax, p.value().scale});
  }
  return c;
}

/// Elements per block of the fused MSE pass (16 KB: two blocks fit in L1). A constant, so the
/// summation order - and the result - does not depend on the thread count.
inline constexpr std::size_t ifmr_block = 4096;

/// Sum over x of each candidate's squared error (double, block sums added in block order). A
/// block that straddles two runs of x is gathered first: the same values, the same sums.
[[nodiscard]] inline std::vector<double> ifmr_losses(
    const kernels::float_segments& x, const std::vector<kernels::mse_candidate>& c,
    unsigned threads = 1, const kernels::kernel_set& k = kernels::default_kernels()) {
  const std::size_t n = x.size();
  const std::size_t nk = c.size();
  const std::size_t nblocks = (n + ifmr_block - 1) / ifmr_block;
  std::vector<double> partial(nblocks * nk, 0.0);
  kernels::parallel_blocks(nblocks, threads, [&](std::size_t b) {
    const std::size_t off = b * ifmr_block;
    const std::size_t len = n - off < ifmr_block ? n - off : ifmr_block;
    // Left unset: range() writes what it returns (zeroing 16 KB per block would cost ~1 %).
    // NOLINTNEXTLINE(cppcoreguidelines-pro-type-member-init)
    std::array<float, ifmr_block> gathered;
    k.candidate_mse(x.range(off, len, gathered.data()), len, c.data(), nk, partial.data() + b * nk);
  });
  std::vector<double> loss(nk, 0.0);
  for (std::size_t b = 0; b < nblocks; ++b) {
    for (std::size_t j = 0; j < nk; ++j)
      loss[j] += partial[b * nk + j];
  }
  return loss;
}

}  // namespace detail

/// IFMR on data already gathered (all batches concatenated), with the details of the search.
struct ifmr_search {
  activation_quant_result result;
  float max0 = 0.0f;  ///< percentile start values (after max(.,0) / min(.,0))
  float min0 = 0.0f;
  std::size_t best = 0;  ///< index of the winning candidate
  std::vector<kernels::mse_candidate> candidates;
  std::vector<double> losses;  ///< summed squared errors (divide by N for the MSE)
};

/// The settings checks every IFMR mode makes before it computes (the search range is checked
/// where its ratios are made, ifmr_ratios; ifmr_validate_settings does both).
[[nodiscard]] inline result<> ifmr_check_settings(const ifmr_settings& s) {
  if (!valid_bits(s.bits)) {
    return make_error(errc::invalid_argument,
                      "IFMR bits must be in [2, 16], got " + std::to_string(s.bits));
  }
  if (!(s.max_percentile > 0.0 && s.max_percentile <= 1.0) ||
      !(s.min_percentile > 0.0 && s.min_percentile <= 1.0)) {
    return make_error(errc::percentile_out_of_range, "IFMR percentiles must be in (0, 1]");
  }
  return {};
}

/// Every check of `s`, the search range's included: what a caller runs before the first batch.
[[nodiscard]] inline result<> ifmr_validate_settings(const ifmr_settings& s) {
  if (auto st = ifmr_check_settings(s); !st)
    return st;
  if (auto r = detail::ifmr_ratios(s); !r)
    return r.error();
  return {};
}

namespace detail {

/// The percentile start values from the k-th largest and k-th smallest value.
inline void ifmr_set_start(ifmr_search& out, float kth_largest, float kth_smallest) noexcept {
  out.max0 = kth_largest > 0.0f ? kth_largest : 0.0f;
  out.min0 = kth_smallest < 0.0f ? kth_smallest : 0.0f;
}

/// The end of every IFMR mode: with the candidates and their summed losses set, the first
/// minimum and its scale and offset.
inline void ifmr_conclude(ifmr_search& out, const ifmr_settings& s) {
  out.best = 0;
  for (std::size_t j = 1; j < out.losses.size(); ++j) {
    if (out.losses[j] < out.losses[out.best])
      out.best = j;
  }
  const float scale = out.candidates[out.best].scale;
  float offset = 0.0f;
  if (s.asymmetric) {
    const quant_grid g = make_grid(s.bits);
    offset = -std::nearbyint(out.min0 / scale) - static_cast<float>(-g.qmin);
  }
  out.result =
      make_activation_result(quant_params{scale, static_cast<std::int32_t>(offset), s.bits});
}

}  // namespace detail

/// IFMR on the values of `x`, in order.
[[nodiscard]] inline result<ifmr_search> ifmr_run(
    const kernels::float_segments& x, const ifmr_settings& s,
    const kernels::kernel_set& k = kernels::default_kernels()) {
  if (auto st = ifmr_check_settings(s); !st)
    return st.error();
  const std::size_t n = x.size();
  if (n == 0)
    return make_error(errc::no_data, "IFMR: no data observed");
  ifmr_search out;
  const std::size_t kmax = detail::ifmr_percentile_rank(s.max_percentile, n);
  const std::size_t kmin = detail::ifmr_percentile_rank(s.min_percentile, n);
  const kernels::extremes_result e = kernels::parallel_select_extremes(k, x, kmax, kmin, s.threads);
  detail::ifmr_set_start(out, e.kth_largest, e.kth_smallest);
  auto cand = detail::ifmr_candidates(s, out.max0, out.min0);
  if (!cand)
    return cand.error();
  out.candidates = std::move(cand).value();
  out.losses = detail::ifmr_losses(x, out.candidates, s.threads, k);
  detail::ifmr_conclude(out, s);
  return out;
}

/// IFMR on x[0, n).
[[nodiscard]] inline result<ifmr_search> ifmr_run(
    const float* x, std::size_t n, const ifmr_settings& s,
    const kernels::kernel_set& k = kernels::default_kernels()) {
  return ifmr_run(kernels::one_segment(x, n), s, k);
}

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
