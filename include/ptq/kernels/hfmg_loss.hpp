// The L2 loss of one HFMG candidate over the nonzero histogram bins (spec §5.6, §10.6), with the
// toolkit's float32 terms: for source bin b with density rho and the candidate [left, right],
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
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "ptq/kernels/simd_support.hpp"

namespace ptq::kernels {

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
inline constexpr bool hfmg_simd_ok = is_avx512<Arch> || is_avx<Arch>;
}  // namespace detail

/// SIMD form (AVX and up; other arches use the reference), bit-identical to hfmg_loss_ref.
template <class Arch>
[[nodiscard]] double hfmg_loss_simd(const std::int32_t* bin, const float* rho, std::size_t n,
                                    const hfmg_loss_params& p) noexcept {
  using B = detail::fbatch<Arch>;
  using D = detail::dbatch<Arch>;
  using I = xsimd::batch<std::int32_t, Arch>;
  constexpr std::size_t W = B::size;
  if constexpr (!detail::hfmg_simd_ok<Arch> || (virtual_lanes % W) != 0) {
    return hfmg_loss_ref(bin, rho, n, p);
  } else {
    constexpr std::size_t G = virtual_lanes / W;
    constexpr std::size_t DW = D::size;
    const I left(p.left);
    const B leftf(static_cast<float>(p.left)), rightf(static_cast<float>(p.right));
    const B w(p.w), d(p.d), half(p.half), dmax(p.dmax), h3(p.h3), nh3(p.nh3), mid(p.mid);
    const B zero(0.0f), one(1.0f), three(3.0f);
    D acc[2 * G];
    for (auto& a : acc)
      a = D(0.0);
    const auto floor_div = [&](const B& a) {
      const B k = xsimd::floor(a / d);
      // k·d > a exactly  <=>  fma(-k, d, a) < 0 (the fma is exact before its rounding)
      return xsimd::select(xsimd::fnma(k, d, a) < zero, k - one, k);
    };
    const std::size_t full = n - n % virtual_lanes;
    for (std::size_t t = 0; t < full; t += virtual_lanes) {
      for (std::size_t g = 0; g < G; ++g) {
        const I b = I::load_unaligned(bin + t + g * W);
        const B r = B::load_unaligned(rho + t + g * W);
        const B a = xsimd::batch_cast<float>(b - left) * w;
        const B e = a + w;
        D& lo = acc[2 * g];
        D& hi = acc[2 * g + 1];
        const B bf = xsimd::batch_cast<float>(b);
        // Bins are sorted, so most batches lie wholly left or right of the candidate: there the
        // destination bin is fixed (0 or D-1), t2 = t3 = 0 and only t1 is needed.
        if (xsimd::all(bf < leftf) || xsimd::all(bf > rightf)) {
          const B c = xsimd::all(bf < leftf) ? half : dmax * d + half;
          const B u = a - c, v = e - c;
          const B t1 = ((v * v * v - u * u * u) / three) * r;
          lo += detail::widen_lo<Arch>(t1);
          hi += detail::widen_hi<Arch>(t1);
          continue;
        }
        const auto below = bf < leftf;
        const auto above = bf > rightf;
        B i = xsimd::min(xsimd::max(floor_div(a), zero), dmax);
        B j = xsimd::min(xsimd::max(floor_div(e), zero), dmax);
        i = xsimd::select(below, zero, xsimd::select(above, dmax, i));
        j = xsimd::select(below, zero, xsimd::select(above, dmax, j));
        const B c = i * d + half;
        const B db = a - c;
        const B db3 = db * db * db;
        const auto same = i == j;
        const B de_same = e - c;
        const B same_t = ((de_same * de_same * de_same - db3) / three) * r;
        const B left_t = ((h3 - db3) / three) * r;
        const B mid_t = (j - i - one) * (mid * r);
        const B de = (e - j * d) - half;
        const B right_t = ((de * de * de - nh3) / three) * r;
        const B t1 = xsimd::select(same, same_t, left_t);
        const B t2 = xsimd::select(same, zero, mid_t);
        const B t3 = xsimd::select(same, zero, right_t);
        lo += detail::widen_lo<Arch>(t1);
        hi += detail::widen_hi<Arch>(t1);
        lo += detail::widen_lo<Arch>(t2);
        hi += detail::widen_hi<Arch>(t2);
        lo += detail::widen_lo<Arch>(t3);
        hi += detail::widen_hi<Arch>(t3);
      }
    }
    alignas(Arch::alignment()) double lanes[virtual_lanes];
    for (std::size_t a = 0; a < 2 * G; ++a)
      acc[a].store_aligned(lanes + a * DW);
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

}  // namespace ptq::kernels
