// layer_calibrator<W, A> without a config gives the session's numbers bit for bit, for each of
// the four instantiations; make_layer_calibrator picks the instantiation a config asks for.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "ptq/algorithms/layer_calibrator.hpp"
#include "ptq/config.hpp"
#include "ptq/session/calibration_session.hpp"
#include "ptq/session/record.hpp"

#include "../support/test_layers.hpp"

namespace {

ptq::amct_config cfg(const std::string& text) {
  auto r = ptq::try_parse_config(text);
  INFO(ptq::format_diagnostics(r.diagnostics(), text, "cfg"));
  REQUIRE(r.ok());
  return r.value();
}

xt::xarray<float> wave(std::vector<std::size_t> shape, float freq, float phase, float amp) {
  xt::xarray<float> x = xt::xarray<float>::from_shape(shape);
  for (std::size_t i = 0; i < x.size(); ++i)
    x.data()[i] = std::sin(static_cast<float>(i) * freq + phase) * amp;
  return x;
}

// A Conv2d [4, 2, 3, 3] and a Linear [3, 8] (both with AdaRound support).
std::vector<ptq_test::test_layer> layers() {
  ptq_test::test_layer conv;
  conv.name = "conv";
  conv.type = ptq::layer_type::conv2d;
  conv.weight = wave({4, 2, 3, 3}, 0.37f, 0.0f, 1.0f);
  conv.bias = xt::xarray<float>{0.1f, -0.2f, 0.3f, 0.0f};
  conv.activation.kind = ptq::activation_kind::relu;
  ptq_test::test_layer fc;
  fc.name = "fc";
  fc.type = ptq::layer_type::linear;
  fc.weight = wave({3, 8}, 0.71f, 1.0f, 0.5f);
  return {conv, fc};
}

// The samples / batches of each layer.
const xt::xarray<float>& conv_batch(int b) {
  static const std::vector<xt::xarray<float>> x{wave({6, 2, 5, 5}, 0.13f, 0.0f, 2.0f),
                                                wave({6, 2, 5, 5}, 0.29f, 0.5f, 3.0f)};
  return x[static_cast<std::size_t>(b)];
}
const xt::xarray<float>& fc_batch(int b) {
  static const std::vector<xt::xarray<float>> x{wave({6, 8}, 0.41f, 0.2f, 1.5f),
                                                wave({6, 8}, 0.17f, 0.9f, 2.5f)};
  return x[static_cast<std::size_t>(b)];
}

struct layer_numbers {
  std::vector<float> weight;
  ptq::weight_quant_result weight_params;
  ptq::activation_quant_result activation;
};

// The session's numbers for `text` (batch_num 2).
std::vector<layer_numbers> session_run(const std::string& text) {
  auto created = ptq_test::create(cfg("batch_num: 2 " + text), layers());
  REQUIRE(created.ok());
  auto s = std::move(created).value();
  REQUIRE(s.quantize_weights().ok());
  for (const auto& name : s.ada_layers()) {
    const auto& x = name == "conv" ? conv_batch(0) : fc_batch(0);
    REQUIRE(s.quantize_ada(name, ptq::as_tensor_view(x, name + " input")).ok());
  }
  REQUIRE(s.phase() == ptq::session_phase::activations);
  for (int b = 0; b < 2; ++b) {
    REQUIRE(s.feed("conv", ptq::as_tensor_view(conv_batch(b))).ok());
    REQUIRE(s.feed("fc", ptq::as_tensor_view(fc_batch(b))).ok());
  }
  REQUIRE(s.phase() == ptq::session_phase::done);
  std::vector<layer_numbers> out;
  for (const auto& l : s.layers()) {
    out.push_back({ptq_test::values(l.desc.weight), *l.weight_params, *l.activation_params});
  }
  return out;
}

ptq::ada_problem problem_of(const ptq_test::test_layer& d, const xt::xarray<float>& x) {
  ptq::ada_problem p;
  p.name = d.name;
  p.geometry.type = d.type;
  p.weight = d.weight.data();
  p.bias = d.bias ? d.bias->data() : nullptr;
  p.activation = d.activation;
  p.input = x.data();
  if (d.type == ptq::layer_type::linear) {
    p.geometry.in_channels = 8;
    p.geometry.out_channels = 3;
    p.samples = x.shape()[0];
  } else {
    p.geometry.in_channels = 2;
    p.geometry.out_channels = 4;
    p.geometry.kernel_h = p.geometry.kernel_w = 3;
    p.geometry.in_h = p.geometry.in_w = 5;
    p.samples = x.shape()[0];
  }
  return p;
}

// The same layers through layer_calibrator<W, A> built from settings, no config involved.
template <class W, class A>
std::vector<layer_numbers> direct_run(const typename W::settings& conv_w,
                                      const typename W::settings& fc_w,
                                      const typename A::settings& act) {
  std::vector<layer_numbers> out;
  const auto descs = layers();
  for (std::size_t i = 0; i < descs.size(); ++i) {
    const auto& d = descs[i];
    ptq::layer_calibrator<W, A> c(i == 0 ? conv_w : fc_w, act, ptq::kernels::default_kernels(),
                                  d.name);
    layer_numbers n;
    if constexpr (W::needs_samples) {
      auto r = c.quantize_weights(problem_of(d, i == 0 ? conv_batch(0) : fc_batch(0)));
      REQUIRE(r.ok());
      n.weight = r.value().weight;
      n.weight_params = r.value().params;
    } else {
      n.weight.assign(d.weight.begin(), d.weight.end());
      std::vector<std::size_t> shape(d.weight.shape().begin(), d.weight.shape().end());
      auto r = c.quantize_weights(ptq::view_of(n.weight.data(), shape), d.type, 1, n.weight.data());
      REQUIRE(r.ok());
      n.weight_params = r.value();
    }
    for (int b = 0; b < 2; ++b) {
      const auto& x = i == 0 ? conv_batch(b) : fc_batch(b);
      REQUIRE(c.observe(x.data(), x.size()).ok());
    }
    auto a = c.finalize();
    REQUIRE(a.ok());
    n.activation = a.value();
    out.push_back(std::move(n));
  }
  return out;
}

void check_same(const std::vector<layer_numbers>& session,
                const std::vector<layer_numbers>& direct) {
  REQUIRE(session.size() == direct.size());
  for (std::size_t i = 0; i < session.size(); ++i) {
    INFO("layer " << i);
    CHECK(session[i].weight == direct[i].weight);
    CHECK(session[i].weight_params.scale == direct[i].weight_params.scale);
    CHECK(session[i].weight_params.offset == direct[i].weight_params.offset);
    CHECK(session[i].weight_params.bits == direct[i].weight_params.bits);
    CHECK(session[i].activation.scale == direct[i].activation.scale);
    CHECK(session[i].activation.offset == direct[i].activation.offset);
    CHECK(session[i].activation.bits == direct[i].activation.bits);
  }
}

// What the config texts below ask for, written as settings (decimal values as the config
// stores them: float32).
ptq::ifmr_settings ifmr_set() {
  ptq::ifmr_settings s;
  s.search_range_start = 0.8f;
  s.search_range_end = 1.2f;
  s.search_step = 0.02f;
  s.max_percentile = 0.9999f;
  s.min_percentile = 0.999f;
  s.asymmetric = true;
  return s;
}
const char* const ifmr_text =
    "ifmr_quantize { search_range_start: 0.8 search_range_end: 1.2 search_step: 0.02 "
    "max_percentile: 0.9999 min_percentile: 0.999 asymmetric: true }";

ptq::hfmg_settings hfmg_set() {
  ptq::hfmg_settings s;
  s.num_of_bins = 1024;
  s.asymmetric = false;
  return s;
}
const char* const hfmg_text = "hfmg_quantize { num_of_bins: 1024 asymmetric: false }";

ptq::ada_settings ada_set(bool channel_wise) {
  ptq::ada_settings s;
  s.num_iteration = 40;
  s.reg_param = 0.02f;
  s.warm_start = 0.25f;
  s.beta_range_start = 16.0f;
  s.beta_range_end = 4.0f;
  s.channel_wise = channel_wise;
  return s;
}
const char* const ada_text =
    "ada_quantize { num_iteration: 40 reg_param: 0.02 warm_start: 0.25 beta_range_start: 16 "
    "beta_range_end: 4 }";
const char* const arq_text = "arq_quantize { channel_wise: true }";

std::string config_of(const char* weight, const char* act) {
  return std::string("common_config { ") + weight + " " + act + " }";
}

}  // namespace

