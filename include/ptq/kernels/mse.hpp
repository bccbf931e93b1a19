// Fused clip-round-MSE over a whole set of IFMR candidates (spec §5.5, §10.3).
//
// For candidate k with clip range [lo_k, hi_k] and scale s_k, the per-element term is the
// toolkit's float32 value
//     t = min(max(x, lo_k), hi_k);  d = nearbyint(t / s_k) * s_k - x;  term = d * d
// and the kernel returns, for every candidate, the sum of the terms of x[0..n) in double. The sum
// is striped over `virtual_lanes` (16) lanes, element i into lane i % 16, each lane summed in
// element order, then the lanes are added in order 0..15. This order is the definition (the
// scalar reference implements it literally), so every arch gives the same bits.
//
// The kernel handles one block; callers cut the data into cache-resident blocks, run all
// candidates over each block, and add the per-block sums in block order (see ifmr.hpp), which
// makes the result independent of the thread count.
#pragma once

#include <cmath>
#include <cstddef>

#include "ptq/kernels/simd_support.hpp"

namespace ptq::kernels {

/// One IFMR candidate: clip range and scale.
struct mse_candidate {
  float lo = 0.0f;
  float hi = 0.0f;
  float scale = 1.0f;
};

/// The toolkit's float32 squared error of one element for one candidate.
[[nodiscard]] inline float mse_term(float x, const mse_candidate& c) noexcept {
  float t = x > c.lo ? x : c.lo;
  t = t < c.hi ? t : c.hi;
  const float q = std::nearbyint(t / c.scale);
  const float d = q * c.scale - x;
  return d * d;
}

/// Scalar reference: out[k] = striped double sum of mse_term(x_i, cand[k]) over i in [0, n).
inline void candidate_mse_ref(const float* x, std::size_t n, const mse_candidate* cand,
                              std::size_t k, double* out) noexcept {
  for (std::size_t c = 0; c < k; ++c) {
    double lanes[virtual_lanes] = {};
    for (std::size_t i = 0; i < n; ++i) {
      lanes[i % virtual_lanes] += static_cast<double>(mse_term(x[i], cand[c]));
    }
    double s = 0.0;
    for (double l : lanes)
      s += l;
    out[c] = s;
  }
}

/// SIMD form of candidate_mse_ref, bit-identical to it.
template <class Arch>
void candidate_mse_simd(const float* x, std::size_t n, const mse_candidate* cand, std::size_t k,
                        double* out) noexcept {
  using B = detail::fbatch<Arch>;
  using D = detail::dbatch<Arch>;
  constexpr std::size_t W = B::size;
  if constexpr (!detail::can_widen<Arch> || (virtual_lanes % W) != 0) {
    candidate_mse_ref(x, n, cand, k, out);
  } else {
    constexpr std::size_t G = virtual_lanes / W;  // float batches per lane group
    constexpr std::size_t DW = D::size;           // == W / 2
    const std::size_t full = n - n % virtual_lanes;
    for (std::size_t c = 0; c < k; ++c) {
      const B lo(cand[c].lo), hi(cand[c].hi), s(cand[c].scale);
      D acc[2 * G];
      for (auto& a : acc)
        a = D(0.0);
      for (std::size_t i = 0; i < full; i += virtual_lanes) {
        for (std::size_t g = 0; g < G; ++g) {
          const B v = B::load_unaligned(x + i + g * W);
          const B t = xsimd::min(xsimd::max(v, lo), hi);
          const B d = xsimd::nearbyint(t / s) * s - v;
          const B d2 = d * d;
          acc[2 * g] += detail::widen_lo<Arch>(d2);
          acc[2 * g + 1] += detail::widen_hi<Arch>(d2);
        }
      }
      alignas(Arch::alignment()) double lanes[virtual_lanes];
      for (std::size_t a = 0; a < 2 * G; ++a)
        acc[a].store_aligned(lanes + a * DW);
      for (std::size_t i = full; i < n; ++i) {
        lanes[i - full] += static_cast<double>(mse_term(x[i], cand[c]));
      }
      double sum = 0.0;
      for (double l : lanes)
        sum += l;
      out[c] = sum;
    }
  }
}

}  // namespace ptq::kernels
