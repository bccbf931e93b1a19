// Histogram of 16M floats into 4096 bins with the toolkit's float32 binning.
// Target: >= 1 G elements/s on one thread.
#include "bench_support.hpp"

static void BM_histogram_16M_4096(benchmark::State& state) {
  const auto& x = ptq_bench::normal_data();
  const auto& k = ptq_bench::kernels();
  const auto mm = k.minmax(x.data(), x.size());
  std::vector<std::int64_t> counts(4096);
  ptq_bench::run_vs_baseline(state, x.data(), x.size(), [&] {
    std::fill(counts.begin(), counts.end(), 0);
    k.histogram(x.data(), x.size(), mm.min, mm.max, 4096, counts.data());
    benchmark::DoNotOptimize(counts.data());
  });
}
BENCHMARK(BM_histogram_16M_4096)->UseManualTime()->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
