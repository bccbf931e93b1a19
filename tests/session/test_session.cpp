#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ptq/algorithms/activation_observer.hpp"
#include "ptq/algorithms/activations/dmq.hpp"
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

// conv [4, 2, 3, 3] with a BN, then a Linear [3, 8].
std::vector<ptq_test::test_layer> two_layers(bool with_bn = true) {
  ptq_test::test_layer conv;
  conv.name = "conv";
  conv.type = ptq::layer_type::conv2d;
  conv.weight = xt::xarray<float>::from_shape({4, 2, 3, 3});
  for (std::size_t i = 0; i < conv.weight.size(); ++i) {
    conv.weight.data()[i] = std::sin(static_cast<float>(i) * 0.37f);
  }
  conv.bias = xt::xarray<float>{0.1f, -0.2f, 0.3f, 0.0f};
  if (with_bn) {
    conv.batch_norm = ptq::batch_norm_params{{1.5f, 0.5f, 2.0f, 1.0f},
                                             {0.0f, 0.1f, -0.1f, 0.2f},
                                             {0.05f, -0.05f, 0.0f, 0.1f},
                                             {1.0f, 4.0f, 0.25f, 3.0f},
                                             1e-5f};
  }
  ptq_test::test_layer fc;
  fc.name = "fc";
  fc.type = ptq::layer_type::linear;
  fc.weight = xt::xarray<float>::from_shape({3, 8});
  for (std::size_t i = 0; i < fc.weight.size(); ++i) {
    fc.weight.data()[i] = std::cos(static_cast<float>(i) * 0.71f);
  }
  return {conv, fc};
}

xt::xarray<float> input(std::vector<std::size_t> shape, float phase) {
  xt::xarray<float> x = xt::xarray<float>::from_shape(shape);
  for (std::size_t i = 0; i < x.size(); ++i) {
    x.data()[i] = std::sin(static_cast<float>(i) * 0.13f + phase) * 2.0f;
  }
  return x;
}

ptq::calibration_session make(const std::string& text,
                              const std::vector<ptq_test::test_layer>& layers) {
  auto s = ptq_test::create(cfg(text), layers);
  INFO(ptq::format_diagnostics(s.diagnostics(), text, "cfg"));
  REQUIRE(s.ok());
  return std::move(s).value();
}

}  // namespace

TEST_CASE("fusion folds the BatchNorm into weight and bias", "[session]") {
  const auto layers = two_layers();
  auto s = make("", layers);
  const auto& conv = s.layers()[0];
  CHECK(conv.fused);
  CHECK_FALSE(conv.desc.batch_norm);
  const float r1 = 1.0f / std::sqrt(4.0f + 1e-5f);
  CHECK(ptq_test::value_at(conv.desc.weight, {1, 0, 0, 1}) ==
        layers[0].weight(1, 0, 0, 1) * (0.5f * r1));
  CHECK(conv.desc.bias->at(1) == (-0.2f - -0.05f) * r1 * 0.5f + 0.1f);
  auto skip = make("skip_fusion_layers: \"conv\"", layers);
  CHECK_FALSE(skip.layers()[0].fused);
  CHECK(skip.layers()[0].desc.batch_norm);
  auto off = make("do_fusion: false", layers);
  CHECK_FALSE(off.layers()[0].fused);
}

TEST_CASE("a fusion that would not be finite is skipped with a warning", "[session]") {
  auto layers = two_layers();
  layers[0].batch_norm->running_var[2] = 0.0f;
  layers[0].batch_norm->eps = 0.0f;
  auto r = ptq_test::create(cfg(""), layers);
  REQUIRE(r.ok());
  CHECK_FALSE(r.value().layers()[0].fused);
  REQUIRE(r.diagnostics().size() == 1);
  CHECK(r.diagnostics()[0].code == ptq::errc::fusion_skipped);
}

TEST_CASE("the phases in order give the same numbers as the policies called directly",
          "[session]") {
  auto s = make("batch_num: 2", two_layers(false));
  CHECK(s.phase() == ptq::session_phase::dmq);
  REQUIRE(s.quantize_weights().ok());
  CHECK(s.phase() == ptq::session_phase::activations);
  // ARQ per channel on the conv, per tensor on the Linear.
  const auto direct = ptq::arq::calibrate(ptq::as_tensor_view(two_layers(false)[0].weight),
                                          ptq::layer_type::conv2d, 1, {8, true});
  REQUIRE(direct.ok());
  CHECK(s.layers()[0].weight_params->scale == direct.value().scale);
  CHECK(s.layers()[1].weight_params->scale.size() == 1);
  CHECK(s.layers()[0].weight_sqnr_db > 30.0);
  // Two batches per layer; IFMR over both, compared with the observer itself.
  ptq::activation_observer ref(ptq::activation_settings{});
  for (int b = 0; b < 2; ++b) {
    const auto x = input({2, 2, 5, 5}, static_cast<float>(b));
    REQUIRE(s.feed("conv", ptq::as_tensor_view(x)).ok());
    REQUIRE(ref.observe(x).ok());
    REQUIRE(s.feed("fc", ptq::as_tensor_view(input({2, 8}, static_cast<float>(b)))).ok());
  }
  CHECK(s.phase() == ptq::session_phase::done);
  const auto want = ref.finalize();
  REQUIRE(want.ok());
  const auto rec = s.record();
  REQUIRE(rec.ok());
  const auto* conv = rec.value().find("conv");
  REQUIRE(conv);
  CHECK(*conv->scale_d == want.value().scale);
  CHECK(*conv->offset_d == want.value().offset);
  CHECK(conv->scale_w.size() == 4);
  CHECK(conv->offset_w == std::vector<std::int32_t>(4, 0));
  CHECK(*conv->act_type == "INT8");
  CHECK(*conv->wts_type == "INT8");
  CHECK_FALSE(conv->fakequant_precision_mode);
}