TEST_CASE("layer_calibrator<arq, hfmg> without a config gives the session's numbers",
          "[session][calibrator]") {
  const ptq::arq_settings conv{8, true};
  const ptq::arq_settings fc{8, false};  // Linear: per tensor (not channel-wise)
  check_same(session_run(config_of(arq_text, hfmg_text)),
             direct_run<ptq::arq, ptq::hfmg>(conv, fc, hfmg_set()));
}

TEST_CASE("layer_calibrator<arq, ifmr> without a config gives the session's numbers",
          "[session][calibrator]") {
  const ptq::arq_settings conv{8, true};
  const ptq::arq_settings fc{8, false};
  check_same(session_run(config_of(arq_text, ifmr_text)),
             direct_run<ptq::arq, ptq::ifmr>(conv, fc, ifmr_set()));
}

TEST_CASE("layer_calibrator<ada, ifmr> without a config gives the session's numbers",
          "[session][calibrator][ada]") {
  check_same(session_run(config_of(ada_text, ifmr_text)),
             direct_run<ptq::ada, ptq::ifmr>(ada_set(true), ada_set(false), ifmr_set()));
}

TEST_CASE("layer_calibrator<ada, hfmg> without a config gives the session's numbers",
          "[session][calibrator][ada]") {
  check_same(session_run(config_of(ada_text, hfmg_text)),
             direct_run<ptq::ada, ptq::hfmg>(ada_set(true), ada_set(false), hfmg_set()));
}

