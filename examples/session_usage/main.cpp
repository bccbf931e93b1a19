// The session, the policy path, the report and the exporters on a two-layer network of its
// own: a Conv2d 2->4 3x3 with a ReLU, then a Linear 64->3. docs/calibrate.md, docs/numerics.md,
// docs/report.md and docs/export.md show the regions between the [doc:...] markers, and
// tests/package checks that they are this text.
#include <ptq/algorithms/layer_calibrator.hpp>
#include <ptq/config.hpp>
#include <ptq/export.hpp>
#include <ptq/report.hpp>
#include <ptq/session/calibration_session.hpp>
#include <ptq/session/record.hpp>

#include <cmath>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace {

xt::xarray<float> wave(std::vector<std::size_t> shape, float freq, float amp) {
  xt::xarray<float> x = xt::xarray<float>::from_shape(shape);
  for (std::size_t i = 0; i < x.size(); ++i)
    x.data()[i] = amp * std::sin(freq * static_cast<float>(i));
  return x;
}

std::vector<ptq::layer_desc> network() {
  ptq::layer_desc conv;
  conv.name = "conv";
  conv.type = ptq::layer_type::conv2d;
  conv.weight = wave({4, 2, 3, 3}, 0.37f, 1.0f);
  conv.bias = xt::xarray<float>{0.1f, -0.2f, 0.3f, 0.0f};
  conv.activation.kind = ptq::activation_kind::relu;
  ptq::layer_desc fc;
  fc.name = "fc";
  fc.type = ptq::layer_type::linear;
  fc.weight = wave({3, 64}, 0.71f, 0.5f);
  return {conv, fc};
}

/// What the engine's forward pass gives: each layer's input for batch `b` (8 samples).
xt::xarray<float> input_of(const std::string& name, int b) {
  const float f = 0.13f + 0.1f * static_cast<float>(b);
  return name == "conv" ? wave({8, 2, 10, 10}, f, 2.0f) : wave({8, 64}, f, 1.5f);
}

/// The four phases with every layer's inputs (two batches), for the report example.
void calibrate(ptq::calibration_session& s) {
  const int batch_num = 2;
  for (const std::string& name : s.dmq_layers())
    ptq::throw_if_error(s.feed_dmq(name, ptq::as_tensor_ref(input_of(name, 0))));
  ptq::throw_if_error(s.quantize_weights());
  for (const std::string& name : s.ada_layers())
    ptq::throw_if_error(s.quantize_ada(name, ptq::as_tensor_ref(input_of(name, 0))));
  for (int b = 0; b < batch_num; ++b) {
    for (const char* name : {"conv", "fc"})
      ptq::throw_if_error(s.feed(name, ptq::as_tensor_ref(input_of(name, b))));
  }
}

void run_report(const ptq::amct_config& config, const std::vector<ptq::layer_desc>& layers) {
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
  xt::xarray<float> w = wave({4, 2, 3, 3}, 0.37f, 1.0f);
  const std::vector<xt::xarray<float>> batches{input_of("conv", 0), input_of("conv", 1)};
  // [doc:policies]
  ptq::layer_calibrator_options options;
  options.name = "conv";
  options.threads = 2;         // results do not depend on it
  options.force_fp16 = false;  // FORCE_FP16_QUANT
  // The settings are checked here, before any batch: a bad one is an error naming the layer.
  auto c = ptq::value_or_throw(
      ptq::layer_calibrator<ptq::arq, ptq::hfmg>::make({8, true}, {2048, 8, true}, options));
  const ptq::weight_quant_result wq =  // fake-quantizes w in place
      ptq::value_or_throw(c.quantize_weights(w.data(), {4, 2, 3, 3}, ptq::layer_type::conv2d, 1));
  for (const xt::xarray<float>& x : batches)
    ptq::throw_if_error(c.observe(x.data(), x.size()));
  const ptq::activation_quant_result act = ptq::value_or_throw(c.finalize());
  const ptq::layer_record entry = ptq::value_or_throw(c.record());  // the session's, bit for bit
  // [/doc:policies]
  std::printf("policy path: %zu weight scales, activation scale %.9g offset %d, record %s\n",
              wq.scale.size(), static_cast<double>(act.scale), act.offset,
              entry.act_type.value_or("?").c_str());
}

int run_session(const ptq::amct_config& config) {
  const int batch_num = static_cast<int>(config.batch_num.value_or(ptq::defaults::batch_num));
  // [doc:session]
  auto created = ptq::calibration_session::create(config, network());  // resolves, fuses Conv+BN
  if (!created) {
    for (const auto& d : created.diagnostics())  // resolution errors, malformed layers (E801)
      std::fprintf(stderr, "%s", ptq::format_error(d).c_str());
    return 1;
  }
  ptq::calibration_session session = std::move(created).value();

  for (const std::string& name : session.dmq_layers())  // phase 2: DMQ, one batch
    ptq::throw_if_error(session.feed_dmq(name, ptq::as_tensor_ref(input_of(name, 0))));
  ptq::throw_if_error(session.quantize_weights());      // phase 3: balanced ARQ weights
  for (const std::string& name : session.ada_layers())  // then AdaRound, layer by layer
    ptq::throw_if_error(session.quantize_ada(name, ptq::as_tensor_ref(input_of(name, 0))));
  // From here the engine runs each layer with *session.weight(name).value(), the layer's
  // (fused) bias, and its input divided by session.find(name)->balance_factors.
  for (int b = 0; b < batch_num; ++b) {  // phase 4: activations
    for (const char* name : {"conv", "fc"})
      ptq::throw_if_error(session.feed(name, ptq::as_tensor_ref(input_of(name, b))));
  }
  const ptq::record_file record = ptq::value_or_throw(session.record());  // the toolkit's record
  // As proto text; or as JSON: nlohmann::ordered_json j = record;
  const std::string text = ptq::write_record(record);
  // [/doc:session]
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
  run_report(config.value(), network());
  return run_session(config.value());
}
