// Per-tensor min/max (+ NaN/Inf detection) and absmax over 16M floats, against a streaming read
// of the same buffer. Target: min/max >= 90 % of the baseline.
#include "bench_support.hpp"

static void BM_minmax_16M(benchmark::State& state) {
  const auto& x = ptq_bench::normal_data();
  const auto& k = ptq_bench::kernels();
  ptq_bench::run_vs_baseline(state, x.data(), x.size(),
                             [&] { benchmark::DoNotOptimize(k.minmax(x.data(), x.size())); });
}
BENCHMARK(BM_minmax_16M)->UseManualTime()->Unit(benchmark::kMillisecond);

static void BM_absmax_16M(benchmark::State& state) {
  const auto& x = ptq_bench::normal_data();
  const auto& k = ptq_bench::kernels();
  ptq_bench::run_vs_baseline(state, x.data(), x.size(),
                             [&] { benchmark::DoNotOptimize(k.absmax(x.data(), x.size())); });
}
BENCHMARK(BM_absmax_16M)->UseManualTime()->Unit(benchmark::kMillisecond);

static void BM_minmax_scalar_reference_16M(benchmark::State& state) {
  const auto& x = ptq_bench::normal_data();
  ptq_bench::run_vs_baseline(state, x.data(), x.size(), [&] {
    benchmark::DoNotOptimize(ptq::kernels::minmax_ref(x.data(), x.size()));
  });
  state.SetLabel("scalar reference");
}
BENCHMARK(BM_minmax_scalar_reference_16M)->UseManualTime()->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
