// ARQ per-channel calibration of a [512, 512, 3, 3] Conv2d weight (2.36M floats), and its
// fake-quantization in place, against a streaming read of the same weight (calibration) and that
// read with a store of every value back (fake-quantization), and the divider's ceiling: the same
// buffer divided in place, the one operation per value fake-quantization cannot do without.
// Target: calibration >= 70 % of the baseline. The toolkit: 8 ms (its own timing).
#include <cstring>

#include "bench_support.hpp"
#include "ptq/algorithms/weights/arq.hpp"

static void BM_arq_per_channel_512x512x3x3(benchmark::State& state) {
  const std::size_t n = 512 * 512 * 9;
  const auto& w = ptq_bench::normal_data(n);
  const ptq::tensor_view t = ptq::view_of(w.data(), {512, 512, 3, 3}, "w");
  ptq_bench::run_vs_baseline(state, w.data(), n, [&] {
    auto r = ptq::arq_calibrate(t, ptq::layer_type::conv2d, 1, {8, true}, ptq_bench::kernels());
    benchmark::DoNotOptimize(r);
  });
}
BENCHMARK(BM_arq_per_channel_512x512x3x3)->UseManualTime()->Unit(benchmark::kMillisecond);

static void BM_arq_fake_quantize_512x512x3x3(benchmark::State& state) {
  const std::size_t n = 512 * 512 * 9;
  const auto& w = ptq_bench::normal_data(n);
  const ptq::tensor_view t = ptq::view_of(w.data(), {512, 512, 3, 3}, "w");
  const auto p =
      ptq::arq_calibrate(t, ptq::layer_type::conv2d, 1, {8, true}, ptq_bench::kernels()).value();
  std::vector<float> buf(w);
  const ptq::tensor_view in_place = ptq::view_of(buf.data(), t.shape, "w");
  ptq_bench::run_vs_baseline(state, buf.data(), n,
                             [&] {
                               auto st =
                                   ptq::arq_fake_quantize(in_place, ptq::layer_type::conv2d, 1, p,
                                                          buf.data(), ptq_bench::kernels());
                               benchmark::DoNotOptimize(st);
                             },
                             false, {buf.data(), n * sizeof(float)});
}
BENCHMARK(BM_arq_fake_quantize_512x512x3x3)->UseManualTime()->Unit(benchmark::kMillisecond);

// The ceiling of the case above: the same in-place buffer divided by a scale, nothing else. A
// correctly rounded division per value is what fake-quantization must do, and on an
// L2/L3-resident weight the divider's throughput, not the read, sets the pace.
static void BM_division_alone_in_place_512x512x3x3(benchmark::State& state) {
  const std::size_t n = 512 * 512 * 9;
  std::vector<float> buf(ptq_bench::normal_data(n));
  ptq_bench::run_vs_baseline(state, buf.data(), n,
                             [&] {
                               ptq_bench::divide(buf.data(), n, 1.0f, buf.data());
                               benchmark::DoNotOptimize(buf.data());
                             },
                             false, {buf.data(), n * sizeof(float)});
}
BENCHMARK(BM_division_alone_in_place_512x512x3x3)->UseManualTime()->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