TEST_CASE("feeding errors are clear", "[session]") {
  auto s = make("batch_num: 1 skip_layers: \"fc\"", two_layers());
  const auto x = input({1, 2, 4, 4}, 0);
  auto st = s.feed("conv", ptq::as_tensor_view(x));  // before the weights are quantized
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().message.find("phase") != std::string::npos);
  REQUIRE(s.quantize_weights().ok());
  CHECK_FALSE(s.quantize_weights().ok());
  st = s.feed("nope", ptq::as_tensor_view(x));
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().message.find("no layer named 'nope'") != std::string::npos);
  st = s.feed("fc", ptq::as_tensor_view(input({1, 8}, 0)));
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().message.find("skipped") != std::string::npos);
  st = s.feed("conv", ptq::as_tensor_view(input({1, 3, 4, 4}, 0)));
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().message.find("3 input channels") != std::string::npos);
  auto rec = s.record();
  REQUIRE_FALSE(rec.ok());
  CHECK(rec.error().message.find("'conv'") != std::string::npos);
  REQUIRE(s.feed("conv", ptq::as_tensor_view(x)).ok());
  st = s.feed("conv", ptq::as_tensor_view(x));
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().message.find("batch_num") != std::string::npos);
  CHECK(s.record().ok());
}

TEST_CASE("NaN input is an error naming the layer", "[session]") {
  auto s = make("", two_layers());
  REQUIRE(s.quantize_weights().ok());
  auto x = input({1, 2, 4, 4}, 0);
  x(0, 1, 2, 3) = std::nanf("");
  const auto st = s.feed("conv", ptq::as_tensor_view(x, "conv input"));
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().code == ptq::errc::non_finite);
  CHECK(st.error().message == "conv input batch 1: NaN at flat index 27");
}

TEST_CASE("DMQ: factors from the first input, weights times s, inputs divided by s", "[session]") {
  auto s = make("common_config { dmq_balancer { migration_strength: 0.5 } }", two_layers(false));
  CHECK(s.dmq_layers() == std::vector<std::string>{"conv", "fc"});
  CHECK_FALSE(s.quantize_weights().ok());  // the DMQ inputs are missing
  const auto xc = input({2, 2, 5, 5}, 0.5f);
  const auto xf = input({2, 8}, 0.25f);
  REQUIRE(s.feed_dmq("conv", ptq::as_tensor_view(xc)).ok());
  CHECK_FALSE(s.feed_dmq("conv", ptq::as_tensor_view(xc)).ok());  // once only
  REQUIRE(s.feed_dmq("fc", ptq::as_tensor_view(xf)).ok());
  const auto layers = two_layers(false);
  const auto want = ptq::dmq_factors(ptq::as_tensor_view(xc), ptq::as_tensor_view(layers[0].weight),
                                     ptq::layer_type::conv2d, 1, {0.5f});
  REQUIRE(want.ok());
  CHECK(s.layers()[0].balance_factors == want.value());
  REQUIRE(s.quantize_weights().ok());
  REQUIRE(s.feed("conv", ptq::as_tensor_view(xc)).ok());
  REQUIRE(s.feed("fc", ptq::as_tensor_view(xf)).ok());
  // The observed data is the input divided by the factors.
  xt::xarray<float> divided = xc;
  REQUIRE(ptq::dmq_apply_to_activation(divided.data(), {2, 2, 5, 5}, ptq::layer_type::conv2d,
                                       want.value())
              .ok());
  ptq::activation_observer ref(ptq::activation_settings{});
  REQUIRE(ref.observe(divided).ok());
  const auto rec = s.record();
  REQUIRE(rec.ok());
  CHECK(*rec.value().find("conv")->scale_d == ref.finalize().value().scale);
  CHECK(rec.value().find("conv")->tensor_balance_factor == want.value());
}

TEST_CASE("FORCE_FP16_QUANT rounds scale_d and is recorded", "[session]") {
  auto s = make("fakequant_precision_mode: FORCE_FP16_QUANT", two_layers());
  REQUIRE(s.quantize_weights().ok());
  REQUIRE(s.feed("conv", ptq::as_tensor_view(input({1, 2, 4, 4}, 0))).ok());
  REQUIRE(s.feed("fc", ptq::as_tensor_view(input({1, 8}, 0))).ok());
  const auto rec = s.record();
  REQUIRE(rec.ok());
  const float sd = *rec.value().find("conv")->scale_d;
  CHECK(sd == ptq::fp16_scale(sd));
  CHECK(*rec.value().find("conv")->fakequant_precision_mode == "FORCE_FP16_QUANT");
}

