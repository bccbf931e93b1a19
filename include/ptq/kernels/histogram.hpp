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

/// The broadcast geometry of bin_batch.
template <class Arch>
struct bin_batch_consts {
  fbatch<Arch> lo, hi, span, nbins, top;
  bin_batch_consts(const bin_geometry& g, std::size_t bins) noexcept
      : lo(g.lo), hi(g.hi), span(g.span), nbins(g.nbins), top(static_cast<float>(bins - 1)) {}
};

/// The bins of one batch with the same IEEE operations as bin_of, and -1 for a value outside
/// [lo, hi] (the counters sit one slot after the array's start, so that slot takes them and is
/// never read). The geometry must be valid and not wide, and the values finite: an outside
/// value's quotient may be huge, never NaN, and its lane is overwritten.
template <class Arch>
[[nodiscard]] xsimd::batch<std::int32_t, Arch> bin_batch(const fbatch<Arch>& v,
                                                         const bin_batch_consts<Arch>& c) noexcept {
  using I = xsimd::batch<std::int32_t, Arch>;
  const auto outside = (v < c.lo) | (v > c.hi);
  // For inside values the quotient is in [0, B]; trunc(min(q, B-1)) == min(trunc(q), B-1).
  const fbatch<Arch> q = xsimd::min(((v - c.lo) * c.nbins) / c.span, c.top);
  if constexpr (is_sse2<Arch> || is_avx<Arch>) {
    // The comparison's mask is a register of all-ones lanes: one OR instead of a three-operation
    // select on SSE2 (measured: the index step is the histogram's bottleneck there).
    using reg = typename fbatch<Arch>::register_type;
    return xsimd::batch_cast<std::int32_t>(q) |
           xsimd::bitwise_cast<I>(fbatch<Arch>(static_cast<reg>(outside)));
  } else {
    return xsimd::batch_cast<std::int32_t>(xsimd::select(outside, fbatch<Arch>(-1.0f), q));
  }
}

/// How far ahead of the binning histogram_simd prefetches its input, in values (4 KiB).
inline constexpr std::size_t histogram_prefetch_ahead = 1024;

/// Prefetches the line at p for one read (prefetchnta): the streamed input then displaces
/// little of the sub-histograms in L1 (docs/numerics.md has the measurements).
inline void prefetch_once(const float* p) noexcept {
#if defined(__GNUC__)
  __builtin_prefetch(p, 0, 0);
#else
  (void)p;
#endif
}

/// The first step of histogram_simd alone: the bins of x[0..count) (count a multiple of the
/// vector width) into idx, as bin_batch gives them.
template <class Arch>
void bin_indices(const float* x, std::size_t count, const bin_batch_consts<Arch>& c,
                 std::int32_t* idx) noexcept {
  using B = fbatch<Arch>;
  for (std::size_t u = 0; u < count; u += B::size)
    bin_batch<Arch>(B::load_unaligned(x + u), c).store_unaligned(idx + u);
}

/// The second step alone: one unconditional increment per index (count even), alternating
/// between two sub-histograms so that neighbouring values in one bin do not form one dependency
/// chain.
inline void count_bins(const std::int32_t* idx, std::size_t count, std::uint16_t* h0,
                       std::uint16_t* h1) noexcept {
  for (std::size_t l = 0; l < count; l += 2) {
    ++h0[idx[l]];
    ++h1[idx[l + 1]];
  }
}

/// Both steps interleaved: the bins of x[0..count) into next_idx while the indices of the
/// previous block (idx, count of them) are counted as count_bins does. The SIMD division and the
/// counters' loads and stores then run side by side in the core instead of one after the other.
/// prefetch[0..count) is prefetched for one read on the way.
template <class Arch>
void bin_and_count(const float* x, std::size_t count, const bin_batch_consts<Arch>& c,
                   std::int32_t* next_idx, const std::int32_t* idx, std::uint16_t* h0,
                   std::uint16_t* h1, const float* prefetch) noexcept {
  using B = fbatch<Arch>;
  for (std::size_t u = 0; u < count; u += B::size) {
    prefetch_once(prefetch + u);
    bin_batch<Arch>(B::load_unaligned(x + u), c).store_unaligned(next_idx + u);
    for (std::size_t l = 0; l < B::size; l += 2) {  // a constant trip count: unrolled
      ++h0[idx[u + l]];
      ++h1[idx[u + l + 1]];
    }
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

/// SIMD histogram in two steps per block of 512 values, software-pipelined: detail::bin_batch
/// computes the bins of the next block in SIMD into a small array while the current block's are
/// counted (detail::bin_and_count), so the division and the counters' loads and stores run side
/// by side, with one branch-free increment each into two interleaved 16-bit sub-histograms
/// (16 KiB for 4096 bins, so they stay in L1 beside the streamed input, where 32-bit ones did
/// not; the input is prefetched for one read to displace little of them). A value outside
/// [lo, hi] is counted in the slot before each sub-histogram (index -1), which is never read.
/// Each sub-histogram takes half of a block, so they are flushed into the 64-bit counts before
/// 2 x 65535 values have been counted: no 16-bit counter can overflow.
template <class Arch>
void histogram_simd(const float* x, std::size_t n, float lo, float hi, std::size_t bins,
                    std::int64_t* counts) {
  constexpr std::size_t block = detail::histogram_block;  // a multiple of 2 * W for every arch
  const bin_geometry g = make_bin_geometry(lo, hi, bins);
  if (!g.valid || g.wide || bins == 0 || n < block) {
    histogram_ref(x, n, lo, hi, bins, counts);
    return;
  }
  std::vector<std::uint16_t> sub(2 * (bins + 1), 0u);  // [outside][bins][outside][bins]
  std::uint16_t* const h0 = sub.data() + 1;
  std::uint16_t* const h1 = h0 + bins + 1;
  const detail::bin_batch_consts<Arch> c(g, bins);
  alignas(Arch::alignment()) std::int32_t idx[2][block];
  detail::bin_indices<Arch>(x, block, c, idx[0]);
  std::size_t counted = 0;  // by the sub-histograms since their last flush
  std::size_t cur = 0;      // idx[cur] holds the bins of the block before x + i
  std::size_t i = block;
  for (; i + block <= n; i += block) {
    // The block histogram_prefetch_ahead values on, or this one near the end (a pointer may
    // not point past the input).
    const float* ahead = n - i >= block + detail::histogram_prefetch_ahead
                             ? x + i + detail::histogram_prefetch_ahead
                             : x + i;
    detail::bin_and_count<Arch>(x + i, block, c, idx[cur ^ 1U], idx[cur], h0, h1, ahead);
    cur ^= 1U;
    counted += block;
    if (counted >= detail::histogram_flush_every) {
      detail::flush_bins(h0, h1, bins, counts);
      counted = 0;
    }
  }
  detail::count_bins(idx[cur], block, h0, h1);
  detail::flush_bins(h0, h1, bins, counts);
  histogram_ref(x + i, n - i, lo, hi, bins, counts);
}

}  // namespace kernels
}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
