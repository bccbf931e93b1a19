// IFMR on 16M floats with 61 candidates: the fused clip-round-MSE pass (all candidates per
// cache-resident block) and the whole search; reports element-candidate pairs per second.
// Target: >= 8 G pairs/s on one thread. The toolkit: 11.7 s (its own timing).
#include <chrono>

#include "bench_support.hpp"
#include "ptq/algorithms/activations/ifmr.hpp"

static void BM_ifmr_losses_16M_61(benchmark::State& state) {
  const auto& x = ptq_bench::normal_data();
  const auto threads = static_cast<unsigned>(state.range(0));
  ptq::ifmr_settings s;
  const auto cand = ptq::detail::ifmr_candidates(s, 4.5f, -4.5f).value();
  const auto segments = ptq::kernels::one_segment(x.data(), x.size());
  ptq_bench::run_vs_baseline(
      state, x.data(), x.size(),
      [&] {
        benchmark::DoNotOptimize(
            ptq::detail::ifmr_losses(segments, cand, threads, ptq_bench::kernels()));
      },
      threads > 1);
  state.counters["Gpairs_per_s"] =
      state.counters["Gelem_per_s"].value * static_cast<double>(cand.size());
  state.counters["candidates"] = static_cast<double>(cand.size());
}
BENCHMARK(BM_ifmr_losses_16M_61)->Arg(1)->Arg(2)->UseManualTime()->Unit(benchmark::kMillisecond);

static void BM_ifmr_full_16M(benchmark::State& state) {
  const auto& x = ptq_bench::normal_data();
  ptq::ifmr_settings s;
  s.threads = static_cast<unsigned>(state.range(0));
  ptq_bench::run_vs_baseline(
      state, x.data(), x.size(),
      [&] { benchmark::DoNotOptimize(ptq::ifmr_run(x.data(), x.size(), s, ptq_bench::kernels())); },
      s.threads > 1);
}
BENCHMARK(BM_ifmr_full_16M)->Arg(1)->Arg(2)->UseManualTime()->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
