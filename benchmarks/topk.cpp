// IFMR's percentile start values: the 0.999999 percentile of 16M floats from both ends (k = 17)
// by the one-pass top-k, against a streaming read; nth_element for comparison.
// Target: >= 80 % of the baseline.
#include <algorithm>

#include "bench_support.hpp"
#include "ptq/algorithms/activations/ifmr.hpp"

static void BM_topk_both_ends_16M(benchmark::State& state) {
  const auto& x = ptq_bench::normal_data();
  const auto& k = ptq_bench::kernels();
  const std::size_t kk = ptq::detail::ifmr_percentile_rank(0.999999, x.size());
  ptq_bench::run_vs_baseline(state, x.data(), x.size(), [&] {
    benchmark::DoNotOptimize(k.select_extremes(x.data(), x.size(), kk, kk));
  });
  state.counters["k"] = static_cast<double>(kk);
}
BENCHMARK(BM_topk_both_ends_16M)->UseManualTime()->Unit(benchmark::kMillisecond);

static void BM_nth_element_both_ends_16M(benchmark::State& state) {
  const auto& x = ptq_bench::normal_data();
  std::vector<float> copy(x.size());
  const std::size_t kk = ptq::detail::ifmr_percentile_rank(0.999999, x.size());
  ptq_bench::run_vs_baseline(state, x.data(), x.size(), [&] {
    std::copy(x.begin(), x.end(), copy.begin());
    std::nth_element(copy.begin(), copy.end() - static_cast<long>(kk), copy.end());
    std::nth_element(copy.begin(), copy.begin() + static_cast<long>(kk - 1), copy.end());
    benchmark::DoNotOptimize(copy.data());
  });
}
BENCHMARK(BM_nth_element_both_ends_16M)->UseManualTime()->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
