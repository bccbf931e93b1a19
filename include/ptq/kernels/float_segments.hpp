// Float32 data that lies in several places, read as one sequence: the batches an IFMR observer
// keeps (some copied into its own buffer, some where a mapped file holds them). A value's
// position in the sequence does not depend on where it lies, so every fixed-size block of the
// sequence - and every result computed a block at a time - is the same as over one buffer with
// all the values in order.
// Depends on: core.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <iterator>
#include <vector>

#include "ptq/core/abi.hpp"
#include "ptq/kernels/kernel_set.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {
namespace kernels {

/// Runs of float32 values, in order. `starts` has one entry per run and a last one, the total.
struct float_segments {
  std::vector<const float*> data;
  std::vector<std::size_t> starts{0};

  /// Appends x[0, n) (nothing when n is 0).
  void add(const float* x, std::size_t n) {
    if (n == 0)
      return;
    data.push_back(x);
    starts.push_back(starts.back() + n);
  }
  /// Values in all.
  [[nodiscard]] std::size_t size() const noexcept { return starts.back(); }
  /// Runs.
  [[nodiscard]] std::size_t count() const noexcept { return data.size(); }
  /// Values in run s.
  [[nodiscard]] std::size_t length(std::size_t s) const noexcept {
    return starts[s + 1] - starts[s];
  }
  /// The run that holds value `at` (at < size()).
  [[nodiscard]] std::size_t run_of(std::size_t at) const noexcept {
    const auto it = std::upper_bound(starts.begin(), starts.end(), at);
    return static_cast<std::size_t>(std::distance(starts.begin(), it)) - 1;
  }
  /// Values [at, at + n) contiguous: where they lie when one run holds them all, else gathered
  /// into scratch[0, n). Requires at + n <= size().
  [[nodiscard]] const float* range(std::size_t at, std::size_t n, float* scratch) const noexcept {
    std::size_t s = run_of(at);
    if (at + n <= starts[s + 1])
      return data[s] + (at - starts[s]);
    for (std::size_t done = 0; done < n; ++s) {
      const std::size_t from = at + done - starts[s];
      const std::size_t take = std::min(n - done, length(s) - from);
      std::memcpy(scratch + done, data[s] + from, take * sizeof(float));
      done += take;
    }
    return scratch;
  }
  /// fn(pointer, count) for each part of runs that values [at, at + n) cover, in order.
  template <class Fn>
  void for_each_part(std::size_t at, std::size_t n, Fn&& fn) const {
    for (std::size_t s = n == 0 ? count() : run_of(at), done = 0; done < n; ++s) {
      const std::size_t from = at + done - starts[s];
      const std::size_t take = std::min(n - done, length(s) - from);
      fn(data[s] + from, take);
      done += take;
    }
  }
};

/// One run: x[0, n).
[[nodiscard]] inline float_segments one_segment(const float* x, std::size_t n) {
  float_segments s;
  s.add(x, n);
  return s;
}

/// parallel_select_extremes over the sequence `x`: the same result as over one buffer holding
/// it (the k-th largest and smallest are values of the multiset, whatever its parts).
[[nodiscard]] inline extremes_result parallel_select_extremes(const kernel_set& k,
                                                              const float_segments& x,
                                                              std::size_t k_large,
                                                              std::size_t k_small,
                                                              unsigned threads) {
  const std::size_t n = x.size();
  if (x.count() == 1)
    return parallel_select_extremes(k, x.data[0], n, k_large, k_small, threads);
  if (detail::extremes_by_sorting(n, k_large, k_small)) {
    std::vector<float> all(n);  // nth_element needs one buffer (k is a large part of n)
    x.for_each_part(0, n, [&, at = std::size_t{0}](const float* p, std::size_t m) mutable {
      std::memcpy(all.data() + at, p, m * sizeof(float));
      at += m;
    });
    return detail::select_extremes_in_place(all.data(), n, k_large, k_small);
  }
  return detail::extremes_by_parts(
      n, detail::extremes_threads(n, threads), k_large, k_small,
      [&](std::size_t at, std::size_t m, detail::extreme_heaps& h) {
        x.for_each_part(at, m, [&](const float* p, std::size_t c) { k.collect_extremes(p, c, h); });
      });
}

}  // namespace kernels
}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
