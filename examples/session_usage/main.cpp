// The session, the policy path, the report and the exporters on a two-layer network of its
// own: a Conv2d 2->4 3x3 with a ReLU, then a Linear 64->3, whose tensors lie as an engine keeps
// them (float32 weights it runs with, a bfloat16 weight stored transposed, NHWC activations):
// every tensor reaches ptq as a ptq::tensor_view of that memory. docs/calibrate.md,
// docs/numerics.md, docs/report.md and docs/export.md show the regions between the [doc:...]
// markers, and tests/package checks that they are this text.
#include <ptq/algorithms/layer_calibrator.hpp>
#include <ptq/config.hpp>
#include <ptq/export.hpp>
#include <ptq/report.hpp>
#include <ptq/session/calibration_session.hpp>
#include <ptq/session/record.hpp>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace {

std::vector<float> wave(std::size_t n, float freq, float amp) {
  std::vector<float> x(n);
  for (std::size_t i = 0; i < n; ++i)
    x[i] = amp * std::sin(freq * static_cast<float>(i));
  return x;
}

/// float32 -> bfloat16 bits, rounded to nearest even (what torch's .to(torch.bfloat16) does).
std::uint16_t to_bfloat16(float f) {
  std::uint32_t bits = 0;
  std::memcpy(&bits, &f, sizeof bits);
  bits += 0x7FFFU + ((bits >> 16) & 1U);
  return static_cast<std::uint16_t>(bits >> 16);
}

/// The engine's own tensors: the conv's float32 weight and bias it runs with, and the Linear's
/// weight as it stores it, bfloat16 and transposed ([in, out] in memory).
struct engine {
  std::vector<float> conv_weight = wave(4 * 2 * 3 * 3, 0.37f, 1.0f);  // [4, 2, 3, 3]
  std::vector<float> conv_bias{0.1f, -0.2f, 0.3f, 0.0f};
  std::vector<std::uint16_t> fc_weight_t;  // [64, 3] in memory: W[o][i] at i * 3 + o

  engine() {
    const std::vector<float> w = wave(3 * 64, 0.71f, 0.5f);  // W [3, 64]
    fc_weight_t.resize(w.size());
    for (std::size_t o = 0; o < 3; ++o) {
      for (std::size_t i = 0; i < 64; ++i)
        fc_weight_t[i * 3 + o] = to_bfloat16(w[o * 64 + i]);
    }
  }
};

/// What the engine's forward pass gives for batch `b` (8 samples): the conv's input in NHWC
/// memory ([8, 10, 10, 2]) and the Linear's [8, 64].
std::vector<float> input_of(const std::string& name, int b) {
  const float f = 0.13f + 0.1f * static_cast<float>(b);
  return name == "conv" ? wave(8 * 10 * 10 * 2, f, 2.0f) : wave(8 * 64, f, 1.5f);
}

// [doc:layers]
/// The input of layer `name` in `x` as the [N, C, ...] view the layer takes: the conv's NHWC
/// memory read as NCHW through its strides, no copy.
ptq::tensor_view input_view(const std::string& name, const std::vector<float>& x) {
  if (name == "fc")
    return ptq::view_of(x.data(), {8, 64});
  ptq::tensor_view v = ptq::view_of(x.data(), {8, 2, 10, 10});  // N, C, H, W
  v.strides = {200, 1, 20, 2};                                  // of NHWC memory, in elements
  return v;
}

/// The network as the session sees it, over the engine's memory.
std::vector<ptq::layer_desc> network(engine& e) {
  ptq::layer_desc conv;
  conv.name = "conv";
  conv.type = ptq::layer_type::conv2d;
  conv.weight = ptq::view_of(e.conv_weight.data(), {4, 2, 3, 3});  // float32, C order
  conv.weight_out = e.conv_weight.data();  // quantized where it lies: the engine runs it as is
  conv.bias = ptq::view_of(e.conv_bias.data(), {4});
  conv.activation.kind = ptq::activation_kind::relu;

  ptq::layer_desc fc;
  fc.name = "fc";
  fc.type = ptq::layer_type::linear;
  fc.weight.data = e.fc_weight_t.data();  // bfloat16, [64, 3] in memory, read as [3, 64]
  fc.weight.type = ptq::dtype::bf16;
  fc.weight.shape = {3, 64};
  fc.weight.strides = {1, 3};  // the session keeps its float32 copy (no weight_out)
  return {conv, fc};
}
// [/doc:layers]

/// The four phases with every layer's inputs (two batches), for the report example.
void calibrate(ptq::calibration_session& s) {
  const int batch_num = 2;
  for (const std::string& name : s.dmq_layers())
    ptq::throw_if_error(s.feed_dmq(name, input_view(name, input_of(name, 0))));
  ptq::throw_if_error(s.quantize_weights());
  for (const std::string& name : s.ada_layers())
    ptq::throw_if_error(s.quantize_ada(name, input_view(name, input_of(name, 0))));
  for (int b = 0; b < batch_num; ++b) {
    for (const char* name : {"conv", "fc"})
      ptq::throw_if_error(s.feed(name, input_view(name, input_of(name, b))));
  }
}

