// Histogram with the toolkit's float32 binning (docs/numerics.md, HFMG):
//   bin = int(((x - lo) * B) / (hi - lo)) in float32, x == hi goes to bin B - 1,
//   values outside [lo, hi] are ignored (torch.histc), and a degenerate range lo == hi uses the
//   edges [lo - 1, hi + 1], so a constant tensor lands in bin B / 2.
// A range wider than FLT_MAX / B, where the float32 product (x - lo) * B can overflow (torch's
// cast of the infinity is undefined), is binned in double: floor((x - lo) * B / (hi - lo)),
// clamped to B - 1.
// Counts are added to `counts` (64-bit). The caller checks finiteness first.
// Depends on: core.
#pragma once

#include <cfloat>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "ptq/core/abi.hpp"
#include "ptq/kernels/simd_support.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {
namespace kernels {

/// The float32 bin geometry of one histc call.
struct bin_geometry {
  float lo = 0.0f;     ///< left edge used for binning (lo - 1 when the range is degenerate)
  float hi = 0.0f;     ///< right edge used for binning
  float span = 0.0f;   ///< hi - lo in float32
  float nbins = 0.0f;  ///< B as float
  bool valid = true;   ///< false when even the widened range is empty (|lo| >= 2^24)
  bool wide = false;   ///< span * B overflows float32: bins are computed in double
};

[[nodiscard]] inline bin_geometry make_bin_geometry(float lo, float hi, std::size_t bins) noexcept {
  bin_geometry g;
  if (lo == hi) {
    lo = lo - 1.0f;
    hi = hi + 1.0f;
  }
  g.lo = lo;
  g.hi = hi;
  g.span = hi - lo;
  g.nbins = static_cast<float>(bins);
  g.valid = g.span > 0.0f;
  g.wide = !(g.span * g.nbins <= FLT_MAX);
  return g;
}

/// Scalar reference: the bin of one value, or -1 when it is outside [lo, hi].
[[nodiscard]] inline std::int64_t bin_of(float x, const bin_geometry& g,
                                         std::size_t bins) noexcept {
  if (!(x >= g.lo) || !(x <= g.hi))
    return -1;
  if (!g.valid)
    return static_cast<std::int64_t>(bins / 2);
  // Without `wide`, x - lo <= span keeps the float32 product finite.
  auto b = g.wide ? static_cast<std::int64_t>(
                        ((static_cast<double>(x) - static_cast<double>(g.lo)) * g.nbins) /
                        (static_cast<double>(g.hi) - static_cast<double>(g.lo)))
                  : static_cast<std::int64_t>(((x - g.lo) * g.nbins) / g.span);
  if (b >= static_cast<std::int64_t>(bins))
    b = static_cast<std::int64_t>(bins) - 1;
  return b;
}

/// Scalar reference: counts[bin_of(x_i)] += 1.
inline void histogram_ref(const float* x, std::size_t n, float lo, float hi, std::size_t bins,
                          std::int64_t* counts) noexcept {
  const bin_geometry g = make_bin_geometry(lo, hi, bins);
  for (std::size_t i = 0; i < n; ++i) {
    const std::int64_t b = bin_of(x[i], g, bins);
    if (b >= 0)
      ++counts[b];
  }
}

namespace detail {

/// Values per block of histogram_simd: its bin indices fit in L1 beside the sub-histograms.
inline constexpr std::size_t histogram_block = 512;

/// The first step of histogram_simd: the bins of x[0..count) (count a multiple of the vector
/// width) into idx, with the same IEEE operations as bin_of, and `bins` for a value outside
/// [lo, hi]. The geometry must be valid and not wide.
template <class Arch>
void bin_indices(const float* x, std::size_t count, const bin_geometry& g, std::size_t bins,
                 std::int32_t* idx) noexcept {
  using B = fbatch<Arch>;
  const B blo(g.lo), bhi(g.hi), bspan(g.span), bn(g.nbins);
  const B top(static_cast<float>(bins - 1));
  const B outside(static_cast<float>(bins));
  for (std::size_t u = 0; u < count; u += B::size) {
    const B v = B::load_unaligned(x + u);
    const auto inside = (v >= blo) & (v <= bhi);
    // For inside values the quotient is in [0, B]; trunc(min(q, B-1)) == min(trunc(q), B-1).
    const B q = ((xsimd::select(inside, v, blo) - blo) * bn) / bspan;
    xsimd::batch_cast<std::int32_t>(xsimd::select(inside, xsimd::min(q, top), outside))
        .store_unaligned(idx + u);
  }
}

/// The second step: one unconditional increment per index (count even), alternating between
/// two sub-histograms so that neighbouring values in one bin do not form one dependency chain.
inline void count_bins(const std::int32_t* idx, std::size_t count, std::uint16_t* h0,
                       std::uint16_t* h1) noexcept {
  for (std::size_t l = 0; l < count; l += 2) {
    ++h0[idx[l]];
    ++h1[idx[l + 1]];
  }
}

/// Values count_bins may count between two flushes: each sub-histogram takes half of them, so
/// no 16-bit counter can pass 65535.
inline constexpr std::size_t histogram_flush_every =
    2 * std::size_t{UINT16_MAX} / histogram_block * histogram_block;

/// Adds the two sub-histograms to the 64-bit counts of bins [0, bins) and zeroes them.
inline void flush_bins(std::uint16_t* h0, std::uint16_t* h1, std::size_t bins,
                       std::int64_t* counts) noexcept {
  for (std::size_t b = 0; b < bins; ++b) {
    counts[b] += static_cast<std::int64_t>(h0[b]) + static_cast<std::int64_t>(h1[b]);
    h0[b] = h1[b] = 0;
  }
}

}  // namespace detail

/// SIMD histogram in two steps per block of 512 values: detail::bin_indices computes the bins of
/// the block in SIMD into a small array, detail::count_bins counts them into two interleaved
/// 16-bit sub-histograms (16 KiB for 4096 bins, so they stay in L1 beside the streamed input,
/// where 32-bit ones did not). A value outside [lo, hi] gets the extra slot `bins`, which is
/// never read, so the counting loop has no branch. Each sub-histogram takes half of a block, so
/// they are flushed into the 64-bit counts before 2 x 65535 values have been counted: no
/// 16-bit counter can overflow.
template <class Arch>
void histogram_simd(const float* x, std::size_t n, float lo, float hi, std::size_t bins,
                    std::int64_t* counts) {
  constexpr std::size_t block = detail::histogram_block;  // a multiple of 2 * W for every arch
  const bin_geometry g = make_bin_geometry(lo, hi, bins);
  if (!g.valid || g.wide || bins == 0 || n < block) {
    histogram_ref(x, n, lo, hi, bins, counts);
    return;
  }
  const std::size_t stride = bins + 1;
  std::vector<std::uint16_t> sub(2 * stride, 0u);
  std::uint16_t* const h0 = sub.data();
  std::uint16_t* const h1 = h0 + stride;
  alignas(Arch::alignment()) std::int32_t idx[block];
  std::size_t since_flush = 0;
  std::size_t i = 0;
  for (; i + block <= n; i += block) {
    detail::bin_indices<Arch>(x + i, block, g, bins, idx);
    detail::count_bins(idx, block, h0, h1);
    since_flush += block;
    if (since_flush >= detail::histogram_flush_every) {
      detail::flush_bins(h0, h1, bins, counts);
      since_flush = 0;
    }
  }
  detail::flush_bins(h0, h1, bins, counts);
  histogram_ref(x + i, n - i, lo, hi, bins, counts);
}

}  // namespace kernels
}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
