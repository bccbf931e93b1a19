// AdaRound end to end (docs/ada.md): `ada_round` for 1000 iterations (minibatches of 32) on the
// layers of ada_shapes.hpp (a Linear 512->512 with 1024 samples, a Conv2d 64->64 3x3, a
// depthwise Conv2d and a ConvTranspose2d with 256 samples each), one thread and two. Reported:
// AdaRound iterations per second and the GFLOP/s of the layer arithmetic (forward plus weight
// gradient per iteration, over the whole run time, so the element-wise passes and the minibatch
// gathers count against it), beside the machine's peak measured in the same run (a plain
// multiply-add loop of the same arch, benchmarks/dispatch). benchmarks/ada_torch.py runs the
// same iterations in PyTorch beside it. PTQ_BENCH_SMOKE=1 (the ctest smoke run) does 5
// iterations; PTQ_BENCH_ADA_ITERATIONS=N does N.
#include <benchmark/benchmark.h>

#include <cstddef>
#include <cstdlib>
#include <random>
#include <vector>

#include "ada_shapes.hpp"
#include "dispatch/dispatch.hpp"
#include "ptq/algorithms/weights/ada.hpp"

namespace {

unsigned iterations() {
  const char* smoke = std::getenv("PTQ_BENCH_SMOKE");
  if (smoke && *smoke == '1')
    return 5U;
  const char* n = std::getenv("PTQ_BENCH_ADA_ITERATIONS");
  const long v = n ? std::strtol(n, nullptr, 10) : 0;
  return v > 0 && v <= 1000000 ? static_cast<unsigned>(v) : 1000U;
}

void run_ada(benchmark::State& state, const ptq::layer_geometry& g, std::size_t samples) {
  const unsigned threads = static_cast<unsigned>(state.range(0));
  const auto& k = ptq_bench::kernels();
  ptq::ada_problem p;
  p.name = "bench";
  p.geometry = g;
  const auto w = ptq_bench::normal_floats(ptq::weight_size(g), 1, 0.05f);
  const auto b = ptq_bench::normal_floats(g.out_channels, 2, 0.1f);
  const auto x = ptq_bench::normal_floats(samples * ptq::input_size(g), 3, 1.0f);
  p.weight = w.data();
  p.bias = b.data();
  p.input = x.data();
  p.samples = samples;
  p.activation.kind = ptq::activation_kind::relu;
  const auto target = ptq::ada_float_target(p, k, threads).value();
  p.target = target.data();
  ptq::ada_settings s;
  s.num_iteration = iterations();
  s.threads = threads;
  s.channel_wise = g.type != ptq::layer_type::linear;
  const double peak = ptq_bench::madd_peak_gflops();
  for (auto _ : state) {
    auto r = ptq::ada_round(p, s, k);
    benchmark::DoNotOptimize(r.ok());
  }
  // Multiply-adds of one forward on the minibatch; the weight gradient has as many. A
  // ConvTranspose2d multiplies each input position by its [Cout/g, k, k] slice.
  const double kk = static_cast<double>(g.kernel_h * g.kernel_w);
  const bool transposed = g.type == ptq::layer_type::conv_transpose2d;
  const double pos = transposed ? static_cast<double>(g.in_h * g.in_w)
                                : static_cast<double>(ptq::output_h(g) * ptq::output_w(g));
  const double madds = static_cast<double>(s.batch_size) * static_cast<double>(g.out_channels) *
                       static_cast<double>(g.in_channels / g.groups) * kk * pos;
  const double its = static_cast<double>(state.iterations()) * s.num_iteration;
  state.counters["ada_iterations_per_s"] = benchmark::Counter(its, benchmark::Counter::kIsRate);
  state.counters["GFLOPs"] =
      benchmark::Counter(its * 4.0 * madds * 1e-9, benchmark::Counter::kIsRate);
  state.counters["peak_GFLOPs"] = peak * threads;
  state.SetLabel(std::string(k.arch_name) + ", " + std::to_string(s.num_iteration) + " iterations");
}

}  // namespace

static void BM_ada_linear512_1024_samples(benchmark::State& state) {
  run_ada(state, ptq_bench::linear_512(), 1024);
}
BENCHMARK(BM_ada_linear512_1024_samples)
    ->Arg(1)
    ->Arg(2)
    ->Iterations(1)
    ->UseRealTime()
    ->Unit(benchmark::kSecond);

static void BM_ada_conv64_3x3_16x16_256_samples(benchmark::State& state) {
  run_ada(state, ptq_bench::conv_64_3x3_16(), 256);
}
BENCHMARK(BM_ada_conv64_3x3_16x16_256_samples)
    ->Arg(1)
    ->Arg(2)
    ->Iterations(1)
    ->UseRealTime()
    ->Unit(benchmark::kSecond);

static void BM_ada_depthwise128_3x3_32x32_256_samples(benchmark::State& state) {
  run_ada(state, ptq_bench::depthwise_128_3x3_32(), 256);
}
BENCHMARK(BM_ada_depthwise128_3x3_32x32_256_samples)
    ->Arg(1)
    ->Arg(2)
    ->Iterations(1)
    ->UseRealTime()
    ->Unit(benchmark::kSecond);

static void BM_ada_convtranspose64_32_4x4_s2_16x16_256_samples(benchmark::State& state) {
  run_ada(state, ptq_bench::conv_transpose_64_32_4x4_s2_16(), 256);
}
BENCHMARK(BM_ada_convtranspose64_32_4x4_s2_16x16_256_samples)
    ->Arg(1)
    ->Arg(2)
    ->Iterations(1)
    ->UseRealTime()
    ->Unit(benchmark::kSecond);

BENCHMARK_MAIN();
