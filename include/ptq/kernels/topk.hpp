// One-pass selection of the k-th largest and the k-th smallest value (IFMR's percentile start
// values, docs/numerics.md, IFMR): a SIMD threshold filter in front of two bounded heaps. Not
// nth_element, not a sort: for 0.999999 of 16M floats (k = 17) nearly every batch is rejected by
// one compare. The result is a value of the input, so every correct method gives the same bits; the
// scalar reference is nth_element on a copy.
// Depends on: core.
#pragma once

#include <algorithm>
#include <cstddef>
#include <functional>
#include <vector>

#include "ptq/core/abi.hpp"
#include "ptq/kernels/simd_support.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {
namespace kernels {

/// k-th largest and k-th smallest (1-based) of the same range.
struct extremes_result {
  float kth_largest = 0.0f;
  float kth_smallest = 0.0f;
};

namespace detail {

/// The k-th largest and k-th smallest of v[0, n) by nth_element, reordering v. Requires
/// 1 <= k_large, k_small <= n.
[[nodiscard]] inline extremes_result select_extremes_in_place(float* v, std::size_t n,
                                                              std::size_t k_large,
                                                              std::size_t k_small) {
  extremes_result r;
  std::nth_element(v, v + (n - k_large), v + n);
  r.kth_largest = v[n - k_large];
  std::nth_element(v, v + (k_small - 1), v + n);
  r.kth_smallest = v[k_small - 1];
  return r;
}

/// Bounded heaps of the k largest (min-heap) and k smallest (max-heap) values seen so far.
struct extreme_heaps {
  std::size_t kl, ks;
  std::vector<float> large;      // min-heap: front is the smallest of the k largest
  std::vector<float> small;      // max-heap: front is the largest of the k smallest
  float thr_large = -HUGE_VALF;  // values <= thr_large cannot enter `large` (once full)
  float thr_small = HUGE_VALF;   // values >= thr_small cannot enter `small` (once full)

  extreme_heaps(std::size_t k_large, std::size_t k_small) : kl(k_large), ks(k_small) {
    large.reserve(kl);
    small.reserve(ks);
  }
  void push(float v) {
    push_large(v);
    push_small(v);
  }
  void push_large(float v) {
    if (large.size() < kl) {
      large.push_back(v);
      std::push_heap(large.begin(), large.end(), std::greater<>());
      if (large.size() == kl)
        thr_large = large.front();
    } else if (v > thr_large) {
      std::pop_heap(large.begin(), large.end(), std::greater<>());
      large.back() = v;
      std::push_heap(large.begin(), large.end(), std::greater<>());
      thr_large = large.front();
    }
  }
  void push_small(float v) {
    if (small.size() < ks) {
      small.push_back(v);
      std::push_heap(small.begin(), small.end());
      if (small.size() == ks)
        thr_small = small.front();
    } else if (v < thr_small) {
      std::pop_heap(small.begin(), small.end());
      small.back() = v;
      std::push_heap(small.begin(), small.end());
      thr_small = small.front();
    }
  }
  /// Adds the extremes another part of the data kept (its heaps: the same k's).
  void merge(const extreme_heaps& o) {
    for (const float v : o.large)
      push_large(v);
    for (const float v : o.small)
      push_small(v);
  }
  [[nodiscard]] bool full() const noexcept { return large.size() == kl && small.size() == ks; }
};

/// Whether the heaps cost more than nth_element on a copy (k a large fraction of n).
[[nodiscard]] inline bool extremes_by_sorting(std::size_t n, std::size_t k_large,
                                              std::size_t k_small) noexcept {
  return k_large > n / 64 + 64 || k_small > n / 64 + 64;
}

}  // namespace detail

/// Scalar reference. Requires 1 <= k_large, k_small <= n.
[[nodiscard]] inline extremes_result select_extremes_ref(const float* x, std::size_t n,
                                                         std::size_t k_large, std::size_t k_small) {
  std::vector<float> v(x, x + n);
  return detail::select_extremes_in_place(v.data(), n, k_large, k_small);
}

/// Scalar reference of collect_extremes_simd: every value into the heaps.
inline void collect_extremes_ref(const float* x, std::size_t n, detail::extreme_heaps& h) {
  for (std::size_t i = 0; i < n; ++i)
    h.push(x[i]);
}

/// Pushes into `h` every value of x[0, n) that can be among its extremes; SIMD compares skip
/// the batches with no value beyond both thresholds. The heaps then hold the extremes of
/// whatever they held and x, as collect_extremes_ref leaves them.
template <class Arch>
void collect_extremes_simd(const float* x, std::size_t n, detail::extreme_heaps& h) {
  using B = detail::fbatch<Arch>;
  constexpr std::size_t W = B::size;
  constexpr std::size_t U = 4 * W;
  std::size_t i = 0;
  // Until both heaps are full, every value is a candidate.
  for (; i < n && !h.full(); ++i)
    h.push(x[i]);
  for (; i + U <= n; i += U) {
    const B tl(h.thr_large), ts(h.thr_small);
    const B a = B::load_unaligned(x + i), b = B::load_unaligned(x + i + W),
            c = B::load_unaligned(x + i + 2 * W), d = B::load_unaligned(x + i + 3 * W);
    const auto hit =
        (a > tl) | (a < ts) | (b > tl) | (b < ts) | (c > tl) | (c < ts) | (d > tl) | (d < ts);
    if (xsimd::any(hit)) {
      for (std::size_t j = i; j < i + U; ++j) {
        if (x[j] > h.thr_large || x[j] < h.thr_small)
          h.push(x[j]);
      }
    }
  }
  for (; i < n; ++i)
    h.push(x[i]);
}

/// SIMD one-pass selection. Requires 1 <= k_large, k_small <= n. Falls back to nth_element on a
/// copy when k is a large fraction of n (the heaps would then cost more than the copy).
template <class Arch>
[[nodiscard]] extremes_result select_extremes_simd(const float* x, std::size_t n,
                                                   std::size_t k_large, std::size_t k_small) {
  if (detail::extremes_by_sorting(n, k_large, k_small))
    return select_extremes_ref(x, n, k_large, k_small);
  detail::extreme_heaps h(k_large, k_small);
  collect_extremes_simd<Arch>(x, n, h);
  return {h.large.front(), h.small.front()};
}

}  // namespace kernels
}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
