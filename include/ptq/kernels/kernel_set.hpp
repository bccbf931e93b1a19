// A table of the kernels for one arch, so the algorithms pick an ISA once (at run time)
// rather than per call, and a helper for deterministic multithreading.
//
// Which set `default_kernels()` gives (docs/numerics.md, "Kernel sets"):
//   - linked with the compiled `ptq::kernels` library (what CMake's `ptq::ptq` does by default;
//     it defines PTQ_KERNELS_DISPATCHED=1): the best set this CPU runs, avx512f, avx2+fma or
//     sse2 on x86-64, picked once (`dispatched_kernels()`, defined in src/kernels/);
//   - headers only (a plain -I): the set of the arch the calling TU is compiled for.
// Every set gives the same results bit for bit.
//
// A program may also dispatch on its own, one translation unit per ISA:
//   // in foo_avx2.cpp, compiled with -mavx2 -mfma -ffp-contract=off:
//   PTQ_KERNELS_INSTANTIATE_AVX2
//   // everywhere else: PTQ_KERNELS_EXTERN_AVX2 (declares it extern), then
//   const ptq::kernels::kernel_set k =
//   ptq::kernels::dispatch_kernel_set<ptq::kernels::x86_archs>();
// Depends on: core.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <thread>
#include <type_traits>
#include <vector>

#include "ptq/core/abi.hpp"
#include "ptq/kernels/ada_update.hpp"
#include "ptq/kernels/depthwise.hpp"
#include "ptq/kernels/gemm.hpp"
#include "ptq/kernels/hfmg_loss.hpp"
#include "ptq/kernels/histogram.hpp"
#include "ptq/kernels/im2col.hpp"
#include "ptq/kernels/minmax.hpp"
#include "ptq/kernels/mse.hpp"
#include "ptq/kernels/quantize.hpp"
#include "ptq/kernels/thread_pool.hpp"
#include "ptq/kernels/topk.hpp"

