// Fused clip-round-MSE over a whole set of IFMR candidates (docs/numerics.md, IFMR).
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
// So the sums are in double except for runs of 16 float32 terms, which keeps the widening
// to double off the critical path of the SIMD loop.
//
// On arches with FMA the quotient t / s_k is computed as q0 = t·r, q1 = fma(fma(-q0, s, t), r, q0)
// with r = 1/s_k rounded: Markstein's theorem makes q1 the correctly rounded quotient, and only
// nearbyint(q1) is used, so the result is the reference's bit for bit (tested on every arch).
//
// The kernel handles one block; callers cut the data into cache-resident blocks, run all
// candidates over each block, and add the per-block sums in block order (see ifmr.hpp), which
// makes the result independent of the thread count.
// Depends on: core.
#pragma once

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstddef>
#include <type_traits>

#include "ptq/core/abi.hpp"
#include "ptq/kernels/minmax.hpp"
#include "ptq/kernels/simd_support.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {
namespace kernels {

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
/// losses (the toolkit itself sums everything in float32).
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

/// How a pass computes its terms: with the clip; without it (the chunks lie inside the clip
/// range); or without it and with the quotient t·RN(1/s) checked after the fact (see
/// mse_check_threshold).
enum class mse_mode { clip, no_clip, checked };

/// For the `checked` mode: a term below this bound proves that nearbyint(x·RN(1/s)) equals
/// nearbyint(RN(x / s)) for its element, so the cheap quotient gave the exact term. Proof: let
/// q = x/s, Q >= |q|, n the integer the cheap quotient rounds to and n' the reference's. If
/// n < n', then RN(x·RN(1/s)) <= n + 1/2 <= n' - 1/2 <= RN(q), and RN(q) <= q + 2^-24·Q, so
/// q - n >= 1/2 - 2^-24·Q (n > n' likewise). Only the reference's rounding of q enters. Then
/// |RN(n·s) - x| >= s·(1/2 - 2^-24·Q) - 2^-24·|n|·s >= s·(1/2 - 2^-23·(Q + 1)), and the float32
/// term (RN(n·s) - x)², with its two roundings, is at least s²·(1/2 - 2^-23·(Q + 1))²·(1 - 2^-24)³.
/// The bound below takes twice that δ and stays under the product. 0 when the mode does not pay
/// (for a large Q most chunks would fail the check and be redone) or is not safe to use.
[[nodiscard]] inline float mse_check_threshold(float scale, float absmax) noexcept {
  const auto s = static_cast<double>(scale);
  if (!(s >= 0x1p-60 && s <= 0x1p60))
    return 0.0f;
  const double q = static_cast<double>(absmax) / s * (1.0 + 0x1p-20) + 1.0;
  const double delta = 0x1p-22 * (q + 1.0);
  if (!(delta < 0x1p-11))
    return 0.0f;
  const double t = s * s * (0.5 - delta) * (0.5 - delta) * (1.0 - 0x1p-20);
  if (!(t < static_cast<double>(FLT_MAX)))
    return 0.0f;
  auto f = static_cast<float>(t);
  if (static_cast<double>(f) > t)
    f = std::nextafter(f, 0.0f);
  return f;
}

/// One candidate's constants, broadcast once per pass.
template <class Arch>
struct mse_consts {
  fbatch<Arch> lo, hi, s, r, bound;
  mse_consts(const mse_candidate& c, float check_bound) noexcept
      : lo(c.lo), hi(c.hi), s(c.scale), r(1.0f / c.scale), bound(check_bound) {}
};

/// The float32 squared errors of one batch; `Clip` false when the batch is known to lie in
/// [lo, hi] (clipping is then the identity).
template <class Arch, bool Clip>
[[nodiscard]] fbatch<Arch> mse_terms(const fbatch<Arch>& v, const mse_consts<Arch>& k) noexcept {
  fbatch<Arch> t = v;
  if constexpr (Clip)
    t = xsimd::min(xsimd::max(v, k.lo), k.hi);
  fbatch<Arch> q;
  if constexpr (has_fused_madd<Arch>) {
    const fbatch<Arch> q0 = t * k.r;
    q = fused_madd<Arch>(fused_nmadd<Arch>(q0, k.s, t), k.r, q0);  // == t / s, correctly rounded
  } else {
    q = t / k.s;
  }
  const fbatch<Arch> d = xsimd::nearbyint(q) * k.s - v;
  return d * d;
}

/// The `checked` term: the quotient as x·RN(1/s) (one multiply instead of three operations),
/// keeping the largest term in `top` for the check against mse_check_threshold.
template <class Arch>
[[nodiscard]] fbatch<Arch> mse_terms_checked(const fbatch<Arch>& v, const mse_consts<Arch>& k,
                                             fbatch<Arch>& top) noexcept {
  const fbatch<Arch> d = xsimd::nearbyint(v * k.r) * k.s - v;
  const fbatch<Arch> t = d * d;
  top = xsimd::max(top, t);
  return t;
}

/// The whole chunks x[0..full) for NC (1 or 2) candidates at once, adding each chunk's lane
/// partials into lanes[j·16 + l] for candidate j. Two candidates per load halve the loads and the
/// loop overhead per term; one lane group at a time keeps the double accumulators in registers.
template <class Arch, mse_mode Mode, std::size_t NC>
void mse_chunks(const float* x, std::size_t begin, std::size_t end, const mse_consts<Arch>& k0,
                const mse_consts<Arch>& k1, double* lanes) noexcept {
  static_assert(NC == 1 || NC == 2, "one or two candidates per pass");
  using B = fbatch<Arch>;
  using D = dbatch<Arch>;
  constexpr std::size_t W = B::size;
  constexpr std::size_t G = virtual_lanes / W;
  constexpr std::size_t DW = D::size;
  constexpr bool Clip = Mode == mse_mode::clip;
  double* l0 = lanes;
  double* l1 = lanes + (NC - 1) * virtual_lanes;
  for (std::size_t g = 0; g < G; ++g) {
    D a0 = D::load_aligned(l0 + 2 * g * DW), b0 = D::load_aligned(l0 + (2 * g + 1) * DW);
    D a1 = D::load_aligned(l1 + 2 * g * DW), b1 = D::load_aligned(l1 + (2 * g + 1) * DW);
    for (std::size_t cs = begin; cs < end; cs += mse_chunk) {
      const float* p = x + cs + g * W;
      B p0(0.0f), p1(0.0f);
      if constexpr (Mode == mse_mode::checked) {
        B top0(0.0f), top1(0.0f);
        B v = B::load_unaligned(p);
        p0 = mse_terms_checked<Arch>(v, k0, top0);
        if constexpr (NC == 2)
          p1 = mse_terms_checked<Arch>(v, k1, top1);
        for (std::size_t t = 1; t < mse_chunk_terms; ++t) {
          v = B::load_unaligned(p + t * virtual_lanes);
          p0 += mse_terms_checked<Arch>(v, k0, top0);
          if constexpr (NC == 2)
            p1 += mse_terms_checked<Arch>(v, k1, top1);
        }
        // Rare (about one chunk pass in 80 for 8 bits): a term too close to s²/4 to prove the cheap
        // quotient right; the chunk is redone with the exact one.
        if (xsimd::any((top0 >= k0.bound) | (top1 >= k1.bound))) {
          v = B::load_unaligned(p);
          p0 = mse_terms<Arch, false>(v, k0);
          if constexpr (NC == 2)
            p1 = mse_terms<Arch, false>(v, k1);
          for (std::size_t t = 1; t < mse_chunk_terms; ++t) {
            v = B::load_unaligned(p + t * virtual_lanes);
            p0 += mse_terms<Arch, false>(v, k0);
            if constexpr (NC == 2)
              p1 += mse_terms<Arch, false>(v, k1);
          }
        }
      } else {
        B v = B::load_unaligned(p);
        p0 = mse_terms<Arch, Clip>(v, k0);
        if constexpr (NC == 2)
          p1 = mse_terms<Arch, Clip>(v, k1);
        for (std::size_t t = 1; t < mse_chunk_terms; ++t) {
          v = B::load_unaligned(p + t * virtual_lanes);
          p0 += mse_terms<Arch, Clip>(v, k0);
          if constexpr (NC == 2)
            p1 += mse_terms<Arch, Clip>(v, k1);
        }
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
  const mse_consts<Arch> k(c, 0.0f);
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

/// Chunks whose own range the kernel records (64 chunks = 16384 elements, four of ifmr.hpp's
/// blocks); later chunks of a longer call go by the range of the whole call.
inline constexpr std::size_t mse_ranged_chunks = 64;

/// SIMD form of candidate_mse_ref, bit-identical to it.
template <class Arch>
void candidate_mse_simd(const float* x, std::size_t n, const mse_candidate* cand, std::size_t k,
                        double* out) noexcept {
  using B = detail::fbatch<Arch>;
  if constexpr (!detail::can_widen<Arch> || (virtual_lanes % B::size) != 0) {
    candidate_mse_ref(x, n, cand, k, out);
  } else {
    // Each chunk's range, once: a chunk inside both candidates' clip ranges skips the clip (for
    // a pair, the clip runs when either needs it; it is the identity for the other). Few
    // elements lie beyond a low clip max, so most chunks skip the clip even for candidates whose
    // clip range does not contain the whole block.
    const std::size_t full = n - n % mse_chunk;
    const std::size_t ranged = std::min(full / mse_chunk, mse_ranged_chunks);
    minmax_result chunk_range[mse_ranged_chunks];
    for (std::size_t c = 0; c < ranged; ++c)
      chunk_range[c] = minmax_simd<Arch>(x + c * mse_chunk, mse_chunk);
    const minmax_result rest = minmax_simd<Arch>(x + ranged * mse_chunk, n - ranged * mse_chunk);
    minmax_result range = rest;
    for (std::size_t c = 0; c < ranged; ++c) {
      range.min = std::min(range.min, chunk_range[c].min);
      range.max = std::max(range.max, chunk_range[c].max);
    }
    const auto range_of = [&](std::size_t chunk) {
      return chunk < ranged ? chunk_range[chunk] : rest;
    };
    const auto covers = [](const mse_candidate& c, const minmax_result& r) {
      return c.lo <= r.min && r.max <= c.hi;
    };
    const float absmax = std::max(std::fabs(range.min), std::fabs(range.max));
    for (std::size_t c = 0; c < k; c += 2) {
      const std::size_t nc = k - c < 2 ? 1 : 2;
      alignas(Arch::alignment()) double lanes[2 * virtual_lanes] = {};
      const mse_candidate& c0 = cand[c];
      const mse_candidate& c1 = cand[c + nc - 1];
      const auto covered = [&](const minmax_result& r) { return covers(c0, r) && covers(c1, r); };
      const float bound0 = detail::mse_check_threshold(c0.scale, absmax);
      const float bound1 = detail::mse_check_threshold(c1.scale, absmax);
      const detail::mse_consts<Arch> k0(c0, bound0), k1(c1, bound1);
      const bool checked = bound0 > 0.0f && bound1 > 0.0f;
      const auto run = [&](auto mode, std::size_t begin, std::size_t end) {
        if (nc == 2) {
          detail::mse_chunks<Arch, decltype(mode)::value, 2>(x, begin, end, k0, k1, lanes);
        } else {
          detail::mse_chunks<Arch, decltype(mode)::value, 1>(x, begin, end, k0, k1, lanes);
        }
      };
      using detail::mse_mode;
      // Runs of chunks that need the clip and runs that do not (one run when the whole block
      // is covered); each lane still adds its chunks in order.
      for (std::size_t begin = 0; begin < full;) {
        const bool clip = !covered(range_of(begin / mse_chunk));
        std::size_t end = begin + mse_chunk;
        while (end < full && !covered(range_of(end / mse_chunk)) == clip)
          end += mse_chunk;
        if (clip) {
          run(std::integral_constant<mse_mode, mse_mode::clip>{}, begin, end);
        } else if (checked) {
          run(std::integral_constant<mse_mode, mse_mode::checked>{}, begin, end);
        } else {
          run(std::integral_constant<mse_mode, mse_mode::no_clip>{}, begin, end);
        }
        begin = end;
      }
      for (std::size_t j = 0; j < nc; ++j) {
        double* l = lanes + j * virtual_lanes;
        if (full < n) {
          if (covers(cand[c + j], range)) {
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

}  // namespace kernels
}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
