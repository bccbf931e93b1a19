// Histogram of 16M floats into 4096 bins with the toolkit's float32 binning, and its two steps
// alone: the bin indices (SIMD, one block at a time) and the counting (one increment per value).
// Target: >= 2 G elements/s on one thread; the steps show what each arch's ceiling is.
#include <cstdint>

#include "bench_support.hpp"

namespace {
constexpr std::size_t bins = 4096;
constexpr std::size_t block = ptq::kernels::detail::histogram_block;
}  // namespace

static void BM_histogram_16M_4096(benchmark::State& state) {
  const auto& x = ptq_bench::normal_data();
  const auto& k = ptq_bench::kernels();
  const auto mm = k.minmax(x.data(), x.size());
  std::vector<std::int64_t> counts(bins);
  ptq_bench::run_vs_baseline(state, x.data(), x.size(), [&] {
    std::fill(counts.begin(), counts.end(), 0);
    k.histogram(x.data(), x.size(), mm.min, mm.max, bins, counts.data());
    benchmark::DoNotOptimize(counts.data());
  });
}
BENCHMARK(BM_histogram_16M_4096)->UseManualTime()->Unit(benchmark::kMillisecond);

// The first step alone: every block's indices into one block buffer, as the kernel computes them.
static void BM_histogram_step1_bin_indices_16M(benchmark::State& state) {
  const auto& x = ptq_bench::normal_data();
  const auto mm = ptq_bench::kernels().minmax(x.data(), x.size());
  std::vector<std::int32_t> idx(block);
  ptq_bench::run_vs_baseline(state, x.data(), x.size(), [&] {
    ptq_bench::bin_index_pass(x.data(), x.size(), mm.min, mm.max, bins, idx.data(), block);
    benchmark::DoNotOptimize(idx.data());
  });
}
BENCHMARK(BM_histogram_step1_bin_indices_16M)->UseManualTime()->Unit(benchmark::kMillisecond);

// The second step alone: the 16M indices, computed beforehand (64 MB, read as the kernel reads
// its 64 MB of floats), counted into the kernel's two 16-bit sub-histograms, flushed as often.
static void BM_histogram_step2_counting_16M(benchmark::State& state) {
  const auto& x = ptq_bench::normal_data();
  const auto mm = ptq_bench::kernels().minmax(x.data(), x.size());
  std::vector<std::int32_t> idx(x.size());
  ptq_bench::bin_index_pass(x.data(), x.size(), mm.min, mm.max, bins, idx.data(), idx.size());
  std::vector<std::uint16_t> sub(2 * (bins + 1));
  std::uint16_t* const h0 = sub.data() + 1;  // index -1: the values outside the range
  std::uint16_t* const h1 = h0 + bins + 1;
  std::vector<std::int64_t> counts(bins);
  constexpr std::size_t flush_every = ptq::kernels::detail::histogram_flush_every;
  ptq_bench::run_vs_baseline(state, x.data(), x.size(), [&] {
    for (std::size_t i = 0; i < idx.size(); i += flush_every) {
      const std::size_t len = std::min(flush_every, idx.size() - i);
      ptq::kernels::detail::count_bins(idx.data() + i, len, h0, h1);
      ptq::kernels::detail::flush_bins(h0, h1, bins, counts.data());
    }
    benchmark::DoNotOptimize(counts.data());
  });
}
BENCHMARK(BM_histogram_step2_counting_16M)->UseManualTime()->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
