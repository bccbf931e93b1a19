// GEMM throughput on the AdaRound shapes (docs/ada.md, Speed; minibatches of 32 samples): Linear
// 512->512 and Conv2d 64->64 3x3 on 16x16 inputs, forward and weight gradient, through
// ptq::layer_compute (padded planes, copies and GEMM) and as bare GEMM calls. Each is
// reported beside the machine's peak measured in the same run: a plain multiply-add loop of the
// same arch (12 independent accumulator chains in registers, a fused multiply-add exactly when
// the GEMM uses one), so `of_peak` reads as the fraction of peak the GEMM reaches.
//
// The kernels and the peak loop are picked at run time (benchmarks/dispatch), as in the ptq tool.
// Times are this thread's CPU time, best iteration, so other processes sharing the cores disturb
// them little.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstddef>
#include <ctime>
#include <random>
#include <vector>

#include "ada_shapes.hpp"
#include "dispatch/dispatch.hpp"
#include "ptq/algorithms/layer/layer_compute.hpp"
#include "ptq/kernels/kernel_set.hpp"

namespace {

double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

/// Times f (best iteration, CPU time) and reports GFLOP/s, the peak and the fraction of it.
template <class F>
void run_vs_peak(benchmark::State& state, double flops, F&& f) {
  const double peak = ptq_bench::madd_peak_gflops();
  double best = 1e30;
  for (auto _ : state) {
    const double t0 = cpu_seconds();
    f();
    const double s = cpu_seconds() - t0;
    best = std::min(best, s);
    state.SetIterationTime(s);
  }
  state.counters["GFLOPs"] = flops / best * 1e-9;
  state.counters["peak_GFLOPs"] = peak;
  state.counters["of_peak"] = flops / best * 1e-9 / peak;
  state.SetLabel(ptq_bench::kernels().arch_name);
}

constexpr std::size_t batch = 32;

/// 2·(multiply-adds) of one forward (= one weight gradient) on the minibatch.
double layer_flops(const ptq::layer_geometry& g) {
  const double kk = static_cast<double>(g.kernel_h * g.kernel_w);
  const double p = static_cast<double>(ptq::output_h(g) * ptq::output_w(g));
  return 2.0 * static_cast<double>(batch) * static_cast<double>(g.out_channels) *
         static_cast<double>(g.in_channels / g.groups) * kk * p;
}

void layer_bench(benchmark::State& state, const ptq::layer_geometry& g, bool grad) {
  ptq::layer_compute lc(g, 1, ptq_bench::kernels());
  const auto x = ptq_bench::normal_floats(batch * lc.input_size(), 1);
  const auto w = ptq_bench::normal_floats(lc.weight_size(), 2);
  const auto b = ptq_bench::normal_floats(g.out_channels, 3);
  const auto dy = ptq_bench::normal_floats(batch * lc.output_size(), 4);
  std::vector<float> y(batch * lc.output_size()), dw(lc.weight_size());
  run_vs_peak(state, layer_flops(g), [&] {
    const auto s = grad ? lc.weight_grad(x.data(), batch, dy.data(), dw.data())
                        : lc.forward(x.data(), batch, w.data(), b.data(), y.data());
    benchmark::DoNotOptimize(s.ok());
    benchmark::ClobberMemory();
  });
}

/// The bare GEMM calls of a layer: `calls` problems of m x n x k with the given transpositions.
void gemm_bench(benchmark::State& state, std::size_t m, std::size_t n, std::size_t k, bool ta,
                bool tb, std::size_t calls) {
  const auto& ks = ptq_bench::kernels();
  const auto a = ptq_bench::normal_floats(m * k, 5);
  const auto b = ptq_bench::normal_floats(k * n * calls, 6);
  std::vector<float> c(m * n * calls), ws(ptq::kernels::gemm_workspace_floats);
  run_vs_peak(state, 2.0 * static_cast<double>(m * n * k * calls), [&] {
    for (std::size_t i = 0; i < calls; ++i) {
      ptq::kernels::gemm_problem p;
      p.m = m;
      p.n = n;
      p.k = k;
      p.a = a.data();
      p.lda = ta ? m : k;
      p.trans_a = ta;
      p.b = b.data() + i * k * n;
      p.ldb = tb ? k : n;
      p.trans_b = tb;
      p.c = c.data() + i * m * n;
      p.ldc = n;
      ks.gemm(p, ws.data());
    }
    benchmark::ClobberMemory();
  });
}

}  // namespace

static void BM_peak_madd_loop(benchmark::State& state) {
  constexpr std::size_t iters = 1'000'000;
  const double flops = ptq_bench::run_madd_loop(1);  // per round
  run_vs_peak(state, flops * static_cast<double>(iters),
              [&] { (void)ptq_bench::run_madd_loop(iters); });
}
BENCHMARK(BM_peak_madd_loop)->UseManualTime()->Unit(benchmark::kMillisecond);

static void BM_linear512_forward_n32(benchmark::State& state) {
  layer_bench(state, ptq_bench::linear_512(), false);
}
BENCHMARK(BM_linear512_forward_n32)->UseManualTime()->Unit(benchmark::kMillisecond);

static void BM_linear512_weight_grad_n32(benchmark::State& state) {
  layer_bench(state, ptq_bench::linear_512(), true);
}
BENCHMARK(BM_linear512_weight_grad_n32)->UseManualTime()->Unit(benchmark::kMillisecond);

static void BM_conv64_3x3_16x16_forward_n32(benchmark::State& state) {
  layer_bench(state, ptq_bench::conv_64_3x3_16(), false);
}
BENCHMARK(BM_conv64_3x3_16x16_forward_n32)->UseManualTime()->Unit(benchmark::kMillisecond);

static void BM_conv64_3x3_16x16_weight_grad_n32(benchmark::State& state) {
  layer_bench(state, ptq_bench::conv_64_3x3_16(), true);
}
BENCHMARK(BM_conv64_3x3_16x16_weight_grad_n32)->UseManualTime()->Unit(benchmark::kMillisecond);

// The same work as bare GEMM calls on matrices (no windows, no copies): what the kernel itself
// reaches.
static void BM_gemm_linear_forward_32x512x512_NT(benchmark::State& state) {
  gemm_bench(state, 32, 512, 512, false, true, 1);
}
BENCHMARK(BM_gemm_linear_forward_32x512x512_NT)->UseManualTime()->Unit(benchmark::kMillisecond);

static void BM_gemm_linear_weight_grad_512x512x32_TN(benchmark::State& state) {
  gemm_bench(state, 512, 512, 32, true, false, 1);
}
BENCHMARK(BM_gemm_linear_weight_grad_512x512x32_TN)->UseManualTime()->Unit(benchmark::kMillisecond);

static void BM_gemm_conv_forward_32x_64x256x576_NN(benchmark::State& state) {
  gemm_bench(state, 64, 256, 576, false, false, 32);
}
BENCHMARK(BM_gemm_conv_forward_32x_64x256x576_NN)->UseManualTime()->Unit(benchmark::kMillisecond);

static void BM_gemm_conv_weight_grad_64x576x8192_NT(benchmark::State& state) {
  gemm_bench(state, 64, 576, 8192, false, true, 1);
}
BENCHMARK(BM_gemm_conv_weight_grad_64x576x8192_NT)->UseManualTime()->Unit(benchmark::kMillisecond);

static void BM_gemm_square_512_NN(benchmark::State& state) {
  gemm_bench(state, 512, 512, 512, false, false, 1);
}
BENCHMARK(BM_gemm_square_512_NN)->UseManualTime()->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