TEST_CASE("malformed layers are rejected at creation", "[session]") {
  auto layers = two_layers();
  layers[1].weight = xt::xarray<float>::from_shape({3, 8, 1});
  auto r = ptq_test::create(cfg(""), layers);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == ptq::errc::session_layer_invalid);
  CHECK(r.error().message.find("layer 'fc'") != std::string::npos);
  layers = two_layers();
  layers[0].conv.padding_mode = "reflect";
  CHECK_FALSE(ptq_test::create(cfg(""), layers).ok());
  const auto unresolved = ptq_test::create(cfg("skip_layers: \"x\""), two_layers());
  REQUIRE_FALSE(unresolved.ok());
  CHECK(unresolved.error().code == ptq::errc::unknown_layer);
}

TEST_CASE("progress is reported per phase", "[session]") {
  std::vector<ptq::session_phase> seen;
  ptq::session_options opt;
  opt.on_progress = [&](const ptq::progress_event& e) {
    if (seen.empty() || seen.back() != e.phase)
      seen.push_back(e.phase);
  };
  auto r = ptq_test::create(cfg(""), two_layers(), opt);
  REQUIRE(r.ok());
  auto s = std::move(r).value();
  REQUIRE(s.quantize_weights().ok());
  REQUIRE(s.feed("conv", ptq::as_tensor_view(input({1, 2, 4, 4}, 0))).ok());
  REQUIRE(s.feed("fc", ptq::as_tensor_view(input({1, 8}, 0))).ok());
  CHECK(seen == std::vector<ptq::session_phase>{ptq::session_phase::fusion,
                                                ptq::session_phase::weights,
                                                ptq::session_phase::activations});
}

TEST_CASE("AdaRound layers: quantized one at a time in order, then the activation phase",
          "[session][ada]") {
  const std::string text = R"(batch_num: 1
    common_config { ada_quantize { num_iteration: 60 } }
    override_layer_configs { layer_name: "fc" calibration_config { arq_quantize {} } })";
  auto layers = two_layers(false);
  auto s = make(text, layers);
  REQUIRE(s.quantize_weights().ok());
  // conv is AdaRound, fc is ARQ: fc is quantized, conv waits with its float weight.
  CHECK(s.phase() == ptq::session_phase::weights);
  CHECK(s.ada_layers() == std::vector<std::string>{"conv"});
  CHECK(s.layers()[1].weight_params.has_value());
  CHECK_FALSE(s.layers()[0].weight_params.has_value());
  CHECK(ptq_test::values(s.weight("conv").value()) == ptq_test::values(layers[0].weight));
  const auto x = input({6, 2, 5, 5}, 0.3f);
  auto st = s.feed("conv", ptq::as_tensor_view(x));
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().message.find("weight quantization phase") != std::string::npos);
  st = s.quantize_ada("fc", ptq::as_tensor_view(input({6, 8}, 0.0f)));
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().message.find("not an AdaRound layer") != std::string::npos);
  st = s.quantize_ada("conv", ptq::as_tensor_view(input({6, 3, 5, 5}, 0.0f)));
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().message.find("3 input channels") != std::string::npos);
  const auto other = input({5, 2, 5, 5}, 0.0f);
  const auto other_ref = ptq::as_tensor_view(other);
  st = s.quantize_ada("conv", ptq::as_tensor_view(x), &other_ref);
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().message.find("differ in shape") != std::string::npos);

  REQUIRE(s.quantize_ada("conv", ptq::as_tensor_view(x)).ok());
  CHECK(s.phase() == ptq::session_phase::activations);
  CHECK(s.ada_layers().empty());
  // The learned weight: the same as ada_round called directly, on the KL scales' grid.
  ptq::ada_problem p;
  p.name = "conv";
  p.geometry.type = ptq::layer_type::conv2d;
  p.geometry.in_channels = 2;
  p.geometry.out_channels = 4;
  p.geometry.kernel_h = p.geometry.kernel_w = 3;
  p.geometry.in_h = p.geometry.in_w = 5;
  p.weight = layers[0].weight.data();
  p.bias = layers[0].bias->data();
  p.input = x.data();
  p.samples = 6;
  ptq::ada_settings as;
  as.num_iteration = 60;
  const auto direct = ptq::ada_round(p, as);
  REQUIRE(direct.ok());
  CHECK(ptq_test::values(s.weight("conv").value()) == direct.value().weight);
  CHECK(s.layers()[0].weight_params->scale == direct.value().params.scale);
  st = s.quantize_ada("conv", ptq::as_tensor_view(x));
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().message.find("phase") != std::string::npos);
  REQUIRE(s.feed("conv", ptq::as_tensor_view(x)).ok());
  REQUIRE(s.feed("fc", ptq::as_tensor_view(input({2, 8}, 0.0f))).ok());
  const auto rec = s.record();
  REQUIRE(rec.ok());
  CHECK(rec.value().find("conv")->scale_w == direct.value().params.scale);
  CHECK(*rec.value().find("conv")->wts_type == "INT8");
}

