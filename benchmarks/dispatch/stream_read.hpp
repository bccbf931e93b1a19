// The baseline kernels of the benchmarks, templated on the arch like ptq's kernels so that each ISA
// translation unit instantiates its own symbol.
#pragma once

#include <xsimd/xsimd.hpp>

#include <cstddef>
#include <cstdint>

#include "ptq/kernels/histogram.hpp"

namespace ptq_bench {

/// A plain streaming read: xsimd loads into 4 independent accumulators (no dependency chain
/// limits it, so it runs at the memory or cache bandwidth of the buffer).
template <class Arch>
[[gnu::noinline]] float stream_read_simd(const float* x, std::size_t n) noexcept {
  using B = xsimd::batch<float, Arch>;
  constexpr std::size_t W = B::size;
  B a(0.0f), b(0.0f), c(0.0f), d(0.0f);
  std::size_t i = 0;
  for (; i + 4 * W <= n; i += 4 * W) {
    a += B::load_unaligned(x + i);
    b += B::load_unaligned(x + i + W);
    c += B::load_unaligned(x + i + 2 * W);
    d += B::load_unaligned(x + i + 3 * W);
  }
  float s = xsimd::hadd((a + b) + (c + d));
  for (; i < n; ++i)
    s += x[i];
  return s;
}

/// The baseline of a kernel that writes: the streaming read of x[0..n) with one plain store per
/// batch loaded into `out` (`narrow` false: n floats, as fake-quantization writes) or one per
/// four batches (`narrow` true: n bytes, as int8 quantization writes).
template <class Arch>
[[gnu::noinline]] void stream_copy_simd(const float* x, std::size_t n, float* out,
                                        bool narrow) noexcept {
  using B = xsimd::batch<float, Arch>;
  constexpr std::size_t W = B::size;
  std::size_t i = 0;
  if (narrow) {
    for (; i + 4 * W <= n; i += 4 * W) {
      const B s = (B::load_unaligned(x + i) + B::load_unaligned(x + i + W)) +
                  (B::load_unaligned(x + i + 2 * W) + B::load_unaligned(x + i + 3 * W));
      s.store_unaligned(out + i / 4);
    }
    return;
  }
  for (; i + W <= n; i += W)
    B::load_unaligned(x + i).store_unaligned(out + i);
  for (; i < n; ++i)
    out[i] = x[i];
}

/// The histogram kernel's first step alone (its ceiling): the bins of x[0..n) (n a multiple of
/// its block), each block's into idx[i % idx_len] as the kernel does into its block buffer.
template <class Arch>
[[gnu::noinline]] void bin_index_pass_simd(const float* x, std::size_t n, float lo, float hi,
                                           std::size_t bins, std::int32_t* idx,
                                           std::size_t idx_len) noexcept {
  constexpr std::size_t block = ptq::kernels::detail::histogram_block;
  const ptq::kernels::detail::bin_batch_consts<Arch> c(
      ptq::kernels::make_bin_geometry(lo, hi, bins), bins);
  for (std::size_t i = 0; i + block <= n; i += block)
    ptq::kernels::detail::bin_indices<Arch>(x + i, block, c, idx + i % idx_len);
}

/// The ceiling of a kernel that divides every value (fake-quantization's x / s, correctly
/// rounded as the reference's): x[i] / s into out[i] and nothing else.
template <class Arch>
[[gnu::noinline]] void divide_simd(const float* x, std::size_t n, float s, float* out) noexcept {
  using B = xsimd::batch<float, Arch>;
  constexpr std::size_t W = B::size;
  const B d(s);
  std::size_t i = 0;
  for (; i + W <= n; i += W)
    (B::load_unaligned(x + i) / d).store_unaligned(out + i);
  for (; i < n; ++i)
    out[i] = x[i] / s;
}

using stream_read_fn = float (*)(const float*, std::size_t) noexcept;
using stream_copy_fn = void (*)(const float*, std::size_t, float*, bool) noexcept;
using divide_fn = void (*)(const float*, std::size_t, float, float*) noexcept;
using bin_index_pass_fn = void (*)(const float*, std::size_t, float, float, std::size_t,
                                   std::int32_t*, std::size_t) noexcept;

/// The baselines of one arch.
struct stream_fns {
  stream_read_fn read = nullptr;
  stream_copy_fn copy = nullptr;
  bin_index_pass_fn bin_index_pass = nullptr;
  divide_fn divide = nullptr;
};

/// Functor for xsimd::dispatch: the baselines of the arch it is called with.
struct stream_read_factory {
  template <class Arch>
  stream_fns operator()(Arch) const noexcept;
};

template <class Arch>
stream_fns stream_read_factory::operator()(Arch) const noexcept {
  return {&stream_read_simd<Arch>, &stream_copy_simd<Arch>, &bin_index_pass_simd<Arch>,
          &divide_simd<Arch>};
}

}  // namespace ptq_bench
