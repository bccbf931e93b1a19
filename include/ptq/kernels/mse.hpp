// Fused clip-round-MSE over a whole set of IFMR candidates (spec §5.5, §10.3).
//
// For candidate k with clip range [lo_k, hi_k] and scale s_k, the per-element term is the
// toolkit's float32 value
//     t = min(max(x, lo_k), hi_k);  d = nearbyint(t / s_k) * s_k - x;  term = d * d
// and the kernel returns, for every candidate, the sum of the terms of x[0..n). The summation
// order is part of the definition, so every arch gives the same bits as the scalar reference:
//   * element i belongs to lane i % 16 (`virtual_lanes`) and to chunk i / 64 (`mse_chunk`);
//   * within a chunk each lane sums its (at most 4) terms in float32, in element order;
//   * each chunk's lane partial is added to the lane's double accumulator, chunk by chunk;
//   * the 16 lane accumulators are added in order 0..15.
// So the sums are in double (§10.3) except for runs of 4 float32 terms, which keeps the widening
// to double off the critical path of the SIMD loop.
//
// On arches with FMA the quotient t / s_k is computed as q0 = t·r, q1 = fma(fma(-q0, s, t), r, q0)
// with r = 1/s_k rounded: Markstein's theorem makes q1 the correctly rounded quotient, and only
// nearbyint(q1) is used, so the result is the reference's bit for bit (tested on every arch).
//
// The kernel handles one block; callers cut the data into cache-resident blocks, run all
// candidates over each block, and add the per-block sums in block order (see ifmr.hpp), which
// makes the result independent of the thread count.
#pragma once

#include <cmath>
#include <cstddef>
#include <type_traits>

#include "ptq/kernels/minmax.hpp"
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

/// Elements per float32 chunk of the summation (4 lane groups of 16).
inline constexpr std::size_t mse_chunk = 4 * virtual_lanes;

/// Scalar reference: out[k] = the sum defined above, for every candidate.
inline void candidate_mse_ref(const float* x, std::size_t n, const mse_candidate* cand,
                              std::size_t k, double* out) noexcept {
  for (std::size_t c = 0; c < k; ++c) {
    double lanes[virtual_lanes] = {};
    for (std::size_t cs = 0; cs < n; cs += mse_chunk) {
      float part[virtual_lanes] = {};
      const std::size_t ce = n - cs < mse_chunk ? n : cs + mse_chunk;
      for (std::size_t i = cs; i < ce; ++i)
        part[i % virtual_lanes] += mse_term(x[i], cand[c]);
      for (std::size_t l = 0; l < virtual_lanes; ++l)
        lanes[l] += static_cast<double>(part[l]);
    }
    double s = 0.0;
    for (double l : lanes)
      s += l;
    out[c] = s;
  }
}

