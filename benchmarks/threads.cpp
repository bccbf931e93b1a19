// What two threads can gain on this machine: the multiply-add peak loop (madd_peak.hpp) and the
// streaming read (each thread over its own half of a 64 MB buffer), on 1 and 2 threads, wall
// time. The ratio /2 : /1 of these is the ceiling for the 2-thread figures of IFMR, HFMG and
// AdaRound (BM_ifmr_full_16M, BM_hfmg_observe_4x4M, BM_ada_*): on a machine whose two vCPUs
// share a core or its memory bandwidth, no kernel scales better than these loops.
#include <thread>
#include <vector>

#include "bench_support.hpp"

namespace {

/// Runs fn(t) on threads t = 0..n-1 at once and returns the wall seconds.
template <class Fn>
double on_threads(std::size_t n, Fn fn) {
  const double t0 = ptq_bench::now_seconds(true);
  std::vector<std::thread> pool;
  for (std::size_t t = 1; t < n; ++t)
    pool.emplace_back([&fn, t] { fn(t); });
  fn(0);
  for (auto& th : pool)
    th.join();
  return ptq_bench::now_seconds(true) - t0;
}

}  // namespace

static void BM_madd_peak_threads(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  constexpr std::size_t iters = 20'000'000;
  double flops = 0.0, best = 1e30;
  for (auto _ : state) {
    const double s = on_threads(n, [&](std::size_t t) {
      const double f = ptq_bench::run_madd_loop(iters);
      if (t == 0)
        flops = f * static_cast<double>(n);
    });
    best = std::min(best, s);
    state.SetIterationTime(s);
  }
  state.counters["GFLOPs"] = flops / best * 1e-9;
  state.SetLabel(ptq_bench::kernels().arch_name);
}
BENCHMARK(BM_madd_peak_threads)->Arg(1)->Arg(2)->UseManualTime()->Unit(benchmark::kMillisecond);

static void BM_stream_read_threads(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const auto& x = ptq_bench::normal_data();
  const std::size_t part = x.size() / n;
  double best = 1e30;
  for (auto _ : state) {
    const double s = on_threads(n, [&](std::size_t t) {
      benchmark::DoNotOptimize(ptq_bench::stream_read(x.data() + t * part, part));
    });
    best = std::min(best, s);
    state.SetIterationTime(s);
  }
  state.counters["Gelem_per_s"] = static_cast<double>(part * n) / best * 1e-9;
  state.SetLabel(ptq_bench::kernels().arch_name);
}
BENCHMARK(BM_stream_read_threads)->Arg(1)->Arg(2)->UseManualTime()->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
