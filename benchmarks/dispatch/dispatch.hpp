// The kernels the benchmarks measure, picked at run time like the ptq tool does: xsimd::dispatch
// over avx512f / fma3<avx2> / sse2, with the AVX2 and AVX-512 sets compiled in their own
// translation units (kernels_avx2.cpp, kernels_avx512.cpp). The streaming-read baseline is
// dispatched the same way, so each figure and its baseline run on the same ISA, and so is the
// multiply-add peak loop the GEMM figures are compared with.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ptq/kernels/kernel_set.hpp"

namespace ptq_bench {

/// The best kernel set this CPU runs (chosen once).
[[nodiscard]] const ptq::kernels::kernel_set& kernels() noexcept;

/// One plain streaming read of x[0..n) with the arch of kernels() (the baseline).
float stream_read(const float* x, std::size_t n) noexcept;

/// The baseline of a kernel that writes `out_bytes` into `out` while reading x[0..n): that
/// read with plain stores of n floats (out_bytes = 4n) or of n bytes (out_bytes = n).
void stream_copy(const float* x, std::size_t n, void* out, std::size_t out_bytes) noexcept;

/// The histogram kernel's first step alone, the bins of x[0..n) into idx[i % idx_len] (n and
/// idx_len multiples of its block), with the arch of kernels().
void bin_index_pass(const float* x, std::size_t n, float lo, float hi, std::size_t bins,
                    std::int32_t* idx, std::size_t idx_len) noexcept;

/// x[i] / s into out[i] (out may be x), with the arch of kernels(): the divider's ceiling.
void divide(const float* x, std::size_t n, float s, float* out) noexcept;

/// The peak of one thread in GFLOP/s: madd_peak.hpp's loop with the arch of kernels(), best of
/// five runs of this thread's CPU time (measured once, on first use).
double madd_peak_gflops();

/// One run of that loop: `iters` rounds, returning its flop count.
double run_madd_loop(std::size_t iters);

}  // namespace ptq_bench
