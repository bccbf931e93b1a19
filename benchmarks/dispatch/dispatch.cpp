// Runtime choice of the benchmarks' arch (baseline ISA; the AVX2 / AVX-512 code lives in
// kernels_avx2.cpp / kernels_avx512.cpp).
#include "dispatch.hpp"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include "madd_peak.hpp"
#include "stream_read.hpp"

PTQ_KERNELS_EXTERN_AVX2
PTQ_KERNELS_EXTERN_AVX512
extern template ptq_bench::stream_fns ptq_bench::stream_read_factory::operator()<
    xsimd::fma3<xsimd::avx2>>(xsimd::fma3<xsimd::avx2>) const noexcept;
extern template ptq_bench::stream_fns ptq_bench::stream_read_factory::operator()<xsimd::avx512f>(
    xsimd::avx512f) const noexcept;
extern template ptq_bench::madd_loop ptq_bench::madd_loop_factory::operator()<
    xsimd::fma3<xsimd::avx2>>(xsimd::fma3<xsimd::avx2>) const noexcept;
extern template ptq_bench::madd_loop ptq_bench::madd_loop_factory::operator()<xsimd::avx512f>(
    xsimd::avx512f) const noexcept;

namespace ptq_bench {

namespace {
/// f's result for the arch the run measures: the best this CPU has, or at most the one
/// PTQ_BENCH_ARCH names (sse2, avx2), so one machine measures every kernel set. A CPU without
/// the named arch falls back to the next one down; every figure is labelled with the arch ran.
template <class F>
auto for_bench_arch(F f) noexcept {
  const char* want = std::getenv("PTQ_BENCH_ARCH");
  if (want != nullptr && std::strcmp(want, "sse2") == 0)
    return xsimd::dispatch<xsimd::arch_list<xsimd::sse2>>(f)();
  if (want != nullptr && std::strcmp(want, "avx2") == 0)
    return xsimd::dispatch<xsimd::arch_list<xsimd::fma3<xsimd::avx2>, xsimd::sse2>>(f)();
  return xsimd::dispatch<ptq::kernels::x86_archs>(f)();
}
}  // namespace

const ptq::kernels::kernel_set& kernels() noexcept {
  static const ptq::kernels::kernel_set k = for_bench_arch(ptq::kernels::kernel_set_factory{});
  return k;
}

namespace {
const stream_fns& baselines() noexcept {
  static const stream_fns f = for_bench_arch(stream_read_factory{});
  return f;
}
}  // namespace

float stream_read(const float* x, std::size_t n) noexcept {
  return baselines().read(x, n);
}

void stream_copy(const float* x, std::size_t n, void* out, std::size_t out_bytes) noexcept {
  baselines().copy(x, n, static_cast<float*>(out), out_bytes < n * sizeof(float));
}

void bin_index_pass(const float* x, std::size_t n, float lo, float hi, std::size_t bins,
                    std::int32_t* idx, std::size_t idx_len) noexcept {
  baselines().bin_index_pass(x, n, lo, hi, bins, idx, idx_len);
}

void divide(const float* x, std::size_t n, float s, float* out) noexcept {
  baselines().divide(x, n, s, out);
}

namespace {
const madd_loop& peak_loop() {
  static const madd_loop l = for_bench_arch(madd_loop_factory{});
  return l;
}
double thread_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}
}  // namespace

double run_madd_loop(std::size_t iters) {
  benchmark::DoNotOptimize(peak_loop().run(iters, 0.999999f, 1e-3f));
  return 2.0 * 12.0 * static_cast<double>(peak_loop().lanes) * static_cast<double>(iters);
}

double madd_peak_gflops() {
  static const double peak = [] {
    constexpr std::size_t iters = 20'000'000;
    double best = 1e30, flops = 0.0;
    for (int r = 0; r < 5; ++r) {
      const double t0 = thread_seconds();
      flops = run_madd_loop(iters);
      best = std::min(best, thread_seconds() - t0);
    }
    return flops / best * 1e-9;
  }();
  return peak;
}

}  // namespace ptq_bench