namespace detail {

template <class Arch>
inline constexpr bool has_fma =
    is_avx512<Arch> || std::is_base_of<xsimd::fma3<xsimd::avx2>, Arch>::value ||
    std::is_base_of<xsimd::fma3<xsimd::avx>, Arch>::value;

/// The float32 squared errors of one batch; `Clip` false when the batch is known to lie in
/// [lo, hi] (clipping is then the identity).
template <class Arch, bool Clip>
[[nodiscard]] fbatch<Arch> mse_terms(const fbatch<Arch>& v, const fbatch<Arch>& lo,
                                     const fbatch<Arch>& hi, const fbatch<Arch>& s,
                                     const fbatch<Arch>& r) noexcept {
  fbatch<Arch> t = v;
  if constexpr (Clip)
    t = xsimd::min(xsimd::max(v, lo), hi);
  fbatch<Arch> q;
  if constexpr (has_fma<Arch>) {
    const fbatch<Arch> q0 = t * r;
    q = xsimd::fma(xsimd::fnma(q0, s, t), r, q0);  // == t / s, correctly rounded
  } else {
    (void)r;
    q = t / s;
  }
  const fbatch<Arch> d = xsimd::nearbyint(q) * s - v;
  return d * d;
}

/// One candidate over x[0..n): adds the chunk partials into acc (2·G double batches = 16 lanes).
template <class Arch, bool Clip>
void mse_candidate_pass(const float* x, std::size_t n, const mse_candidate& c,
                        double* lanes) noexcept {
  using B = fbatch<Arch>;
  using D = dbatch<Arch>;
  constexpr std::size_t W = B::size;
  constexpr std::size_t G = virtual_lanes / W;
  constexpr std::size_t DW = D::size;
  const B lo(c.lo), hi(c.hi), s(c.scale), r(1.0f / c.scale);
  D acc[2 * G];
  for (std::size_t a = 0; a < 2 * G; ++a)
    acc[a] = D::load_aligned(lanes + a * DW);
  const std::size_t full = n - n % mse_chunk;
  for (std::size_t cs = 0; cs < full; cs += mse_chunk) {
    for (std::size_t g = 0; g < G; ++g) {
      const float* p = x + cs + g * W;
      B part = mse_terms<Arch, Clip>(B::load_unaligned(p), lo, hi, s, r);
      part += mse_terms<Arch, Clip>(B::load_unaligned(p + virtual_lanes), lo, hi, s, r);
      part += mse_terms<Arch, Clip>(B::load_unaligned(p + 2 * virtual_lanes), lo, hi, s, r);
      part += mse_terms<Arch, Clip>(B::load_unaligned(p + 3 * virtual_lanes), lo, hi, s, r);
      acc[2 * g] += widen_lo<Arch>(part);
      acc[2 * g + 1] += widen_hi<Arch>(part);
    }
  }
  for (std::size_t a = 0; a < 2 * G; ++a)
    acc[a].store_aligned(lanes + a * DW);
  if (full < n) {  // last, partial chunk: whole lane groups in SIMD, the rest in scalar code
    alignas(Arch::alignment()) float part[virtual_lanes];
    const std::size_t groups_end = n - n % virtual_lanes;
    for (std::size_t g = 0; g < G; ++g) {
      B p(0.0f);
      for (std::size_t i = full; i < groups_end; i += virtual_lanes) {
        p += mse_terms<Arch, Clip>(B::load_unaligned(x + i + g * W), lo, hi, s, r);
      }
      p.store_aligned(part + g * W);
    }
    for (std::size_t i = groups_end; i < n; ++i)
      part[i - groups_end] += mse_term(x[i], c);
    for (std::size_t l = 0; l < virtual_lanes; ++l)
      lanes[l] += static_cast<double>(part[l]);
  }
}

}  // namespace detail

/// SIMD form of candidate_mse_ref, bit-identical to it.
template <class Arch>
void candidate_mse_simd(const float* x, std::size_t n, const mse_candidate* cand, std::size_t k,
                        double* out) noexcept {
  using B = detail::fbatch<Arch>;
  if constexpr (!detail::can_widen<Arch> || (virtual_lanes % B::size) != 0) {
    candidate_mse_ref(x, n, cand, k, out);
  } else {
    // The block's range, once: candidates whose clip range contains it skip the clip.
    const minmax_result range = minmax_simd<Arch>(x, n);
    const float bmin = range.min, bmax = range.max;
    for (std::size_t c = 0; c < k; ++c) {
      alignas(Arch::alignment()) double lanes[virtual_lanes] = {};
      if (cand[c].lo <= bmin && bmax <= cand[c].hi) {
        detail::mse_candidate_pass<Arch, false>(x, n, cand[c], lanes);
      } else {
        detail::mse_candidate_pass<Arch, true>(x, n, cand[c], lanes);
      }
      double sum = 0.0;
      for (double l : lanes)
        sum += l;
      out[c] = sum;
    }
  }
}

}  // namespace ptq::kernels