TEST_CASE("AdaRound layers go in model order; the float input sets the target", "[session][ada]") {
  const std::string text = "batch_num: 1 common_config { ada_quantize { num_iteration: 40 } }";
  auto layers = two_layers(false);
  ptq::session_options opt;
  std::vector<std::string> seen;
  opt.ada_report_every = 20;
  opt.on_ada_progress = [&](std::string_view layer, const ptq::ada_progress& e) {
    seen.push_back(std::string(layer) + ":" + std::to_string(e.iteration));
  };
  auto created = ptq_test::create(cfg(text), layers, opt);
  REQUIRE(created.ok());
  auto s = std::move(created).value();
  REQUIRE(s.quantize_weights().ok());
  CHECK(s.ada_layers() == std::vector<std::string>{"conv", "fc"});
  const auto xfc = input({12, 8}, 0.5f);
  auto st = s.quantize_ada("fc", ptq::as_tensor_view(xfc));
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().message.find("'conv' is next") != std::string::npos);
  REQUIRE(s.quantize_ada("conv", ptq::as_tensor_view(input({4, 2, 5, 5}, 0.0f))).ok());
  CHECK(s.phase() == ptq::session_phase::weights);
  // A float input that differs from the input: the target comes from it, so the result differs
  // from learning against the layer's own output.
  const auto xf = input({12, 8}, 0.9f);
  const auto xf_ref = ptq::as_tensor_view(xf);
  REQUIRE(s.quantize_ada("fc", ptq::as_tensor_view(xfc), &xf_ref).ok());
  CHECK(s.phase() == ptq::session_phase::activations);
  CHECK(seen == std::vector<std::string>{"conv:20", "conv:40", "fc:20", "fc:40"});
  ptq::ada_problem p;
  p.name = "fc";
  p.geometry.type = ptq::layer_type::linear;
  p.geometry.in_channels = 8;
  p.geometry.out_channels = 3;
  p.weight = layers[1].weight.data();
  p.input = xf.data();
  p.samples = 12;
  const auto target = ptq::ada_float_target(p);
  REQUIRE(target.ok());
  p.input = xfc.data();
  p.target = target.value().data();
  ptq::ada_settings as;
  as.num_iteration = 40;
  as.channel_wise = false;
  const auto direct = ptq::ada_round(p, as);
  REQUIRE(direct.ok());
  CHECK(ptq_test::values(s.weight("fc").value()) == direct.value().weight);
}

TEST_CASE("calls out of order and unknown layers are E802, naming the layer", "[session][errors]") {
  auto s = make("batch_num: 1 common_config { dmq_balancer { migration_strength: 0.5 } }",
                two_layers(false));
  const auto x = input({1, 2, 4, 4}, 0);
  auto st = s.feed("conv", ptq::as_tensor_view(x));
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().code == ptq::errc::session_call_invalid);
  CHECK(st.error().message ==
        "feed('conv'): the session is in the DMQ phase, not the activation calibration phase");
  st = s.feed_dmq("nope", ptq::as_tensor_view(x));
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().code == ptq::errc::session_call_invalid);
  CHECK(st.error().message == "feed_dmq: no layer named 'nope'");
  st = s.quantize_weights();
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().code == ptq::errc::session_call_invalid);
  CHECK(st.error().message ==
        "quantize_weights: layer 'conv' has dmq_balancer but its input was not fed (feed_dmq)");
  st = s.quantize_ada("conv", ptq::as_tensor_view(x));
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().code == ptq::errc::session_call_invalid);
  const auto rec = s.record();
  REQUIRE_FALSE(rec.ok());
  CHECK(rec.error().code == ptq::errc::session_call_invalid);
  CHECK(rec.error().message ==
        "record: the session is in the DMQ phase; layer 'conv' has not seen its 1 batch(es) yet");
  const auto w = s.weight("nope");
  REQUIRE_FALSE(w.ok());
  CHECK(w.error().code == ptq::errc::session_call_invalid);
  CHECK(w.error().message == "weight: no layer named 'nope'");
  REQUIRE(s.weight("fc").ok());
  CHECK(s.weight("fc").value().shape == std::vector<std::size_t>{3, 8});
}

TEST_CASE("a DMQ batch with the wrong channel count is E803 naming the layer",
          "[session][errors]") {
  auto s = make("common_config { dmq_balancer { migration_strength: 0.5 } }", two_layers(false));
  const auto x = input({2, 3, 5, 5}, 0);
  auto st = s.feed_dmq("conv", ptq::as_tensor_view(x, "batch0.safetensors:conv"));
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().code == ptq::errc::session_input_invalid);
  // The tensor's name (here: where the engine read it) is kept, the layer is named.
  CHECK(st.error().message ==
        "conv input (batch0.safetensors:conv) [2, 3, 5, 5]: has 3 input "
        "channels (axis 1); the layer takes 2");
  st = s.feed_dmq("conv", ptq::as_tensor_view(x, "conv input (batch0.safetensors)"));
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().message ==
        "conv input (batch0.safetensors) [2, 3, 5, 5]: has 3 input "
        "channels (axis 1); the layer takes 2");
  st = s.feed_dmq("fc", ptq::as_tensor_view(input({2, 7}, 0)));
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().code == ptq::errc::session_input_invalid);
  CHECK(st.error().message == "fc input [2, 7]: has 7 input channels (axis -1); the layer takes 8");
  // Nothing was recorded: the right inputs still work.
  REQUIRE(s.feed_dmq("conv", ptq::as_tensor_view(input({2, 2, 5, 5}, 0))).ok());
  REQUIRE(s.feed_dmq("fc", ptq::as_tensor_view(input({2, 8}, 0))).ok());
  REQUIRE(s.quantize_weights().ok());
}