void run_report(const ptq::amct_config& config) {
  engine e;
  const std::vector<ptq::layer_desc> layers = network(e);
  // [doc:report]
  ptq::session_options opt;
  opt.keep_search_stats = true;
  auto s = ptq::value_or_throw(ptq::calibration_session::create(config, layers, opt));
  calibrate(s);  // feed_dmq, quantize_weights, quantize_ada, feed: the usual phases
  ptq::report_summary summary;
  summary.model = "my model";
  const std::vector<double> activation_sqnr_db{};      // per layer, or {}
  const std::vector<ptq::sensitivity_entry> scores{};  // {layer, dB} per layer, or {}: the estimate
  auto rep = ptq::make_report(s, activation_sqnr_db, summary, scores, "the estimate");
  if (rep) {
    const std::string html = ptq::report_to_html(rep.value());
    const std::string json = ptq::report_to_json(rep.value());
    std::printf("report: %zu bytes of HTML, %zu of JSON\n", html.size(), json.size());
  }
  // [/doc:report]
}

void run_export(const ptq::record_file& record) {
  // [doc:export]
  auto table = ptq::make_qdq_table(record);  // ptq::result<ptq::qdq_table>; with a manifest:
                                             // make_qdq_table(record, manifest)
  ptq::export_options opt;
  opt.trt_version = "8601";
  auto cache = ptq::write_trt_cache(ptq::value_or_throw(std::move(table)), opt);
  if (cache) {  // result<std::string>, W1220 warnings in cache.diagnostics()
    std::printf("%s", cache.value().c_str());
  }
  for (const ptq::export_format& f : ptq::export_formats())  // name, summary, needs_model, write
    std::printf("format %s\n", std::string(f.name).c_str());
  // [/doc:export]
}

void run_policy_path() {
  std::vector<float> w = wave(4 * 2 * 3 * 3, 0.37f, 1.0f);
  const std::vector<std::vector<float>> batches{input_of("conv", 0), input_of("conv", 1)};
  // [doc:policies]
  ptq::layer_calibrator_options options;
  options.name = "conv";
  options.threads = 2;         // results do not depend on it
  options.force_fp16 = false;  // FORCE_FP16_QUANT
  // The settings are checked here, before any batch: a bad one is an error naming the layer.
  auto c = ptq::value_or_throw(
      ptq::layer_calibrator<ptq::arq, ptq::hfmg>::make({8, true}, {2048, 8, true}, options));
  const ptq::weight_quant_result wq =  // fake-quantizes w where it lies (the last argument)
      ptq::value_or_throw(c.quantize_weights(ptq::view_of(w.data(), {4, 2, 3, 3}),
                                             ptq::layer_type::conv2d, 1, w.data()));
  for (const std::vector<float>& x : batches)  // any tensor_view: dtype, shape, strides
    ptq::throw_if_error(c.observe(input_view("conv", x)));
  const ptq::activation_quant_result act = ptq::value_or_throw(c.finalize());
  const ptq::layer_record entry = ptq::value_or_throw(c.record());  // the session's, bit for bit
  // [/doc:policies]
  std::printf("policy path: %zu weight scales, activation scale %.9g offset %d, record %s\n",
              wq.scale.size(), static_cast<double>(act.scale), act.offset,
              entry.act_type.value_or("?").c_str());
}

int run_session(const ptq::amct_config& config) {
  const int batch_num = static_cast<int>(config.batch_num.value_or(ptq::defaults::batch_num));
  engine e;
  // [doc:session]
  auto created = ptq::calibration_session::create(config, network(e));  // resolves, fuses Conv+BN
  if (!created) {
    for (const auto& d : created.diagnostics())  // resolution errors, malformed layers (E801)
      std::fprintf(stderr, "%s", ptq::format_error(d).c_str());
    return 1;
  }
  ptq::calibration_session session = std::move(created).value();

  for (const std::string& name : session.dmq_layers())  // phase 2: DMQ, one batch
    ptq::throw_if_error(session.feed_dmq(name, input_view(name, input_of(name, 0))));
  ptq::throw_if_error(session.quantize_weights());      // phase 3: balanced ARQ weights
  for (const std::string& name : session.ada_layers())  // then AdaRound, layer by layer
    ptq::throw_if_error(session.quantize_ada(name, input_view(name, input_of(name, 0))));
  // From here the engine runs each layer with session.weight(name).value() (for "conv": its
  // own e.conv_weight, changed in place), session.bias(name).value(), and its input divided
  // by session.find(name)->balance_factors.
  for (int b = 0; b < batch_num; ++b) {  // phase 4: activations
    for (const char* name : {"conv", "fc"})
      ptq::throw_if_error(session.feed(name, input_view(name, input_of(name, b))));
  }
  const ptq::record_file record = ptq::value_or_throw(session.record());  // the toolkit's record
  // As proto text; or as JSON: nlohmann::ordered_json j = record;
  const std::string text = ptq::write_record(record);
  // [/doc:session]
  if (ptq::value_or_throw(session.weight("conv")).data != e.conv_weight.data()) {
    std::fprintf(stderr, "the conv weight was not quantized where it lies\n");
    return 1;
  }
  std::printf("%s", text.c_str());
  run_export(record);
  return 0;
}

}  // namespace

int main() {
  auto config = ptq::try_parse_config("batch_num: 2\n");
  if (!config) {
    std::fprintf(stderr, "%s\n", ptq::format_diagnostics(config.diagnostics(), "", "cfg").c_str());
    return 1;
  }
  run_policy_path();
  run_report(config.value());
  return run_session(config.value());
}