#if !defined(PTQ_KERNELS_DISPATCHED)
#define PTQ_KERNELS_DISPATCHED 0
#endif

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {
namespace kernels {

/// Function pointers to every kernel of one arch (or to the scalar references).
struct kernel_set {
  const char* arch_name = "scalar";
  minmax_result (*minmax)(const float*, std::size_t) noexcept = nullptr;
  float (*absmax)(const float*, std::size_t) noexcept = nullptr;
  void (*histogram)(const float*, std::size_t, float, float, std::size_t, std::int64_t*) = nullptr;
  void (*candidate_mse)(const float*, std::size_t, const mse_candidate*, std::size_t,
                        double*) noexcept = nullptr;
  void (*fake_quant)(const float*, std::size_t, const quantizer&, float*) noexcept = nullptr;
  void (*quantize_i8)(const float*, std::size_t, const quantizer&, std::int8_t*) noexcept = nullptr;
  void (*quantize_i16)(const float*, std::size_t, const quantizer&,
                       std::int16_t*) noexcept = nullptr;
  extremes_result (*select_extremes)(const float*, std::size_t, std::size_t, std::size_t) = nullptr;
  void (*collect_extremes)(const float*, std::size_t, detail::extreme_heaps&) = nullptr;
  double (*hfmg_loss)(const std::int32_t*, const float*, std::size_t,
                      const hfmg_loss_params&) noexcept = nullptr;
  /// Single-precision GEMM (gemm.hpp); the reference set has the unfused reference.
  void (*gemm)(const gemm_problem&, float*) = nullptr;
  /// The zero-padded planes a GEMM reads windows from (im2col.hpp, windows.hpp); a copy, the
  /// same bits in every set.
  void (*pad_windows)(const window_geometry&, bool, const float*, float*) noexcept = nullptr;
  /// Depthwise Conv2d without im2col (depthwise.hpp): the sums of `gemm` over the im2col.
  void (*depthwise_forward)(const depthwise_problem&, const float*, const float*, const float*,
                            std::size_t, std::size_t, float*, float*) noexcept = nullptr;
  void (*depthwise_weight_grad)(const depthwise_problem&, const float*, const float*, std::size_t,
                                std::size_t, std::size_t, float*, float*) noexcept = nullptr;
  /// AdaRound's element-wise passes (ada_update.hpp).
  void (*ada_soft_weight)(const ada_arrays&, std::size_t, float*) noexcept = nullptr;
  double (*ada_step)(const ada_arrays&, std::size_t, const float*,
                     const ada_step_params&) noexcept = nullptr;
};

/// The scalar references as a kernel_set (the definition every SIMD set must equal).
[[nodiscard]] inline kernel_set reference_kernel_set() noexcept {
  kernel_set k;
  k.arch_name = "reference";
  k.minmax = &minmax_ref;
  k.absmax = &absmax_ref;
  k.histogram = &histogram_ref;
  k.candidate_mse = &candidate_mse_ref;
  k.fake_quant = &fake_quant_ref;
  k.quantize_i8 = &quantize_ref<std::int8_t>;
  k.quantize_i16 = &quantize_ref<std::int16_t>;
  k.select_extremes = &select_extremes_ref;
  k.collect_extremes = &collect_extremes_ref;
  k.hfmg_loss = &hfmg_loss_ref;
  k.gemm = &gemm_ref_unfused;
  k.pad_windows = &pad_windows_ref;
  k.depthwise_forward = &depthwise_forward_ref;
  k.depthwise_weight_grad = &depthwise_weight_grad_ref;
  k.ada_soft_weight = &ada_soft_weight_ref;
  k.ada_step = &ada_step_ref;
  return k;
}

/// The kernels of `Arch`. Instantiate it only in a TU compiled for Arch.
template <class Arch>
[[nodiscard]] kernel_set make_kernel_set() noexcept;

template <class Arch>
kernel_set make_kernel_set() noexcept {
  kernel_set k;
  k.arch_name = Arch::name();
  k.minmax = &minmax_simd<Arch>;
  k.absmax = &absmax_simd<Arch>;
  k.histogram = &histogram_simd<Arch>;
  k.candidate_mse = &candidate_mse_simd<Arch>;
  k.fake_quant = &fake_quant_simd<Arch>;
  k.quantize_i8 = &quantize_simd<Arch, std::int8_t>;
  k.quantize_i16 = &quantize_simd<Arch, std::int16_t>;
  k.select_extremes = &select_extremes_simd<Arch>;
  k.collect_extremes = &collect_extremes_simd<Arch>;
  k.hfmg_loss = &hfmg_loss_simd<Arch>;
  k.gemm = &gemm_simd<Arch>;
  k.pad_windows = &pad_windows_simd<Arch>;
  k.depthwise_forward = &depthwise_forward_arch<Arch>;
  k.depthwise_weight_grad = &depthwise_weight_grad_arch<Arch>;
  k.ada_soft_weight = &ada_soft_weight_simd<Arch>;
  k.ada_step = &ada_step_simd<Arch>;
  return k;
}

/// Functor for xsimd::dispatch: returns the kernel_set of the arch it is called with.
struct kernel_set_factory {
  template <class Arch>
  kernel_set operator()(Arch) const noexcept;
};

template <class Arch>
kernel_set kernel_set_factory::operator()(Arch) const noexcept {
  return make_kernel_set<Arch>();
}

/// The best kernel set this CPU runs, picked on the first call. Defined by the compiled
/// `ptq::kernels` library (src/kernels/dispatch.cpp): a program built from the headers alone
/// has no definition of it.
[[nodiscard]] const kernel_set& dispatched_kernels() noexcept;

/// The kernels every algorithm uses when none are given: `dispatched_kernels()` in a program
/// linked with `ptq::kernels` (PTQ_KERNELS_DISPATCHED=1), otherwise those of the arch this TU
/// is compiled for (xsimd::default_arch).
///
/// A template, not an inline function: an inline `default_kernels()` built on
/// `xsimd::default_arch` would be defined differently by a TU compiled with -mavx2 and one
/// compiled for the baseline (an ODR violation), and the linker would keep one of the two for
/// both, so the baseline TU could get AVX2 kernels on a CPU without AVX2. As a template, each TU
/// instantiates `default_kernels<its arch, dispatched>`, a different function per arch and
/// mode with one definition each; a call without arguments still reads `default_kernels()`.
/// Per-ISA TUs should still only instantiate the kernel templates (kernel_set_factory) and
/// leave the rest of ptq to the baseline TUs.
template <class Arch = xsimd::default_arch, bool Dispatched = (PTQ_KERNELS_DISPATCHED != 0)>
[[nodiscard]] const kernel_set& default_kernels() noexcept {
  if constexpr (Dispatched) {
    return dispatched_kernels();
  } else {
    static const kernel_set k = make_kernel_set<Arch>();
    return k;
  }
}

/// The x86 arches a runtime-dispatching binary provides, best first.
using x86_archs = xsimd::arch_list<xsimd::avx512f, xsimd::fma3<xsimd::avx2>, xsimd::sse2>;

/// Picks the best kernel_set of ArchList that this CPU supports. Every arch of the list must be
/// explicitly instantiated in a TU compiled for it (and declared extern where this is called).
template <class ArchList>
[[nodiscard]] kernel_set dispatch_kernel_set() noexcept {
  return xsimd::dispatch<ArchList>(kernel_set_factory{})();
}

/// Runs fn(block) for block in [0, nblocks) on up to `threads` threads (0 = hardware
/// concurrency), on the process's persistent pool (thread_pool.hpp). Blocks are independent and
/// statically assigned (thread t runs blocks t, t + nt, ...); callers combine per-block results
/// in block order, so the outcome does not depend on the thread count.
template <class Fn>
void parallel_blocks(std::size_t nblocks, unsigned threads, Fn&& fn) {
  if (threads == 0)
    threads = std::thread::hardware_concurrency();
  if (threads <= 1 || nblocks <= 1) {
    for (std::size_t b = 0; b < nblocks; ++b)
      fn(b);
    return;
  }
  struct shares {
    std::remove_reference_t<Fn>* fn;
    std::size_t nt;
    std::size_t nblocks;
  } work{&fn, std::min<std::size_t>(threads, nblocks), nblocks};
  detail::thread_pool::instance().run(
      work.nt,
      [](void* context, std::size_t t) {
        const auto& w = *static_cast<const shares*>(context);
        for (std::size_t b = t; b < w.nblocks; b += w.nt)
          (*w.fn)(b);
      },
      &work);
}

/// Elements per block of parallel_histogram and parallel_minmax, and the least share of
/// parallel_select_extremes: large enough that a block outweighs handing it to a thread.
inline constexpr std::size_t parallel_block = std::size_t{1} << 20;

/// k.histogram of x[0, n) on up to `threads` threads (0 = hardware concurrency): thread t counts
/// the blocks t, t + nt, ... of parallel_block elements into counts of its own, which
/// are then added into `counts`. Each element's bin does not depend on its block and the counts
/// are integers, so `counts` gets the same values for every thread count.
inline void parallel_histogram(const kernel_set& k, const float* x, std::size_t n, float lo,
                               float hi, std::size_t bins, std::int64_t* counts, unsigned threads) {
  if (threads == 0)
    threads = std::thread::hardware_concurrency();
  const std::size_t nblocks = (n + parallel_block - 1) / parallel_block;
  const std::size_t nt = std::min<std::size_t>(threads, nblocks);
  if (nt <= 1) {
    k.histogram(x, n, lo, hi, bins, counts);
    return;
  }
  std::vector<std::int64_t> part(nt * bins, 0);
  parallel_blocks(nt, static_cast<unsigned>(nt), [&](std::size_t t) {
    for (std::size_t b = t; b < nblocks; b += nt) {
      const std::size_t at = b * parallel_block;
      k.histogram(x + at, std::min(parallel_block, n - at), lo, hi, bins, part.data() + t * bins);
    }
  });
  for (std::size_t t = 0; t < nt; ++t) {
    for (std::size_t i = 0; i < bins; ++i)
      counts[i] += part[t * bins + i];
  }
}

/// The minmax of n values from the minmax of each of their blocks of `block` values, in block
/// order: the first bad index is the first block's that has one, min and max are those of all
/// blocks. The same result as one minmax over the n values.
[[nodiscard]] inline minmax_result combine_minmax_blocks(const std::vector<minmax_result>& part,
                                                         std::size_t n, std::size_t block) {
  minmax_result r;
  r.first_bad = n;
  for (std::size_t b = 0; b < part.size(); ++b) {
    const std::size_t at = b * block;
    if (part[b].first_bad != std::min(block, n - at)) {
      r.first_bad = at + part[b].first_bad;
      return r;
    }
    r.min = part[b].min < r.min ? part[b].min : r.min;
    r.max = part[b].max > r.max ? part[b].max : r.max;
  }
  return r;
}

/// k.minmax of x[0, n) on up to `threads` threads (0 = hardware concurrency), over blocks of
/// parallel_block elements (thread t takes blocks t, t + nt, ...) combined in block
/// order: the first bad index is the first block's that has one, min and max are those of all
/// blocks, so the result is k.minmax's for every thread count.
[[nodiscard]] inline minmax_result parallel_minmax(const kernel_set& k, const float* x,
                                                   std::size_t n, unsigned threads) {
  if (threads == 0)
    threads = std::thread::hardware_concurrency();
  const std::size_t nblocks = (n + parallel_block - 1) / parallel_block;
  if (threads <= 1 || nblocks <= 1)
    return k.minmax(x, n);
  std::vector<minmax_result> part(nblocks);
  parallel_blocks(nblocks, threads, [&](std::size_t b) {
    const std::size_t at = b * parallel_block;
    part[b] = k.minmax(x + at, std::min(parallel_block, n - at));
  });
  return combine_minmax_blocks(part, n, parallel_block);
}

/// parallel_minmax bound to a kernel set and a thread count: what checked_minmax calls.
struct threaded_minmax {
  const kernel_set& k;
  unsigned threads = 1;
  [[nodiscard]] minmax_result operator()(const float* x, std::size_t n) const {
    return parallel_minmax(k, x, n, threads);
  }
};

namespace detail {

/// Threads of a parallel selection over n values on up to `threads` (0 = hardware
/// concurrency): no more than one per parallel_block values, at least one.
[[nodiscard]] inline std::size_t extremes_threads(std::size_t n, unsigned threads) {
  if (threads == 0)
    threads = std::thread::hardware_concurrency();
  return std::min<std::size_t>(threads, std::max<std::size_t>(1, n / parallel_block));
}

/// The k-th largest and smallest of n values cut into nt contiguous parts: thread t collects
/// part t, values [t * per, ...), into heaps of its own by collect(at, count, heaps), and the
/// heaps are merged in part order. The k-th largest and smallest are values of the whole
/// multiset, so the result does not depend on nt.
template <class Collect>
[[nodiscard]] extremes_result extremes_by_parts(std::size_t n, std::size_t nt, std::size_t k_large,
                                                std::size_t k_small, const Collect& collect) {
  std::vector<extreme_heaps> part(nt, extreme_heaps(k_large, k_small));
  const std::size_t per = (n + nt - 1) / nt;
  parallel_blocks(nt, static_cast<unsigned>(nt), [&](std::size_t t) {
    const std::size_t at = std::min(n, t * per);
    collect(at, std::min(per, n - at), part[t]);
  });
  for (std::size_t t = 1; t < nt; ++t)
    part[0].merge(part[t]);
  return {part[0].large.front(), part[0].small.front()};
}

}  // namespace detail

/// k.select_extremes of x[0, n) on up to `threads` threads (0 = hardware concurrency), one
/// contiguous part per thread (detail::extremes_by_parts): the same result for every thread
/// count. Requires 1 <= k_large, k_small <= n.
[[nodiscard]] inline extremes_result parallel_select_extremes(const kernel_set& k, const float* x,
                                                              std::size_t n, std::size_t k_large,
                                                              std::size_t k_small,
                                                              unsigned threads) {
  const std::size_t nt = detail::extremes_threads(n, threads);
  if (nt <= 1 || detail::extremes_by_sorting(n, k_large, k_small))
    return k.select_extremes(x, n, k_large, k_small);
  return detail::extremes_by_parts(n, nt, k_large, k_small,
                                   [&](std::size_t at, std::size_t m, detail::extreme_heaps& h) {
                                     k.collect_extremes(x + at, m, h);
                                   });
}

}  // namespace kernels
}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq

/// Declares the AVX2 / AVX-512 kernel sets extern (defined in *_avx2.cpp / *_avx512.cpp TUs).
#define PTQ_KERNELS_EXTERN_AVX2                                                                    \
  extern template ptq::kernels::kernel_set                                                         \
  ptq::kernels::kernel_set_factory::operator()<xsimd::fma3<xsimd::avx2>>(xsimd::fma3<xsimd::avx2>) \
      const noexcept;
#define PTQ_KERNELS_EXTERN_AVX512          \
  extern template ptq::kernels::kernel_set \
  ptq::kernels::kernel_set_factory::operator()<xsimd::avx512f>(xsimd::avx512f) const noexcept;
#define PTQ_KERNELS_INSTANTIATE_AVX2                                                               \
  template ptq::kernels::kernel_set                                                                \
  ptq::kernels::kernel_set_factory::operator()<xsimd::fma3<xsimd::avx2>>(xsimd::fma3<xsimd::avx2>) \
      const noexcept;
#define PTQ_KERNELS_INSTANTIATE_AVX512                                                            \
  template ptq::kernels::kernel_set ptq::kernels::kernel_set_factory::operator()<xsimd::avx512f>( \
      xsimd::avx512f) const noexcept;