TEST_CASE("an input of the wrong rank is E803: a rank-5 input to a Conv2d", "[session][errors]") {
  auto s = make("batch_num: 1", two_layers());
  REQUIRE(s.quantize_weights().ok());
  const auto x5 = input({1, 2, 4, 4, 1}, 0);
  auto st = s.feed("conv", ptq::as_tensor_view(x5));
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().code == ptq::errc::session_input_invalid);
  CHECK(st.error().message ==
        "conv input [1, 2, 4, 4, 1]: a Conv2d takes a rank-4 input [N, C, H, W], got rank 5");
  const auto x3 = input({2, 4, 4}, 0);
  st = s.feed("conv", ptq::as_tensor_view(x3));
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().code == ptq::errc::session_input_invalid);
  ptq::tensor_view scalar;
  const float one = 1.0f;
  scalar.data = &one;
  scalar.shape = {};  // rank 0 (a default view is empty, shape [0])
  st = s.feed("fc", scalar);
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().code == ptq::errc::session_input_invalid);
  CHECK(st.error().message == "fc input []: a Linear takes an input of rank 1 or more");
  ptq::tensor_view null_data;
  null_data.shape = {1, 8};
  st = s.feed("fc", null_data);
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().code == ptq::errc::tensor_view_invalid);
  CHECK(st.error().message == "fc input [1, 8]: no data (null pointer) for 8 values");
  const auto empty = input({0, 2, 4, 4}, 0);
  st = s.feed("conv", ptq::as_tensor_view(empty));
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().code == ptq::errc::empty_tensor);  // as an observer says it
  CHECK(st.error().message == "conv input [0, 2, 4, 4]: empty tensor");
  // None of them counted as a batch.
  REQUIRE(s.feed("conv", ptq::as_tensor_view(input({1, 2, 4, 4}, 0))).ok());
  REQUIRE(s.feed("fc", ptq::as_tensor_view(input({3, 8}, 0))).ok());
  CHECK(s.phase() == ptq::session_phase::done);
}

TEST_CASE("a scale overflow names the layer's tensor", "[session][errors]") {
  auto s = make("batch_num: 1", two_layers());
  REQUIRE(s.quantize_weights().ok());
  auto x = input({1, 2, 4, 4}, 0);
  x(0, 0, 0, 0) = 3e38f;
  x(0, 1, 0, 0) = -3e38f;
  const auto st = s.feed("conv", ptq::as_tensor_view(x));
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().code == ptq::errc::invalid_scale);
  CHECK(st.error().message == "conv input: scale has an invalid value (inf, nan or zero): inf");
  // A tiny weight range is no error: process_scale makes a scale below FLT_EPSILON 1.
  auto layers = two_layers(false);
  layers[0].weight.fill(0.0f);
  layers[0].weight(2, 0, 0, 0) = 1e-44f;
  auto tiny = make("batch_num: 1", layers);
  REQUIRE(tiny.quantize_weights().ok());
  CHECK(tiny.layers()[0].weight_params->scale[2] == 1.0f);
}

TEST_CASE("a failed quantize_weights names the weight and leaves the session as it was",
          "[session][errors]") {
  auto layers = two_layers(false);
  layers[1].weight(1, 2) = std::numeric_limits<float>::quiet_NaN();  // fc [3, 8]: flat 10
  auto s = make("batch_num: 1", layers);
  const auto st = s.quantize_weights();
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().code == ptq::errc::non_finite);
  CHECK(st.error().message == "fc.weight: NaN at flat index 10");
  // conv, before fc, was not changed: every layer is checked before any weight changes.
  CHECK(s.phase() == ptq::session_phase::dmq);
  CHECK_FALSE(s.layers()[0].weight_params.has_value());
  CHECK(ptq_test::values(s.weight("conv").value()) == ptq_test::values(layers[0].weight));
  const auto fed = s.feed("conv", ptq::as_tensor_view(input({1, 2, 4, 4}, 0)));
  REQUIRE_FALSE(fed.ok());
  CHECK(fed.error().code == ptq::errc::session_call_invalid);
}

TEST_CASE("fusion progress names only the layers it fuses", "[session]") {
  std::vector<std::string> seen;
  ptq::session_options opt;
  opt.on_progress = [&](const ptq::progress_event& e) {
    if (e.phase == ptq::session_phase::fusion)
      seen.push_back(std::string(e.layer) + " " + std::to_string(e.done) + "/" +
                     std::to_string(e.total));
  };
  auto layers = two_layers();
  auto second = layers[0];
  second.name = "conv2";
  layers.push_back(second);
  REQUIRE(ptq_test::create(cfg(""), layers, opt).ok());
  CHECK(seen == std::vector<std::string>{"conv 1/2", "conv2 2/2"});
  seen.clear();
  REQUIRE(ptq_test::create(cfg("skip_fusion_layers: \"conv\""), layers, opt).ok());
  CHECK(seen == std::vector<std::string>{"conv2 1/1"});
  seen.clear();
  REQUIRE(ptq_test::create(cfg("do_fusion: false"), layers, opt).ok());
  CHECK(seen.empty());
}