TEST_CASE("the policies are traits: settings, from_plan, observer, needs_samples",
          "[session][calibrator]") {
  STATIC_REQUIRE(std::is_same_v<ptq::arq::settings, ptq::arq_settings>);
  STATIC_REQUIRE(std::is_same_v<ptq::ada::settings, ptq::ada_settings>);
  STATIC_REQUIRE(std::is_same_v<ptq::ifmr::observer, ptq::ifmr_observer>);
  STATIC_REQUIRE(std::is_same_v<ptq::hfmg::observer, ptq::hfmg_observer>);
  STATIC_REQUIRE(ptq::ada::needs_samples);
  STATIC_REQUIRE_FALSE(ptq::arq::needs_samples);
  STATIC_REQUIRE(ptq::layer_calibrator<ptq::ada, ptq::hfmg>::needs_samples);
  STATIC_REQUIRE_FALSE(ptq::layer_calibrator<ptq::arq, ptq::ifmr>::needs_samples);

  ptq::resolved_layer plan;
  plan.name = "fc";
  plan.type = ptq::layer_type::linear;
  plan.activation.algo = ptq::activation_algo::hfmg;
  plan.activation.num_of_bins = 2048;
  plan.activation.num_bits = 16;
  plan.activation.asymmetric = false;
  const auto h = ptq::hfmg::from_plan(plan);
  CHECK(h.num_of_bins == 2048);
  CHECK(h.bits == 16);
  CHECK_FALSE(h.asymmetric);
  // No weight params (ADA given to a type without AdaRound): ARQ defaults for the type.
  CHECK(ptq::weight_algo_of(plan) == ptq::weight_algo::arq);
  CHECK_FALSE(ptq::arq::from_plan(plan).channel_wise);
  CHECK(ptq::arq::from_plan(plan).bits == 8);
  ptq::basic_weight_params<float> w;
  w.algo = ptq::weight_algo::ada;
  w.num_iteration = 77;
  w.channel_wise = false;
  plan.weight = w;
  CHECK(ptq::weight_algo_of(plan) == ptq::weight_algo::ada);
  CHECK(ptq::ada::from_plan(plan).num_iteration == 77);
  // ADA on a type without AdaRound (a hand-made plan) falls back to ARQ.
  plan.type = ptq::layer_type::conv1d;
  CHECK(ptq::weight_algo_of(plan) == ptq::weight_algo::arq);
}

