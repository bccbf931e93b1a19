// The L2 loss of one HFMG candidate over the nonzero histogram bins (docs/numerics.md, HFMG), with
// the toolkit's float32 terms: for source bin b with density rho and the candidate [left, right],
//   a = float(b - left)·w, e = a + w,
//   i, j = destination bins of a and e: 0 left of the candidate, D-1 right of it, else
//          clamp(floor(a / d), 0, D-1) and clamp(floor(e / d), 0, D-1) (the exact floor, as
//          Python's //), c = i·d + d/2,
//   same bin:   t1 = ((e-c)³ - (a-c)³)/3·rho
//   else:       t1 = ((d/2)³ - (a-c)³)/3·rho, t2 = (j-i-1)·(((d/2)³ - (-d/2)³)/3·rho),
//               t3 = (((e - j·d) - d/2)³ - (-d/2)³)/3·rho
// (cubes as x·x·x). Summation order is part of the definition: the t-th nonzero bin goes to lane
// t % 16, each lane adds double(t1), double(t2), double(t3) in that order (t2 = t3 = 0 for a
// same-bin term), and the lanes are added in order 0..15.
// Depends on: core.
#pragma once

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "ptq/core/abi.hpp"
#include "ptq/kernels/simd_support.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {
namespace kernels {

/// One candidate's constants (computed once, in float32, by the caller).
struct hfmg_loss_params {
  std::int32_t left = 0;
  std::int32_t right = 0;
  float w = 0.0f;     ///< source bin width
  float d = 0.0f;     ///< destination bin width, w·(right-left+1)/D
  float half = 0.0f;  ///< d / 2
  float dmax = 0.0f;  ///< D - 1
  float h3 = 0.0f;    ///< half·half·half
  float nh3 = 0.0f;   ///< (-half)·(-half)·(-half)
  float mid = 0.0f;   ///< (h3 - nh3) / 3
};

[[nodiscard]] inline hfmg_loss_params make_hfmg_loss_params(std::int32_t left, std::int32_t right,
                                                            float w, int bits) noexcept {
  hfmg_loss_params p;
  p.left = left;
  p.right = right;
  p.w = w;
  const auto dst = static_cast<float>(std::int64_t{1} << bits);
  p.d = (w * static_cast<float>(right - left + 1)) / dst;
  p.half = p.d / 2.0f;
  p.dmax = dst - 1.0f;
  p.h3 = p.half * p.half * p.half;
  const float nh = -p.half;
  p.nh3 = nh * nh * nh;
  p.mid = (p.h3 - p.nh3) / 3.0f;
  return p;
}

/// floor of the exact quotient a / b, b > 0 (what Python's // gives): the rounded quotient's
/// floor, stepped down when k·b > a (exact in double).
[[nodiscard]] inline float floor_div_exact(float a, float b) noexcept {
  const float k = std::floor(a / b);
  return static_cast<double>(k) * static_cast<double>(b) > static_cast<double>(a) ? k - 1.0f : k;
}

/// The three float32 terms of one bin.
inline void hfmg_bin_terms(std::int32_t b, float rho, const hfmg_loss_params& p, float& t1,
                           float& t2, float& t3) noexcept {
  const float a = static_cast<float>(b - p.left) * p.w;
  const float e = a + p.w;
  float i = 0.0f, j = 0.0f;
  if (b > p.right) {
    i = j = p.dmax;
  } else if (b >= p.left) {
    i = floor_div_exact(a, p.d);
    i = i > 0.0f ? i : 0.0f;
    i = i < p.dmax ? i : p.dmax;
    j = floor_div_exact(e, p.d);
    j = j > 0.0f ? j : 0.0f;
    j = j < p.dmax ? j : p.dmax;
  }
  const float c = i * p.d + p.half;
  const float db = a - c;
  const float db3 = db * db * db;
  if (i == j) {
    const float de = e - c;
    t1 = ((de * de * de - db3) / 3.0f) * rho;
    t2 = 0.0f;
    t3 = 0.0f;
  } else {
    t1 = ((p.h3 - db3) / 3.0f) * rho;
    t2 = (j - i - 1.0f) * (p.mid * rho);
    const float de = (e - j * p.d) - p.half;
    t3 = ((de * de * de - p.nh3) / 3.0f) * rho;
  }
}

/// Scalar reference.
[[nodiscard]] inline double hfmg_loss_ref(const std::int32_t* bin, const float* rho, std::size_t n,
                                          const hfmg_loss_params& p) noexcept {
  double lanes[virtual_lanes] = {};
  for (std::size_t t = 0; t < n; ++t) {
    float t1 = 0.0f, t2 = 0.0f, t3 = 0.0f;
    hfmg_bin_terms(bin[t], rho[t], p, t1, t2, t3);
    double& l = lanes[t % virtual_lanes];
    l += static_cast<double>(t1);
    l += static_cast<double>(t2);
    l += static_cast<double>(t3);
  }
  double s = 0.0;
  for (double l : lanes)
    s += l;
  return s;
}

namespace detail {
template <class Arch>
inline constexpr bool hfmg_simd_ok = has_fused_madd<Arch> && (is_avx512<Arch> || is_avx<Arch>);

/// floor of the exact quotient a / d (d > 0), as floor_div_exact.
template <class Arch>
[[nodiscard]] fbatch<Arch> floor_div(const fbatch<Arch>& a, const fbatch<Arch>& d) noexcept {
  const fbatch<Arch> k = xsimd::floor(a / d);
  // k·d > a exactly  <=>  fma(-k, d, a) < 0 (the fma is exact before its rounding)
  return xsimd::select(fused_nmadd<Arch>(k, d, a) < fbatch<Arch>(0.0f), k - fbatch<Arch>(1.0f), k);
}

/// Lane group g (lanes g·W .. g·W+W-1) of the whole steps of 16 bins, added into lanes[].
/// `Narrow`: the candidate's destination bins are at least two source bins wide (2w <= d, always
/// so for 8 bits), so a source bin reaches at most the next destination bin: j is i or i+1 (one
/// compare instead of a second division) and t2 = (j-i-1)·... is +0, which leaves the double
/// sum unchanged and is not added.
template <class Arch, bool Narrow>
[[nodiscard]] bool hfmg_loss_group(const std::int32_t* bin, const float* rho, std::size_t full,
                                   std::size_t g, const hfmg_loss_params& p,
                                   double* lanes) noexcept {
  using B = fbatch<Arch>;
  using D = dbatch<Arch>;
  using I = xsimd::batch<std::int32_t, Arch>;
  constexpr std::size_t W = B::size;
  constexpr std::size_t DW = D::size;
  const I left(p.left);
  const B leftf(static_cast<float>(p.left)), rightf(static_cast<float>(p.right));
  const B w(p.w), d(p.d), half(p.half), dmax(p.dmax), h3(p.h3), nh3(p.nh3), mid(p.mid);
  const B zero(0.0f), one(1.0f), three(3.0f), top_c = dmax * d + half;
  D lo = D::load_aligned(lanes + 2 * g * DW), hi = D::load_aligned(lanes + (2 * g + 1) * DW);
  B rmax(0.0f);
  for (std::size_t t = g * W; t < full; t += virtual_lanes) {
    const I b = I::load_unaligned(bin + t);
    const B r = B::load_unaligned(rho + t);
    const B a = xsimd::batch_cast<float>(b - left) * w;
    const B e = a + w;
    // Bins are sorted, so most batches lie wholly left or right of the candidate (the first and
    // last bin tell): there the destination bin is fixed (0 or D-1), t2 = t3 = 0 and only t1 is
    // needed.
    const bool all_below = bin[t + W - 1] < p.left;
    if (all_below || bin[t] > p.right) {
      const B c = all_below ? half : top_c;
      const B u = a - c, v = e - c;
      const B t1 = ((v * v * v - u * u * u) / three) * r;
      lo += widen_lo<Arch>(t1);
      hi += widen_hi<Arch>(t1);
      continue;
    }
    const B fi = floor_div<Arch>(a, d);  // >= 0 for bins inside the candidate
    B fe;
    if constexpr (Narrow) {
      const B f1 = fi + one;
      fe = xsimd::select(fused_nmadd<Arch>(f1, d, e) >= zero, f1, fi);  // (fi+1)·d <= e exactly
      rmax = xsimd::max(rmax, r);
    } else {
      fe = floor_div<Arch>(e, d);
    }
    // Inside the candidate 0 <= a/d < 2^bits - 2^bits/(right-left+1), so fi needs no clamp (the
    // reference's clamp never acts on it); e/d may reach 2^bits at the right edge.
    B i = fi;
    B j = xsimd::min(fe, dmax);
    if (bin[t] < p.left || bin[t + W - 1] > p.right) {  // a batch across the candidate's edges
      const B bf = xsimd::batch_cast<float>(b);
      const auto below = bf < leftf;
      const auto above = bf > rightf;
      i = xsimd::select(below, zero, xsimd::select(above, dmax, i));
      j = xsimd::select(below, zero, xsimd::select(above, dmax, j));
    }
    const B c = i * d + half;
    const B db = a - c;
    const B db3 = db * db * db;
    const auto same = i == j;
    // same bin: t1 = ((e-c)³ - db³)/3·rho; else t1 = ((d/2)³ - db³)/3·rho and
    // t3 = (((e - j·d) - d/2)³ - (-d/2)³)/3·rho: one cube serves both cases
    const B x = xsimd::select(same, e - c, (e - j * d) - half);
    const B x3 = x * x * x;
    const B t1 = ((xsimd::select(same, x3, h3) - db3) / three) * r;
    const B t3 = xsimd::select(same, zero, ((x3 - nh3) / three) * r);
    lo += widen_lo<Arch>(t1);
    hi += widen_hi<Arch>(t1);
    if constexpr (!Narrow) {
      const B t2 = xsimd::select(same, zero, (j - i - one) * (mid * r));
      lo += widen_lo<Arch>(t2);
      hi += widen_hi<Arch>(t2);
    }
    lo += widen_lo<Arch>(t3);
    hi += widen_hi<Arch>(t3);
  }
  lo.store_aligned(lanes + 2 * g * DW);
  hi.store_aligned(lanes + (2 * g + 1) * DW);
  // Skipping t2 assumed (j-i-1)·(mid·rho) = 0·finite; with an overflowing mid·rho the reference
  // gets 0·inf = NaN, so the caller redoes the candidate without the shortcut.
  return !Narrow || std::isfinite(p.mid * hmax<Arch>(rmax));
}
}  // namespace detail

/// SIMD form (AVX and up; other arches use the reference), bit-identical to hfmg_loss_ref.
/// `bin` must be ascending (the nonzero bins in order, as hfmg_run passes them): the first and
/// last bin of a batch decide whether it lies wholly outside the candidate.
template <class Arch>
[[nodiscard]] double hfmg_loss_simd(const std::int32_t* bin, const float* rho, std::size_t n,
                                    const hfmg_loss_params& p) noexcept {
  using B = detail::fbatch<Arch>;
  constexpr std::size_t W = B::size;
  if constexpr (!detail::hfmg_simd_ok<Arch> || (virtual_lanes % W) != 0) {
    return hfmg_loss_ref(bin, rho, n, p);
  } else {
    constexpr std::size_t G = virtual_lanes / W;
    assert(std::is_sorted(bin, bin + n));
    alignas(Arch::alignment()) double lanes[virtual_lanes] = {};
    const std::size_t full = n - n % virtual_lanes;
    // One lane group at a time keeps its two double accumulators in registers (each lane's
    // terms are still added in bin order).
    bool narrow = 2.0f * p.w <= p.d;
    for (std::size_t g = 0; g < G && narrow; ++g)
      narrow = detail::hfmg_loss_group<Arch, true>(bin, rho, full, g, p, lanes);
    if (!narrow) {
      for (double& l : lanes)
        l = 0.0;
      for (std::size_t g = 0; g < G; ++g)
        (void)detail::hfmg_loss_group<Arch, false>(bin, rho, full, g, p, lanes);
    }
    for (std::size_t t = full; t < n; ++t) {
      float t1 = 0.0f, t2 = 0.0f, t3 = 0.0f;
      hfmg_bin_terms(bin[t], rho[t], p, t1, t2, t3);
      double& l = lanes[t - full];
      l += static_cast<double>(t1);
      l += static_cast<double>(t2);
      l += static_cast<double>(t3);
    }
    double s = 0.0;
    for (double l : lanes)
      s += l;
    return s;
  }
}

}  // namespace kernels
}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