TEST_CASE("bounded memory: two passes over the batches, the one-pass record; misuse is clear",
          "[session][two_pass]") {
  const std::string text = "batch_num: 2 skip_layers: \"fc\"";
  const auto x0 = input({1, 2, 4, 4}, 0), x1 = input({1, 2, 4, 4}, 1.5f);
  auto one = make(text, two_layers());
  REQUIRE(one.quantize_weights().ok());
  REQUIRE(one.feed("conv", ptq::as_tensor_view(x0)).ok());
  REQUIRE(one.feed("conv", ptq::as_tensor_view(x1)).ok());
  auto rec = one.record();
  REQUIRE(rec.ok());

  ptq::session_options opt;
  opt.activation.pass = ptq::activation_mode::kind::bounded;
  auto made = ptq_test::create(cfg(text), two_layers(), opt);
  REQUIRE(made.ok());
  auto s = std::move(made).value();
  CHECK(s.activation_passes() == 2);
  REQUIRE(s.quantize_weights().ok());
  for (int pass = 0; pass < 2; ++pass) {
    REQUIRE(s.feed("conv", ptq::as_tensor_view(x0)).ok());
    if (pass == 0)
      CHECK_FALSE(s.record().ok());
    REQUIRE(s.feed("conv", ptq::as_tensor_view(x1)).ok());
  }
  auto two = s.record();
  REQUIRE(two.ok());
  CHECK(two.value() == rec.value());
  const auto more = s.feed("conv", ptq::as_tensor_view(x0));
  REQUIRE_FALSE(more.ok());
  CHECK(more.error().message.find("batch(es) (batch_num) twice") != std::string::npos);

  // IFMR's ranks come from batch_num times the first batch's size: other sizes are refused.
  auto again = ptq_test::create(cfg(text), two_layers(), opt);
  REQUIRE(again.ok());
  auto t = std::move(again).value();
  REQUIRE(t.quantize_weights().ok());
  REQUIRE(t.feed("conv", ptq::as_tensor_view(x0)).ok());
  const auto big = input({2, 2, 4, 4}, 0);
  const auto e = t.feed("conv", ptq::as_tensor_view(big));
  REQUIRE_FALSE(e.ok());
  CHECK(e.error().code == ptq::errc::session_input_invalid);
  CHECK(e.error().message ==
        "conv: batch 2 has 64 elements, the layer's first batch had 32; two-pass calibration "
        "(--memory bounded, --mpi) needs batches of one size");
}

TEST_CASE("the order-invariant histogram: any batch order gives the same record",
          "[session][invariant]") {
  const std::string text =
      "batch_num: 3 skip_layers: \"fc\" common_config { arq_quantize { channel_wise: true } "
      "hfmg_quantize { num_of_bins: 1024 asymmetric: true } }";
  const std::vector<xt::xarray<float>> xs = {input({1, 2, 4, 4}, 0), input({1, 2, 4, 4}, 1.5f),
                                             input({2, 2, 4, 4}, 3.0f)};
  ptq::session_options opt;
  opt.activation.pass = ptq::activation_mode::kind::order_invariant;
  const auto run = [&](std::vector<std::size_t> order) {
    auto made = ptq_test::create(cfg(text), two_layers(), opt);
    REQUIRE(made.ok());
    auto s = std::move(made).value();
    REQUIRE(s.quantize_weights().ok());
    for (const auto b : order)
      REQUIRE(s.feed("conv", ptq::as_tensor_view(xs[b])).ok());
    auto rec = s.record();
    REQUIRE(rec.ok());
    return ptq::write_record(rec.value());
  };
  const std::string forward = run({0, 1, 2});
  CHECK(run({2, 1, 0}) == forward);
  CHECK(run({1, 2, 0}) == forward);
  // The toolkit's histogram is another (order-dependent) one.
  auto toolkit = make(text, two_layers());
  REQUIRE(toolkit.quantize_weights().ok());
  for (const auto& x : xs)
    REQUIRE(toolkit.feed("conv", ptq::as_tensor_view(x)).ok());
  CHECK(ptq::write_record(toolkit.record().value()) != forward);

  opt.keep_search_stats = true;
  const auto bad = ptq_test::create(cfg(text), two_layers(), opt);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message ==
        "activation_mode::kind::order_invariant keeps no search statistics: use it without "
        "keep_search_stats");
}

namespace {

/// Finite binary16 values of both signs, about 2^-5 .. 2^5.
std::vector<std::uint16_t> halves(std::size_t n, unsigned salt) {
  std::vector<std::uint16_t> h(n);
  for (std::size_t i = 0; i < n; ++i) {
    const auto k = static_cast<unsigned>(i) * 2654435761U + salt;
    h[i] = static_cast<std::uint16_t>(((k >> 7) & 1U) << 15 | (10U + (k >> 9) % 10U) << 10 |
                                      (k & 0x3FFU));
  }
  return h;
}

/// Their exact float32 values (`bf16`: the same bits read as bfloat16).
std::vector<float> widened(const std::vector<std::uint16_t>& h, bool bf16 = false) {
  std::vector<float> f(h.size());
  for (std::size_t i = 0; i < h.size(); ++i)
    f[i] = bf16 ? ptq::bfloat16_to_float(h[i]) : ptq::half_to_float(h[i]);
  return f;
}

/// `x` ([N, C, H, W] values in C order) laid out as NHWC memory, and the view that reads it as
/// [N, C, H, W].
struct nhwc_batch {
  std::vector<float> memory;
  ptq::tensor_view view;
};
nhwc_batch as_nhwc(const std::vector<float>& x, const std::vector<std::size_t>& shape) {
  const std::size_t n = shape[0], c = shape[1], h = shape[2], w = shape[3];
  nhwc_batch out;
  out.memory.resize(x.size());
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t ch = 0; ch < c; ++ch)
      for (std::size_t y = 0; y < h; ++y)
        for (std::size_t z = 0; z < w; ++z)
          out.memory[((i * h + y) * w + z) * c + ch] = x[((i * c + ch) * h + y) * w + z];
  out.view = ptq::view_of(out.memory.data(), shape, "conv input");
  const auto hwc = static_cast<std::ptrdiff_t>(h * w * c), wc = static_cast<std::ptrdiff_t>(w * c);
  out.view.strides = {hwc, 1, wc, static_cast<std::ptrdiff_t>(c)};
  return out;
}

}  // namespace