TEST_CASE("make_layer_calibrator turns the config's algorithms into the instantiation",
          "[session][calibrator]") {
  ptq::resolved_layer plan;
  plan.name = "conv";
  plan.type = ptq::layer_type::conv2d;
  CHECK(ptq::make_layer_calibrator(plan).index() == 0);  // arq, ifmr
  plan.activation.algo = ptq::activation_algo::hfmg;
  CHECK(ptq::make_layer_calibrator(plan).index() == 1);  // arq, hfmg
  ptq::basic_weight_params<float> w;
  w.algo = ptq::weight_algo::ada;
  w.num_iteration = 12;
  plan.weight = w;
  const auto c = ptq::make_layer_calibrator(plan, 3);
  REQUIRE(std::holds_alternative<ptq::layer_calibrator<ptq::ada, ptq::hfmg>>(c));
  const auto& ada = std::get<ptq::layer_calibrator<ptq::ada, ptq::hfmg>>(c);
  CHECK(ada.weight_settings().num_iteration == 12);
  CHECK(ada.weight_settings().threads == 3);
  CHECK(ada.observer().settings().threads == 3);
  CHECK(ada.name() == "conv");
  CHECK(ptq::needs_samples(c));
  plan.activation.algo = ptq::activation_algo::ifmr;
  CHECK(ptq::make_layer_calibrator(plan).index() == 2);  // ada, ifmr
}

namespace {
/// The session's record text for `text` (batch_num 2) on the two layers.
std::string session_record_text(const std::string& text) {
  auto created = ptq_test::create(cfg("batch_num: 2 " + text), layers());
  REQUIRE(created.ok());
  auto s = std::move(created).value();
  REQUIRE(s.quantize_weights().ok());
  for (int b = 0; b < 2; ++b) {
    REQUIRE(s.feed("conv", ptq::as_tensor_view(conv_batch(b))).ok());
    REQUIRE(s.feed("fc", ptq::as_tensor_view(fc_batch(b))).ok());
  }
  return ptq::write_record(s.record().value());
}

/// The same record through the policy path: make() with options, record() of each layer.
std::string policy_record_text(bool force_fp16) {
  ptq::record_file rec;
  const auto descs = layers();
  for (std::size_t i = 0; i < descs.size(); ++i) {
    const auto& d = descs[i];
    ptq::layer_calibrator_options o;
    o.name = d.name;
    o.threads = 2;
    o.force_fp16 = force_fp16;
    auto made = ptq::layer_calibrator<ptq::arq, ptq::hfmg>::make(ptq::arq_settings{8, i == 0},
                                                                 hfmg_set(), o);
    REQUIRE(made.ok());
    auto c = std::move(made).value();
    CHECK(c.name() == d.name);
    CHECK(c.observer().settings().threads == 2);
    std::vector<float> w(d.weight.begin(), d.weight.end());
    const std::vector<std::size_t> shape(d.weight.shape().begin(), d.weight.shape().end());
    REQUIRE(c.quantize_weights(ptq::view_of(w.data(), shape), d.type, 1, w.data()).ok());
    for (int b = 0; b < 2; ++b) {
      const auto& x = i == 0 ? conv_batch(b) : fc_batch(b);
      REQUIRE(c.observe(x.data(), x.size()).ok());
    }
    rec.records.push_back({d.name, c.record().value()});
  }
  return ptq::write_record(rec);
}
}  // namespace

TEST_CASE("the policy path builds the session's record, FORCE_FP16_QUANT included",
          "[session][calibrator]") {
  const std::string plain = config_of(arq_text, hfmg_text);
  CHECK(policy_record_text(false) == session_record_text(plain));
  const std::string fp16 = plain + " fakequant_precision_mode: FORCE_FP16_QUANT";
  const std::string want = session_record_text(fp16);
  CHECK(want.find("FORCE_FP16_QUANT") != std::string::npos);
  CHECK(policy_record_text(true) == want);
}

