// Fused clip-round-MSE over a whole set of IFMR candidates (spec §5.5, §10.3).
//
// For candidate k with clip range [lo_k, hi_k] and scale s_k, the per-element term is the
// toolkit's float32 value
//     t = min(max(x, lo_k), hi_k);  d = nearbyint(t / s_k) * s_k - x;  term = d * d
// and the kernel returns, for every candidate, the sum of the terms of x[0..n). The summation
// order is part of the definition, so every arch gives the same bits as the scalar reference:
//   * element i belongs to lane i % 16 (`virtual_lanes`) and to chunk i / 256 (`mse_chunk`);
//   * within a chunk each lane sums its (at most 16) terms in float32, in element order;
//   * each chunk's lane partial is added to the lane's double accumulator, chunk by chunk;
//   * the 16 lane accumulators are added in order 0..15.
// So the sums are in double (§10.3) except for runs of 16 float32 terms, which keeps the widening
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

/// Terms a lane sums in float32 before widening to double, and the elements of such a chunk.
/// 16 keeps the widening (two conversions and two double adds per 8 lanes) off the hot path; a
/// float32 run of 16 positive terms is within 16 ulp, far below the gaps between candidates'
/// losses (the toolkit itself sums everything in float32, §10.3).
inline constexpr std::size_t mse_chunk_terms = 16;
inline constexpr std::size_t mse_chunk = mse_chunk_terms * virtual_lanes;

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

/// One candidate's constants, broadcast once per pass.
template <class Arch>
struct mse_consts {
  fbatch<Arch> lo, hi, s, r;
  explicit mse_consts(const mse_candidate& c) noexcept
      : lo(c.lo), hi(c.hi), s(c.scale), r(1.0f / c.scale) {}
};

/// The float32 squared errors of one batch; `Clip` false when the batch is known to lie in
/// [lo, hi] (clipping is then the identity).
template <class Arch, bool Clip>
[[nodiscard]] fbatch<Arch> mse_terms(const fbatch<Arch>& v, const mse_consts<Arch>& k) noexcept {
  fbatch<Arch> t = v;
  if constexpr (Clip)
    t = xsimd::min(xsimd::max(v, k.lo), k.hi);
  fbatch<Arch> q;
  if constexpr (has_fma<Arch>) {
    const fbatch<Arch> q0 = t * k.r;
    q = xsimd::fma(xsimd::fnma(q0, k.s, t), k.r, q0);  // == t / s, correctly rounded
  } else {
    q = t / k.s;
  }
  const fbatch<Arch> d = xsimd::nearbyint(q) * k.s - v;
  return d * d;
}

/// The whole chunks x[0..full) for NC (1 or 2) candidates at once, adding each chunk's lane
/// partials into lanes[j·16 + l] for candidate j. Two candidates per load halve the loads and the
/// loop overhead per term; one lane group at a time keeps the double accumulators in registers.
template <class Arch, bool Clip, std::size_t NC>
void mse_chunks(const float* x, std::size_t full, const mse_candidate* cand,
                double* lanes) noexcept {
  static_assert(NC == 1 || NC == 2, "one or two candidates per pass");
  using B = fbatch<Arch>;
  using D = dbatch<Arch>;
  constexpr std::size_t W = B::size;
  constexpr std::size_t G = virtual_lanes / W;
  constexpr std::size_t DW = D::size;
  const mse_consts<Arch> k0(cand[0]);
  const mse_consts<Arch> k1(cand[NC - 1]);
  double* l0 = lanes;
  double* l1 = lanes + (NC - 1) * virtual_lanes;
  for (std::size_t g = 0; g < G; ++g) {
    D a0 = D::load_aligned(l0 + 2 * g * DW), b0 = D::load_aligned(l0 + (2 * g + 1) * DW);
    D a1 = D::load_aligned(l1 + 2 * g * DW), b1 = D::load_aligned(l1 + (2 * g + 1) * DW);
    for (std::size_t cs = 0; cs < full; cs += mse_chunk) {
      const float* p = x + cs + g * W;
      B v = B::load_unaligned(p);
      B p0 = mse_terms<Arch, Clip>(v, k0);
      B p1 = NC == 2 ? mse_terms<Arch, Clip>(v, k1) : B(0.0f);
      for (std::size_t t = 1; t < mse_chunk_terms; ++t) {
        v = B::load_unaligned(p + t * virtual_lanes);
        p0 += mse_terms<Arch, Clip>(v, k0);
        if constexpr (NC == 2)
          p1 += mse_terms<Arch, Clip>(v, k1);
      }
      a0 += widen_lo<Arch>(p0);
      b0 += widen_hi<Arch>(p0);
      if constexpr (NC == 2) {
        a1 += widen_lo<Arch>(p1);
        b1 += widen_hi<Arch>(p1);
      }
    }
    a0.store_aligned(l0 + 2 * g * DW);
    b0.store_aligned(l0 + (2 * g + 1) * DW);
    if constexpr (NC == 2) {
      a1.store_aligned(l1 + 2 * g * DW);
      b1.store_aligned(l1 + (2 * g + 1) * DW);
    }
  }
}