TEST_CASE("float16, bfloat16 and strided batches: the records and errors of their float32 values",
          "[session][stored]") {
  const std::vector<std::size_t> shape{2, 2, 5, 5};
  const std::vector<std::vector<std::uint16_t>> batches = {halves(100, 1), halves(100, 7)};
  enum class form { f32, f16, bf16, nhwc };
  // The batches' bits as float16 (or bfloat16) values, fed in the form `how`.
  const auto record = [&](const std::string& text, ptq::session_options opt, form how, bool bf16) {
    auto made = ptq_test::create(cfg(text), two_layers(false), opt);
    REQUIRE(made.ok());
    auto s = std::move(made).value();
    if (!s.dmq_layers().empty()) {
      const auto f = widened(batches[0], bf16);
      REQUIRE(s.feed_dmq("conv", ptq::view_of(f.data(), shape, "conv input")).ok());
    }
    REQUIRE(s.quantize_weights().ok());
    for (std::size_t pass = 0; pass < s.activation_passes(); ++pass) {
      for (const auto& h : batches) {
        const auto f = widened(h, bf16);
        ptq::tensor_view v = ptq::view_of(f.data(), shape, "conv input");
        if (how == form::f16 || how == form::bf16) {
          v.data = h.data();
          v.type = bf16 ? ptq::dtype::bf16 : ptq::dtype::f16;
        }
        const nhwc_batch t = as_nhwc(f, shape);
        REQUIRE(s.feed("conv", how == form::nhwc ? t.view : v).ok());
      }
    }
    auto rec = s.record();
    REQUIRE(rec.ok());
    return ptq::write_record(rec.value());
  };
  const std::string skip = "batch_num: 2 skip_layers: \"fc\" ";
  const std::string hfmg = "common_config { hfmg_quantize { num_of_bins: 1024 } }";
  ptq::session_options bounded, invariant;
  bounded.activation.pass = ptq::activation_mode::kind::bounded;
  invariant.activation.pass = ptq::activation_mode::kind::order_invariant;
  for (const auto& [text, opt] : std::vector<std::pair<std::string, ptq::session_options>>{
           {skip, {}},
           {skip + hfmg, {}},
           {skip + "common_config { dmq_balancer { migration_strength: 0.5 } }", {}},
           {skip, bounded},
           {skip + hfmg, bounded},
           {skip + hfmg, invariant}}) {
    INFO(text << " (mode " << static_cast<int>(opt.activation.pass) << ")");
    const std::string f32 = record(text, opt, form::f32, false);
    CHECK(record(text, opt, form::f16, false) == f32);
    CHECK(record(text, opt, form::nhwc, false) == f32);
    CHECK(record(text, opt, form::bf16, true) == record(text, opt, form::f32, true));
  }

  // float32 at an address that is not a multiple of 4 is read through a copy, the same values.
  const auto f = widened(batches[0]);
  std::string unaligned(1 + 4 * f.size(), '\0');
  std::memcpy(&unaligned[1], f.data(), 4 * f.size());
  auto a = make("batch_num: 1 skip_layers: \"fc\"", two_layers(false));
  auto b = make("batch_num: 1 skip_layers: \"fc\"", two_layers(false));
  REQUIRE(a.quantize_weights().ok());
  REQUIRE(b.quantize_weights().ok());
  ptq::tensor_view odd;
  odd.data = &unaligned[1];
  odd.shape = shape;
  odd.name = "c";
  REQUIRE(a.feed("conv", odd).ok());
  REQUIRE(b.feed("conv", ptq::view_of(f.data(), shape, "c")).ok());
  CHECK(ptq::write_record(a.record().value()) == ptq::write_record(b.record().value()));

  // Errors: NaN at its flat index (C order, whatever the strides), strides that do not fit the
  // shape, no data.
  auto nan = batches[0];
  nan[27] = 0x7E00;
  auto s = make("batch_num: 1 skip_layers: \"fc\"", two_layers(false));
  REQUIRE(s.quantize_weights().ok());
  ptq::tensor_view h16;
  h16.data = nan.data();
  h16.type = ptq::dtype::f16;
  h16.shape = shape;
  auto st = s.feed("conv", h16);
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().code == ptq::errc::non_finite);
  CHECK(st.error().message == "conv input batch 1: NaN at flat index 27");
  auto strided_nan = widened(batches[0]);
  strided_nan[27] = std::nanf("");
  const nhwc_batch t = as_nhwc(strided_nan, shape);
  st = s.feed("conv", t.view);
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().message == "conv input batch 1: NaN at flat index 27");
  ptq::tensor_view bad = t.view;
  bad.strides.pop_back();
  st = s.feed("conv", bad);
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().code == ptq::errc::tensor_view_invalid);
  CHECK(st.error().message ==
        "conv input [2, 2, 5, 5]: 3 strides for a rank-4 shape (one per axis, or none for C "
        "order)");
  h16.data = nullptr;
  h16.name = "c";
  st = s.feed("conv", h16);
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().code == ptq::errc::tensor_view_invalid);
  CHECK(st.error().message == "conv input (c) [2, 2, 5, 5]: no data (null pointer) for 100 values");
}

