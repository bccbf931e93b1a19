// Shared by the numeric benchmarks: test data, the streaming-read baseline measured in the same
// run over the same buffer, and counters that report each kernel as a fraction of it.
//
// The kernels measured are picked at run time (ptq_bench::kernels(), dispatch/), as in the ptq
// tool, and so is the baseline; every result is labelled with the arch that ran.
#pragma once

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <ctime>
#include <random>
#include <vector>

#include "dispatch/dispatch.hpp"
#include "ptq/kernels.hpp"

namespace ptq_bench {

inline constexpr std::size_t n16m = std::size_t{1} << 24;  // 16M floats = 64 MB

/// Normal data (deterministic), generated once per size.
inline const std::vector<float>& normal_data(std::size_t n = n16m) {
  static std::vector<float> v;
  if (v.size() != n) {
    v.resize(n);
    std::mt19937 rng(12345);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    for (auto& x : v)
      x = nd(rng);
  }
  return v;
}

/// Clock of the measurements: this thread's CPU time (robust when other processes share the
/// cores), or wall time for multi-threaded runs.
inline double now_seconds(bool wall) {
  if (wall) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

template <class F>
double best_seconds(F&& f, bool wall = false, int reps = 5) {
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const double t0 = now_seconds(wall);
    f();
    best = std::min(best, now_seconds(wall) - t0);
  }
  return best;
}

/// Seconds of the baseline over x[0..n) (best of 5).
inline double baseline_seconds(const float* x, std::size_t n, bool wall = false) {
  return best_seconds([&] { benchmark::DoNotOptimize(stream_read(x, n)); }, wall);
}

/// The output a kernel writes, for its baseline: `bytes` at `data` (none: the read baseline).
struct written {
  void* data = nullptr;
  std::size_t bytes = 0;
};

/// Runs `f` under manual timing and reports: elements/s, the baseline's elements/s over the same
/// buffer, and of_baseline = kernel rate / baseline rate (1.0 = at the machine's bandwidth). The
/// baseline is the streaming read of x, or for a kernel that writes `out`, that read with plain
/// stores of as many bytes into the same `out` (stream_copy). Times are the best iteration, in
/// this thread's CPU time unless `wall`.
template <class F>
void run_vs_baseline(benchmark::State& state, const float* x, std::size_t n, F&& f,
                     bool wall = false, written out = {}) {
  const double base = out.data == nullptr
                          ? baseline_seconds(x, n, wall)
                          : best_seconds([&] { stream_copy(x, n, out.data, out.bytes); }, wall);
  double best = 1e30;
  for (auto _ : state) {
    const double t0 = now_seconds(wall);
    f();
    const double s = now_seconds(wall) - t0;
    best = std::min(best, s);
    state.SetIterationTime(s);
  }
  const double elems = static_cast<double>(n);
  state.counters["Gelem_per_s"] = elems / best * 1e-9;
  state.counters["baseline_Gelem_per_s"] = elems / base * 1e-9;
  state.counters["of_baseline"] = base / best;
  state.SetLabel(kernels().arch_name);
}

}  // namespace ptq_bench