/// The last, partial chunk x[full..n) of one candidate: whole lane groups in SIMD, the rest in
/// scalar code.
template <class Arch, bool Clip>
void mse_tail(const float* x, std::size_t full, std::size_t n, const mse_candidate& c,
              double* lanes) noexcept {
  using B = fbatch<Arch>;
  constexpr std::size_t W = B::size;
  constexpr std::size_t G = virtual_lanes / W;
  const mse_consts<Arch> k(c);
  alignas(Arch::alignment()) float part[virtual_lanes];
  const std::size_t groups_end = n - n % virtual_lanes;
  for (std::size_t g = 0; g < G; ++g) {
    B p(0.0f);
    for (std::size_t i = full; i < groups_end; i += virtual_lanes)
      p += mse_terms<Arch, Clip>(B::load_unaligned(x + i + g * W), k);
    p.store_aligned(part + g * W);
  }
  for (std::size_t i = groups_end; i < n; ++i)
    part[i - groups_end] += mse_term(x[i], c);
  for (std::size_t l = 0; l < virtual_lanes; ++l)
    lanes[l] += static_cast<double>(part[l]);
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
    // The block's range, once: candidates whose clip range contains it skip the clip (for a
    // pair, the clip runs when either needs it; it is the identity for the other).
    const minmax_result range = minmax_simd<Arch>(x, n);
    const auto covers = [&](const mse_candidate& c) {
      return c.lo <= range.min && range.max <= c.hi;
    };
    const std::size_t full = n - n % mse_chunk;
    for (std::size_t c = 0; c < k; c += 2) {
      const std::size_t nc = k - c < 2 ? 1 : 2;
      alignas(Arch::alignment()) double lanes[2 * virtual_lanes] = {};
      const bool clip = !covers(cand[c]) || !covers(cand[c + nc - 1]);
      if (nc == 2) {
        if (clip) {
          detail::mse_chunks<Arch, true, 2>(x, full, cand + c, lanes);
        } else {
          detail::mse_chunks<Arch, false, 2>(x, full, cand + c, lanes);
        }
      } else if (clip) {
        detail::mse_chunks<Arch, true, 1>(x, full, cand + c, lanes);
      } else {
        detail::mse_chunks<Arch, false, 1>(x, full, cand + c, lanes);
      }
      for (std::size_t j = 0; j < nc; ++j) {
        double* l = lanes + j * virtual_lanes;
        if (full < n) {
          if (covers(cand[c + j])) {
            detail::mse_tail<Arch, false>(x, full, n, cand[c + j], l);
          } else {
            detail::mse_tail<Arch, true>(x, full, n, cand[c + j], l);
          }
        }
        double sum = 0.0;
        for (std::size_t i = 0; i < virtual_lanes; ++i)
          sum += l[i];
        out[c + j] = sum;
      }
    }
  }
}

}  // namespace ptq::kernels
