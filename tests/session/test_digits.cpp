// The bundled digits model calibrated through the session as an engine would drive it.
#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <utility>

#include "digits_pipeline.hpp"
#include "ptq/config.hpp"

namespace {

const digits::digits_data& data() {
  static const digits::digits_data d = [] {
    digits::digits_data out;
    std::string err;
    if (!digits::load_digits(std::string(PTQ_EXAMPLES_DIR) + "/digits", out, err))
      FAIL(err);
    return out;
  }();
  return d;
}

std::string config_text(const std::string& config_file) {
  return ptq::value_or_throw(
      ptq::try_read_text_file(std::string(PTQ_EXAMPLES_DIR) + "/configs/" + config_file));
}

digits::pipeline_result compute_text(const std::string& text, unsigned threads) {
  const auto c = ptq::try_parse_config(text);
  REQUIRE(c.ok());
  ptq::session_options opt;
  opt.threads = threads;
  auto r = digits::calibrate_and_evaluate(c.value(), data().model, data().calib, data().test,
                                          data().test_labels, 32, opt);
  INFO(r.error);
  REQUIRE(r.error.empty());
  return r;
}

digits::pipeline_result compute(const std::string& config_file, unsigned threads) {
  return compute_text(config_text(config_file), threads);
}

// Each (config, threads) pipeline runs once per test process: the sanitizer build runs this
// suite too, where a pipeline takes seconds.
const digits::pipeline_result& run(const std::string& config_file, unsigned threads = 1) {
  static std::map<std::pair<std::string, unsigned>, digits::pipeline_result> cache;
  const auto key = std::make_pair(config_file, threads);
  auto it = cache.find(key);
  if (it == cache.end())
    it = cache.emplace(key, compute(config_file, threads)).first;
  return it->second;
}

}  // namespace

TEST_CASE("the bundled model loads and its FP32 accuracy is the trained one", "[digits]") {
  const auto& d = data();
  CHECK(d.model.layers.size() == 4);
  CHECK(d.test.shape[0] == 540);
  CHECK(d.calib.shape[0] == 64);
  const auto& r = run("quant_hfmg.cfg");
  CHECK(r.fp32_accuracy == Approx(0.9925925926).margin(1e-9));  // 536 of 540, as trained
}

TEST_CASE("quantized accuracy within 1 point of FP32; the record reads back equal", "[digits]") {
  for (const char* cfg : {"quant.cfg", "quant_hfmg.cfg", "dmq_balancer.cfg"}) {
    INFO(cfg);
    const auto& r = run(cfg);
    CHECK(r.quant_accuracy >= r.fp32_accuracy - 0.01);
    const auto text = ptq::write_record(r.record);
    const auto back = ptq::try_parse_record(text);
    REQUIRE(back.ok());
    CHECK(back.value() == r.record);
    CHECK_FALSE(r.record.records.empty());
  }
}

TEST_CASE("the DMQ config records balance factors; the IFMR one does not", "[digits]") {
  const auto& dmq = run("dmq_balancer.cfg");
  REQUIRE(dmq.record.find("conv2"));
  CHECK(dmq.record.find("conv2")->tensor_balance_factor.size() == 16);
  CHECK(dmq.record.find("fc")->tensor_balance_factor.size() == 512);
  CHECK_FALSE(dmq.record.find("pool"));  // skipped by skip_layers
  const auto& ifmr = run("quant.cfg");
  CHECK(ifmr.record.find("conv2")->tensor_balance_factor.size() == 16);  // quant.cfg has DMQ too
  const auto& hfmg = run("quant_hfmg.cfg");
  CHECK(hfmg.record.find("conv2")->tensor_balance_factor.empty());
  CHECK(*hfmg.record.find("pool")->act_type == "INT8");
  CHECK(hfmg.record.find("pool")->scale_w == std::vector<float>{1.0f});
}

TEST_CASE("results are identical for every thread count", "[digits][slow]") {
  for (const char* cfg : {"quant.cfg", "quant_hfmg.cfg"}) {
    INFO(cfg);
    CHECK(run(cfg, 1).record == run(cfg, 2).record);
  }
  CHECK(compute("quant.cfg", 1).record == run("quant.cfg", 1).record);  // and on a second run
}

TEST_CASE("AdaRound on the digits model: accuracy within 1 point of FP32", "[digits][ada][slow]") {
  const auto& r = run("digits_ada.cfg");
  INFO("FP32 " << r.fp32_accuracy << ", AdaRound " << r.quant_accuracy);
  CHECK(r.quant_accuracy >= r.fp32_accuracy - 0.01);
  const auto& s = *r.session;
  for (const char* name : {"conv1", "conv2", "fc"}) {
    INFO(name);
    const auto* l = s.find(name);
    REQUIRE(l);
    REQUIRE(l->plan.weight);
    CHECK(l->plan.weight->algo == ptq::weight_algo::ada);
    CHECK(l->weight_params->offset == std::vector<std::int32_t>(l->weight_params->scale.size(), 0));
    CHECK(l->ada_changed > 0);  // the learned rounding is not round-to-nearest everywhere
  }
  CHECK(s.find("conv1")->weight_params->scale.size() == 16);  // Conv2d: per channel
  CHECK(s.find("fc")->weight_params->scale.size() == 1);      // Linear: per tensor
}

TEST_CASE("AdaRound weights are identical for every thread count", "[digits][ada][slow]") {
  // digits_ada.cfg with a tenth of its iterations: every step is done on the threads from the
  // first iteration on, so this compares as much of the arithmetic as the full run does.
  std::string text = config_text("digits_ada.cfg");
  const std::string full = "num_iteration : 2000";
  const auto at = text.find(full);
  REQUIRE(at != std::string::npos);
  text.replace(at, full.size(), "num_iteration : 200");
  const auto a = compute_text(text, 1);
  const auto b = compute_text(text, 2);
  for (std::size_t i = 0; i < a.session->layers().size(); ++i)
    CHECK(ptq::copy_values(a.session->layers()[i].desc.weight) ==
          ptq::copy_values(b.session->layers()[i].desc.weight));
  CHECK(a.record == b.record);
}

TEST_CASE("the bounded memory mode: the engine's second pass gives the same record",
          "[digits][two_pass][slow]") {
  for (const char* cfg : {"quant.cfg", "quant_hfmg.cfg", "dmq_balancer.cfg"}) {
    INFO(cfg);
    std::string text;
    text = ptq::value_or_throw(
        ptq::try_read_text_file(std::string(PTQ_EXAMPLES_DIR) + "/configs/" + cfg));
    const auto c = ptq::try_parse_config(text);
    REQUIRE(c.ok());
    ptq::session_options opt;
    opt.activation.pass = ptq::activation_mode::kind::bounded;
    const auto r = digits::calibrate_and_evaluate(c.value(), data().model, data().calib,
                                                  data().test, data().test_labels, 32, opt);
    INFO(r.error);
    REQUIRE(r.error.empty());
    CHECK(r.record == run(cfg).record);
    CHECK(r.quant_accuracy == run(cfg).quant_accuracy);
  }
}
