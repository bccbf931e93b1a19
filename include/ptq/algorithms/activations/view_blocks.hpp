// The observers' kernels over tensor views (core/tensor_view.hpp) that are not float32 in
// place (float16, bfloat16, strided): each thread converts a block of conversion_block values
// into a buffer of its own and runs the kernel on it, so such a batch is never converted whole.
// Blocks are combined in block order, so results and errors are those of the kernels on the
// converted batch, for every thread count.
// Depends on: core and kernels.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "ptq/algorithms/layer/tensor.hpp"
#include "ptq/core/tensor_view.hpp"
#include "ptq/kernels/kernel_set.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {
namespace detail {

[[nodiscard]] inline std::size_t conversion_blocks(const tensor_view& v) noexcept {
  return (v.size() + conversion_block - 1) / conversion_block;
}

/// How many threads for_each_converted_block uses: up to `threads` (0 = hardware concurrency),
/// at most one per block, at least one.
[[nodiscard]] inline std::size_t conversion_threads(const tensor_view& v, unsigned threads) {
  if (threads == 0)
    threads = std::thread::hardware_concurrency();
  return std::max<std::size_t>(1, std::min<std::size_t>(threads, conversion_blocks(v)));
}

/// fn(t, b, x, n) for every block b of `v`, converted into thread t's buffer (x[0, n)); thread
/// t of conversion_threads(v, threads) takes blocks t, t + nt, ...
template <class Fn>
void for_each_converted_block(const tensor_view& v, unsigned threads, Fn&& fn) {
  const std::size_t nblocks = conversion_blocks(v);
  const std::size_t nt = conversion_threads(v, threads);
  std::vector<std::vector<float>> buffers(nt);
  kernels::parallel_blocks(nt, static_cast<unsigned>(nt), [&](std::size_t t) {
    std::vector<float>& buf = buffers[t];
    buf.resize(std::min(conversion_block, v.size()));
    for (std::size_t b = t; b < nblocks; b += nt) {
      const std::size_t at = b * conversion_block;
      const std::size_t n = std::min(conversion_block, v.size() - at);
      v.convert(at, n, buf.data());
      fn(t, b, buf.data(), n);
    }
  });
}

}  // namespace detail

/// All of `v` (C order) as float32 into out[0, v.size()), a block per task on up to `threads`
/// threads.
inline void convert_view(const tensor_view& v, float* out, unsigned threads) {
  kernels::parallel_blocks(detail::conversion_blocks(v), threads, [&](std::size_t b) {
    const std::size_t at = b * conversion_block;
    v.convert(at, std::min(conversion_block, v.size() - at), out + at);
  });
}

/// checked_minmax of the values of `v`, converted a block at a time on up to `threads`
/// threads: the same result, or the same error, as on the converted values.
[[nodiscard]] inline result<kernels::minmax_result> checked_minmax(std::string_view name,
                                                                   const tensor_view& v,
                                                                   const kernels::kernel_set& k,
                                                                   unsigned threads) {
  if (const float* x = v.in_place())
    return checked_minmax(name, x, v.size(), kernels::threaded_minmax{k, threads});
  if (v.size() == 0)
    return make_error(errc::empty_tensor, std::string(name) + ": empty tensor");
  std::vector<kernels::minmax_result> part(detail::conversion_blocks(v));
  detail::for_each_converted_block(
      v, threads,
      [&](std::size_t, std::size_t b, const float* x, std::size_t n) { part[b] = k.minmax(x, n); });
  const kernels::minmax_result r = kernels::combine_minmax_blocks(part, v.size(), conversion_block);
  if (r.first_bad != v.size())
    return non_finite_error(name, v.at(r.first_bad), r.first_bad);
  return r;
}

/// parallel_histogram of the values of `v` (added into counts[0, bins)), converted a block
/// at a time: every value's bin is the same and the counts are sums, so they are the same.
inline void view_histogram(const kernels::kernel_set& k, const tensor_view& v, float lo, float hi,
                           std::size_t bins, std::int64_t* counts, unsigned threads) {
  if (const float* x = v.in_place()) {
    kernels::parallel_histogram(k, x, v.size(), lo, hi, bins, counts, threads);
    return;
  }
  std::vector<std::vector<std::int64_t>> part(detail::conversion_threads(v, threads),
                                              std::vector<std::int64_t>(bins, 0));
  detail::for_each_converted_block(v, threads,
                                   [&](std::size_t t, std::size_t, const float* x, std::size_t n) {
                                     k.histogram(x, n, lo, hi, bins, part[t].data());
                                   });
  for (const auto& p : part) {
    for (std::size_t i = 0; i < bins; ++i)
      counts[i] += p[i];
  }
}

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