TEST_CASE("layer_calibrator::make refuses bad settings before any batch", "[session][calibrator]") {
  using arq_hfmg = ptq::layer_calibrator<ptq::arq, ptq::hfmg>;
  using arq_ifmr = ptq::layer_calibrator<ptq::arq, ptq::ifmr>;
  ptq::layer_calibrator_options o;
  o.name = "conv1";
  ptq::hfmg_settings bins;
  bins.num_of_bins = 100;
  auto a = arq_hfmg::make({8, true}, bins, o);
  REQUIRE_FALSE(a.ok());
  CHECK(a.error().code == ptq::errc::num_of_bins_invalid);
  CHECK(a.error().message ==
        "conv1 input: HFMG num_of_bins 100 is not supported; use 1024, 2048, 4096 or 8192");
  ptq::ifmr_settings range;
  range.search_range_start = 1.3;
  range.search_range_end = 0.7;
  auto b = arq_ifmr::make({8, true}, range, o);
  REQUIRE_FALSE(b.ok());
  CHECK(b.error().code == ptq::errc::search_range_invalid);  // the config's code for it
  CHECK(b.error().message ==
        "conv1 input: IFMR search range [1.3, 0.7] with step 0.01: it needs start < end and "
        "step > 0");
  auto c = arq_ifmr::make({1, true}, ptq::ifmr_settings{}, o);
  REQUIRE_FALSE(c.ok());
  CHECK(c.error().message == "conv1.weight: ARQ bits must be in [2, 16], got 1");
  ptq::ada_settings ada;
  ada.warm_start = 2.0f;
  auto d = ptq::layer_calibrator<ptq::ada, ptq::hfmg>::make(ada, ptq::hfmg_settings{}, o);
  REQUIRE_FALSE(d.ok());
  CHECK(d.error().message == "conv1.weight: warm_start must be in [0, 1]");
  CHECK(arq_ifmr::make({8, true}, ptq::ifmr_settings{}, o).ok());
}

TEST_CASE("a training loop asks for a running estimate and resets", "[session][calibrator]") {
  auto made = ptq::layer_calibrator<ptq::arq, ptq::hfmg>::make({8, true}, hfmg_set());
  REQUIRE(made.ok());
  auto c = std::move(made).value();
  CHECK(c.record().error().message ==
        "layer: record() before quantize_weights(): the layer has no weight scales yet");
  CHECK(c.estimate().error().code == ptq::errc::no_data);
  const auto& x0 = conv_batch(0);
  const auto& x1 = conv_batch(1);
  REQUIRE(c.observe(x0.data(), x0.size()).ok());
  const auto first = c.estimate().value();
  REQUIRE(c.observe(x1.data(), x1.size()).ok());
  const auto both = c.estimate().value();  // the loop goes on after an estimate
  // A fresh calibrator on the two batches gives the same: an estimate changed nothing.
  auto fresh = ptq::layer_calibrator<ptq::arq, ptq::hfmg>::make({8, true}, hfmg_set()).value();
  REQUIRE(fresh.observe(x0.data(), x0.size()).ok());
  REQUIRE(fresh.observe(x1.data(), x1.size()).ok());
  CHECK(fresh.finalize().value().scale == both.scale);
  CHECK(fresh.finalize().value().offset == both.offset);
  // reset(): as if new, so the first batch alone gives the first estimate again.
  c.reset();
  CHECK(c.estimate().error().code == ptq::errc::no_data);
  REQUIRE(c.observe(x0.data(), x0.size()).ok());
  CHECK(c.estimate().value().scale == first.scale);
  CHECK(c.estimate().value().offset == first.offset);
  // The same for IFMR, through the observer directly.
  ptq::ifmr_observer ifmr(ifmr_set());
  REQUIRE(ifmr.observe(x0.data(), x0.size()).ok());
  const auto i0 = ifmr.estimate().value();
  REQUIRE(ifmr.observe(x1.data(), x1.size()).ok());
  ifmr.reset();
  CHECK(ifmr.batches() == 0);
  CHECK(ifmr.data().size() == 0);
  REQUIRE(ifmr.observe(x0.data(), x0.size()).ok());
  CHECK(ifmr.estimate().value().scale == i0.scale);
}
