// Every reader of ptq's text and JSON inputs at 1x, 4x and 16x the input, with Google
// Benchmark's complexity fit: linear time reads as an O(N) fit with a small RMS, and the
// per-item time stays flat across the sizes. The baseline of each size is a scan of the same
// bytes (the least any reader does). The sizes are items: skip_layers lines, layer-list
// entries, manifest layers, records, detailed-config layers, safetensors tensors.
//   build/benchmarks/ptq_bench_readers [--benchmark_filter=record]
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

#include "ptq/config.hpp"
#include "ptq/config_json.hpp"
#include "ptq/io/safetensors.hpp"
#include "ptq/record_json.hpp"
#include "ptq/session/model_manifest.hpp"
#include "ptq/session/record.hpp"

namespace {

constexpr long base_items = 4096;

std::string name_of(long i) {
  return "layer" + std::to_string(i);
}

std::string config_text(long n) {
  std::string t = "batch_num: 1\n";
  for (long i = 0; i < n; ++i)
    t += "skip_layers: \"" + name_of(i) + "\"\n";
  return t;
}

std::string layer_list_text(long n) {
  std::string t = "[";
  for (long i = 0; i < n; ++i)
    t += std::string(i ? "," : "") + "{\"name\": \"" + name_of(i) + "\", \"type\": \"Conv2d\"}";
  return t + "]";
}

std::string manifest_text(long n) {
  std::string t = "{\"layers\": [";
  for (long i = 0; i < n; ++i) {
    t += std::string(i ? "," : "") + "{\"name\": \"" + name_of(i) +
         "\", \"type\": \"Conv2d\", \"weight\": \"w\", \"padding\": [1, 1]}";
  }
  return t + "]}";
}

/// Every manifest weight is one small tensor: the benchmark times the reader, not the weights.
struct one_weight {
  [[nodiscard]] ptq::result<ptq::io::float_tensor> get(std::string_view) const {
    return ptq::io::float_tensor{{2, 1, 3, 3}, std::vector<float>(18, 0.5f)};
  }
};

ptq::record_file record_of(long n) {
  ptq::record_file r;
  for (long i = 0; i < n; ++i) {
    ptq::record_entry e;
    e.key = name_of(i);
    e.value.scale_d = 0.1f;
    e.value.offset_d = 0;
    e.value.scale_w = {0.2f};
    e.value.offset_w = {0};
    r.records.push_back(std::move(e));
  }
  return r;
}

std::string quant_json_text(long n) {
  std::vector<ptq::layer_info> layers;
  for (long i = 0; i < n; ++i)
    layers.push_back({name_of(i), ptq::layer_type::conv2d, true, 16, 1, 16});
  const auto config = ptq::try_parse_config("batch_num: 1\n");
  return ptq::to_toolkit_json(ptq::resolve_config(config.value(), layers).value());
}

std::string safetensors_bytes(long n) {
  std::vector<ptq::io::named_tensor> tensors;
  for (long i = 0; i < n; ++i)
    tensors.push_back({name_of(i), {1}, {1.0f}});
  const auto header = ptq::io::safetensors_header_bytes(tensors);
  return header + std::string(static_cast<std::size_t>(n) * 4, '\0');
}

template <class Read>
void run(benchmark::State& state, const std::string& text, Read&& read) {
  for (auto _ : state)
    benchmark::DoNotOptimize(read(text));
  state.SetComplexityN(state.range(0));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(text.size()));
  state.counters["bytes"] = static_cast<double>(text.size());
}

/// The baseline: one pass over the bytes that counts the newlines and quotes.
void scan(benchmark::State& state, const std::string& text) {
  run(state, text, [](const std::string& t) {
    return std::count(t.begin(), t.end(), '"') + std::count(t.begin(), t.end(), '\n');
  });
}

void BM_config_skip_layers(benchmark::State& state) {
  const auto t = config_text(state.range(0));
  run(state, t, [](const std::string& s) { return ptq::try_parse_config(s).ok(); });
}
void BM_config_skip_layers_baseline(benchmark::State& state) {
  scan(state, config_text(state.range(0)));
}

void BM_layer_list(benchmark::State& state) {
  const auto t = layer_list_text(state.range(0));
  run(state, t, [](const std::string& s) {
    const auto layers = ptq::try_read_layer_list(s);
    const auto config = ptq::try_parse_config("batch_num: 1\n");
    return ptq::resolve_config(config.value(), layers.value()).ok();
  });
}
void BM_layer_list_baseline(benchmark::State& state) {
  scan(state, layer_list_text(state.range(0)));
}

void BM_manifest(benchmark::State& state) {
  const auto t = manifest_text(state.range(0));
  run(state, t, [](const std::string& s) { return ptq::try_parse_manifest(s, one_weight{}).ok(); });
}
void BM_manifest_baseline(benchmark::State& state) {
  scan(state, manifest_text(state.range(0)));
}

void BM_record_text(benchmark::State& state) {
  const auto t = ptq::write_record(record_of(state.range(0)));
  run(state, t, [](const std::string& s) { return ptq::try_parse_record(s).ok(); });
}
void BM_record_text_baseline(benchmark::State& state) {
  scan(state, ptq::write_record(record_of(state.range(0))));
}

void BM_record_json(benchmark::State& state) {
  const nlohmann::ordered_json j = record_of(state.range(0));
  const auto t = j.dump();
  run(state, t, [](const std::string& s) { return ptq::try_read_record_json(s).ok(); });
}
void BM_record_json_baseline(benchmark::State& state) {
  const nlohmann::ordered_json j = record_of(state.range(0));
  scan(state, j.dump());
}

void BM_quant_json(benchmark::State& state) {
  const auto t = quant_json_text(state.range(0));
  run(state, t, [](const std::string& s) { return ptq::try_read_quant_config(s).ok(); });
}
void BM_quant_json_baseline(benchmark::State& state) {
  scan(state, quant_json_text(state.range(0)));
}

void BM_safetensors_header(benchmark::State& state) {
  const auto t = safetensors_bytes(state.range(0));
  run(state, t, [](const std::string& s) { return ptq::io::try_parse_safetensors(s).ok(); });
}
void BM_safetensors_header_baseline(benchmark::State& state) {
  scan(state, safetensors_bytes(state.range(0)));
}

}  // namespace

#define PTQ_READER_BENCHMARK(fn)           \
  BENCHMARK(fn)                            \
      ->RangeMultiplier(4)                 \
      ->Range(base_items, 16 * base_items) \
      ->Complexity(benchmark::oN)          \
      ->Unit(benchmark::kMillisecond);     \
  BENCHMARK(fn##_baseline)                 \
      ->RangeMultiplier(4)                 \
      ->Range(base_items, 16 * base_items) \
      ->Complexity(benchmark::oN)          \
      ->Unit(benchmark::kMillisecond)

PTQ_READER_BENCHMARK(BM_config_skip_layers);
PTQ_READER_BENCHMARK(BM_layer_list);
PTQ_READER_BENCHMARK(BM_manifest);
PTQ_READER_BENCHMARK(BM_record_text);
PTQ_READER_BENCHMARK(BM_record_json);
PTQ_READER_BENCHMARK(BM_quant_json);
PTQ_READER_BENCHMARK(BM_safetensors_header);

BENCHMARK_MAIN();
