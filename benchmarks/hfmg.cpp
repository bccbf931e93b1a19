// HFMG: observe 4 batches of 4M floats (histogram + merge), then finalize (the candidate
// search over 4096 bins). Targets: finalize <= 5 ms. The toolkit: 1.0 s for the whole workload,
// 0.42 s of it in the search (its own timings).
#include "ptq/algorithms/activations/hfmg.hpp"
#include "bench_support.hpp"

namespace {
const ptq::hfmg_observer& observed() {
  static ptq::hfmg_observer obs = [] {
    ptq::hfmg_observer o({4096, 8, true}, ptq_bench::kernels());
    const auto& x = ptq_bench::normal_data();
    const std::size_t q = x.size() / 4;
    for (std::size_t b = 0; b < 4; ++b)
      (void)o.observe(x.data() + b * q, q);
    return o;
  }();
  return obs;
}
}  // namespace

// The argument is the thread count of the histogram (times: this thread's CPU time for 1
// thread, wall time for 2; the baseline is the same buffer's streaming read, on one thread).
static void BM_hfmg_observe_4x4M(benchmark::State& state) {
  const auto& x = ptq_bench::normal_data();
  const std::size_t q = x.size() / 4;
  const auto threads = static_cast<unsigned>(state.range(0));
  ptq_bench::run_vs_baseline(
      state, x.data(), x.size(),
      [&] {
        ptq::hfmg_observer o({4096, 8, true, threads}, ptq_bench::kernels());
        for (std::size_t b = 0; b < 4; ++b)
          benchmark::DoNotOptimize(o.observe(x.data() + b * q, q));
      },
      threads > 1);
}
BENCHMARK(BM_hfmg_observe_4x4M)->Arg(1)->Arg(2)->UseManualTime()->Unit(benchmark::kMillisecond);

// finalize() == hfmg_run on the merged histogram; the argument is the thread count (times are
// this thread's CPU time for 1 thread, wall time for 2).
static void BM_hfmg_finalize_4096(benchmark::State& state) {
  const auto& obs = observed();
  const auto threads = static_cast<unsigned>(state.range(0));
  double best = 1e30;
  for (auto _ : state) {
    const double t0 = ptq_bench::now_seconds(threads > 1);
    benchmark::DoNotOptimize(
        ptq::hfmg_run(obs.histogram(), 8, true, threads, ptq_bench::kernels()));
    const double s = ptq_bench::now_seconds(threads > 1) - t0;
    best = std::min(best, s);
    state.SetIterationTime(s);
  }
  state.counters["best_ms"] = best * 1e3;
  state.counters["candidates"] =
      static_cast<double>(ptq::detail::hfmg_search_range(obs.histogram().counts).size());
  state.SetLabel(ptq_bench::kernels().arch_name);
}
BENCHMARK(BM_hfmg_finalize_4096)->Arg(1)->Arg(2)->UseManualTime()->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