TEST_CASE(
    "weights in any view: the records of their float32 values; weight_out quantizes them "
    "where they lie",
    "[session][stored]") {
  const std::string text =
      "batch_num: 1 common_config { dmq_balancer { migration_strength: 0.5 } }";
  const auto x = input({2, 2, 5, 5}, 0.5f), xf = input({2, 8}, 0.25f);
  const auto run = [&](std::vector<ptq::layer_desc> layers,
                       std::optional<ptq::calibration_session>* keep) {
    auto made = ptq::calibration_session::create(cfg(text), std::move(layers));
    REQUIRE(made.ok());
    auto s = std::move(made).value();
    REQUIRE(s.feed_dmq("conv", ptq::as_tensor_view(x)).ok());
    REQUIRE(s.feed_dmq("fc", ptq::as_tensor_view(xf)).ok());
    REQUIRE(s.quantize_weights().ok());
    REQUIRE(s.feed("conv", ptq::as_tensor_view(x)).ok());
    REQUIRE(s.feed("fc", ptq::as_tensor_view(xf)).ok());
    const std::string rec = ptq::write_record(s.record().value());
    if (keep != nullptr)
      keep->emplace(std::move(s));
    return rec;
  };
  const auto layers = two_layers();  // conv with a BatchNorm: fused at create
  std::optional<ptq::calibration_session> plain_session;
  const std::string plain = run(ptq_test::descs(layers), &plain_session);

  // The fc weight [3, 8] stored transposed ([8, 3] in memory) and as bfloat16 values that are
  // exactly its float32 values rounded to bfloat16: the record of those float32 values.
  std::vector<float> rounded = ptq_test::values(layers[1].weight);
  std::vector<std::uint16_t> bf(rounded.size());
  for (std::size_t i = 0; i < rounded.size(); ++i) {
    std::uint32_t bits = 0;
    std::memcpy(&bits, &rounded[i], 4);
    bits &= 0xFFFF0000U;
    std::memcpy(&rounded[i], &bits, 4);
    bf[(i % 8) * 3 + i / 8] = static_cast<std::uint16_t>(bits >> 16);  // W[o][c] at c * 3 + o
  }
  auto descs = ptq_test::descs(layers);
  descs[1].weight.data = bf.data();
  descs[1].weight.type = ptq::dtype::bf16;
  descs[1].weight.strides = {1, 3};
  auto same = ptq_test::descs(layers);
  same[1].weight.data = rounded.data();
  CHECK(run(descs, nullptr) == run(same, nullptr));

  // weight_out = the weight's own memory: the engine's buffer holds the fused, balanced,
  // fake-quantized weight, the very values of the session's own buffer, and the record is the same.
  std::vector<float> conv_w = ptq_test::values(layers[0].weight);
  auto in_place = ptq_test::descs(layers);
  in_place[0].weight.data = conv_w.data();
  in_place[0].weight_out = conv_w.data();
  std::optional<ptq::calibration_session> s;
  CHECK(run(in_place, &s) == plain);
  CHECK(s->weight("conv").value().data == conv_w.data());
  CHECK(conv_w == ptq_test::values(plain_session->weight("conv").value()));
  // ... or a buffer of the engine's beside a weight in another layout.
  std::vector<float> out(conv_w.size());
  auto beside = ptq_test::descs(layers);
  beside[0].weight_out = out.data();
  CHECK(run(beside, nullptr) == plain);
  CHECK(out == conv_w);

  // A weight_out that overlaps a weight it is not the float32 C-order memory of is refused at
  // create, and nothing is written.
  std::vector<std::uint16_t> conv_h(conv_w.size() * 2, 0);
  auto overlap = ptq_test::descs(layers);
  overlap[0].weight.data = conv_h.data();
  overlap[0].weight.type = ptq::dtype::f16;
  overlap[0].weight_out = reinterpret_cast<float*>(conv_h.data());
  const auto refused = ptq::calibration_session::create(cfg(text), overlap);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().code == ptq::errc::session_layer_invalid);
  CHECK(refused.error().message ==
        "layer 'conv': conv.weight: the output buffer overlaps the float16 values it is computed "
        "from; it may be their own memory only when they are float32 in C order");
  CHECK(std::all_of(conv_h.begin(), conv_h.end(), [](std::uint16_t v) { return v == 0; }));
  // A failed create changes no weight: conv's fusion waits until every layer's is planned, and
  // conv2's BatchNorm does not fit it (3 values for 4 channels).
  auto three = layers;
  three.push_back(layers[0]);
  three[2].name = "conv2";
  three[2].batch_norm->weight.pop_back();
  std::vector<float> kept = ptq_test::values(layers[0].weight);
  auto failing = ptq_test::descs(three);
  failing[0].weight.data = kept.data();
  failing[0].weight_out = kept.data();
  const auto failed = ptq::calibration_session::create(cfg(text), failing);
  REQUIRE_FALSE(failed.ok());
  CHECK(failed.error().message.find("conv2") != std::string::npos);
  CHECK(kept == ptq_test::values(layers[0].weight));
}
