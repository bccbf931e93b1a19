// Fake-quantization and int8 quantization of 16M floats into caller buffers (no allocation in
// the timed region), each against the streaming read of the input with plain stores of the
// same output bytes into the same buffer (a kernel that writes cannot beat that).
#include "bench_support.hpp"

static void BM_fake_quant_16M(benchmark::State& state) {
  const auto& x = ptq_bench::normal_data();
  const auto& k = ptq_bench::kernels();
  std::vector<float> out(x.size());
  const ptq::kernels::quantizer q{4.0f / 127.0f, 0.0f, -128.0f, 127.0f};
  ptq_bench::run_vs_baseline(state, x.data(), x.size(),
                             [&] {
                               k.fake_quant(x.data(), x.size(), q, out.data());
                               benchmark::DoNotOptimize(out.data());
                             },
                             false, {out.data(), out.size() * sizeof(float)});
}
BENCHMARK(BM_fake_quant_16M)->UseManualTime()->Unit(benchmark::kMillisecond);

static void BM_quantize_int8_16M(benchmark::State& state) {
  const auto& x = ptq_bench::normal_data();
  const auto& k = ptq_bench::kernels();
  std::vector<std::int8_t> out(x.size());
  const ptq::kernels::quantizer q{4.0f / 127.0f, 0.0f, -128.0f, 127.0f};
  ptq_bench::run_vs_baseline(state, x.data(), x.size(),
                             [&] {
                               k.quantize_i8(x.data(), x.size(), q, out.data());
                               benchmark::DoNotOptimize(out.data());
                             },
                             false, {out.data(), out.size()});
}
BENCHMARK(BM_quantize_int8_16M)->UseManualTime()->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
