#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "export_fixtures.hpp"
#include "ptq/export/qdq_json.hpp"
#include "ptq/export/qdq_table.hpp"
#include "ptq/export/qdq_table_from_manifest.hpp"

using ptq_test::entry;
using ptq_test::layer;

TEST_CASE("qdq table: an asymmetric activation keeps AMCT's offset as the int8 zero point") {
  ptq::record_file rec;
  rec.records.push_back(entry("conv1", 0.02f, 27, {0.5f, 0.25f}));
  ptq::model_manifest m;
  m.layers.push_back(layer("conv1", ptq::layer_type::conv2d, {2, 3, 1, 1}));
  auto t = ptq::make_qdq_table(rec, m);
  REQUIRE(t.ok());
  REQUIRE(t->layers.size() == 1);
  const auto& a = t->layers[0].activation;
  CHECK(a.tensor == "conv1");
  CHECK(a.scale == 0.02f);
  CHECK(a.zero_point == 27);
  CHECK(a.offset_d == 27);
  CHECK(a.dtype == ptq::qdq_dtype::int8);
  CHECK(a.qmin == -128);
  CHECK(a.qmax == 127);
  const auto& w = *t->layers[0].weight;
  CHECK(w.tensor == "conv1.weight");
  CHECK(w.scales == std::vector<float>{0.5f, 0.25f});
  CHECK(w.zero_points == std::vector<std::int32_t>{0, 0});
  CHECK(w.axis == 0);
  CHECK(w.shape == std::vector<std::size_t>{2, 3, 1, 1});
  CHECK(t->layers[0].cout == 2);
  CHECK(t->layers[0].cin == 3);

  ptq::qdq_options u;
  u.unsigned_activations = true;
  auto tu = ptq::make_qdq_table(rec, m, u);
  REQUIRE(tu.ok());
  CHECK(tu->layers[0].activation.dtype == ptq::qdq_dtype::uint8);
  CHECK(tu->layers[0].activation.zero_point == 155);  // 27 + 128
  CHECK(tu->layers[0].activation.qmin == 0);
  CHECK(tu->layers[0].activation.qmax == 255);
}

TEST_CASE("qdq table: the weight axis follows the layer type (spec 4.3)") {
  ptq::record_file rec;
  rec.records.push_back(entry("up", 0.1f, 0, {0.5f, 0.5f, 0.5f, 0.5f}));
  rec.records.push_back(entry("fc", 0.1f, 0, {0.125f}));
  rec.records.push_back(entry("dw", 0.1f, 0, {1.0f, 2.0f, 4.0f}));
  ptq::model_manifest m;
  auto up = layer("up", ptq::layer_type::conv_transpose2d, {2, 2, 3, 3});
  up.desc.conv.groups = 2;  // [Cin, Cout/g, k, k]: Cout = 4
  m.layers.push_back(up);
  m.layers.push_back(layer("fc", ptq::layer_type::linear, {10, 6}));
  auto dw = layer("dw", ptq::layer_type::conv2d, {3, 1, 3, 3});
  dw.desc.conv.groups = 3;
  m.layers.push_back(dw);
  auto t = ptq::make_qdq_table(rec, m);
  REQUIRE(t.ok());
  CHECK(t->layers[0].weight->axis == 1);
  CHECK(t->layers[0].cout == 4);
  CHECK(t->layers[0].cin == 2);
  CHECK(t->layers[1].weight->axis == 0);
  CHECK(t->layers[1].cout == 10);
  CHECK(t->layers[1].cin == 6);
  CHECK(t->layers[2].weight->axis == 0);
  CHECK(t->layers[2].conv.groups == 3);
  CHECK(t->layers[2].cin == 3);
}

TEST_CASE("qdq table: bits, INT16, DMQ and FORCE_FP16 come from the record") {
  ptq::record_file rec;
  auto e = entry("conv1", 0.5f, -300, {0.5f});
  e.value.act_type = "INT16";
  e.value.wts_type = "INT6";
  e.value.tensor_balance_factor = {0.5f, 2.0f, 4.0f};
  e.value.fakequant_precision_mode = "FORCE_FP16_QUANT";
  rec.records.push_back(e);
  auto t = ptq::make_qdq_table(rec);
  REQUIRE(t.ok());
  const auto& l = t->layers[0];
  CHECK(l.activation.bits == 16);
  CHECK(l.activation.dtype == ptq::qdq_dtype::int16);
  CHECK(l.activation.zero_point == -300);
  CHECK(l.activation.qmin == -32768);
  CHECK(l.activation.qmax == 32767);
  CHECK(l.weight->bits == 6);
  CHECK(l.weight->qmin == -32);
  CHECK(l.weight->qmax == 31);
  CHECK(l.dmq_factors == std::vector<float>{0.5f, 2.0f, 4.0f});
  CHECK(l.force_fp16);
  CHECK(l.cout == 0);  // no manifest: unknown
  CHECK(l.weight->tensor == "conv1.weight");
}

TEST_CASE("qdq table: a BatchNorm is fused into the deployed bias unless fusion is off") {
  ptq::record_file rec;
  rec.records.push_back(entry("conv1", 0.1f, 0, {0.5f}));
  ptq::model_manifest m;
  auto l = layer("conv1", ptq::layer_type::conv2d, {1, 1, 1, 1});
  l.set_bias({1.0f});
  ptq::batch_norm_params bn;
  bn.weight = {2.0f};
  bn.bias = {0.5f};
  bn.running_mean = {3.0f};
  bn.running_var = {4.0f};
  bn.eps = 0.0f;
  l.desc.batch_norm = bn;
  m.layers.push_back(l);
  auto t = ptq::make_qdq_table(rec, m);
  REQUIRE(t.ok());
  CHECK(t->layers[0].bias == std::vector<float>{(1.0f - 3.0f) * 0.5f * 2.0f + 0.5f});  // -1.5
  ptq::qdq_options o;
  o.skip_fusion_layers = {"conv1"};
  auto u = ptq::make_qdq_table(rec, m, o);
  REQUIRE(u.ok());
  CHECK(u->layers[0].bias == std::vector<float>{1.0f});
}

TEST_CASE("qdq table: an AvgPool2d layer has an activation and no weight") {
  ptq::record_file rec;
  rec.records.push_back(entry("pool", 0.1f, -128, {1.0f}));
  ptq::model_manifest m;
  ptq::manifest_layer p;
  p.desc.name = "pool";
  p.desc.type = ptq::layer_type::avg_pool2d;
  m.layers.push_back(p);
  auto t = ptq::make_qdq_table(rec, m);
  REQUIRE(t.ok());
  CHECK_FALSE(t->layers[0].weight.has_value());
  CHECK(t->layers[0].activation.zero_point == -128);
}

TEST_CASE("qdq table: mismatching inputs are clear errors") {
  ptq::model_manifest m;
  m.layers.push_back(layer("conv1", ptq::layer_type::conv2d, {2, 3, 1, 1}));
  m.layers.push_back(layer("fc", ptq::layer_type::linear, {4, 2}));
  SECTION("a record layer the manifest lacks") {
    ptq::record_file rec;
    rec.records.push_back(entry("conv9", 0.1f, 0, {0.5f}));
    auto t = ptq::make_qdq_table(rec, m);
    REQUIRE_FALSE(t.ok());
    CHECK(t.error().code == ptq::errc::export_layer_unknown);
    CHECK(t.error().message == "record layer 'conv9' is not in the model manifest");
    CHECK(t.error().note == "the manifest's layers are conv1, fc");
  }
  SECTION("a non-finite scale") {
    ptq::record_file rec;
    rec.records.push_back(entry("conv1", 0.1f, 0, {0.5f, std::numeric_limits<float>::infinity()}));
    auto t = ptq::make_qdq_table(rec, m);
    REQUIRE_FALSE(t.ok());
    CHECK(t.error().code == ptq::errc::export_value_invalid);
    CHECK(t.error().message == "layer 'conv1': scale_w[1] inf is not finite and positive");
  }
  SECTION("a NaN scale_d") {
    ptq::record_file rec;
    rec.records.push_back(entry("conv1", std::nanf(""), 0, {0.5f}));
    auto t = ptq::make_qdq_table(rec);
    REQUIRE_FALSE(t.ok());
    CHECK(t.error().message == "layer 'conv1': scale_d nan is not finite and positive");
  }
  SECTION("a Cout that does not match the weight") {
    ptq::record_file rec;
    rec.records.push_back(entry("conv1", 0.1f, 0, {0.5f, 0.5f, 0.5f}));
    auto t = ptq::make_qdq_table(rec, m);
    REQUIRE_FALSE(t.ok());
    CHECK(t.error().code == ptq::errc::export_shape_mismatch);
    CHECK(t.error().message ==
          "layer 'conv1': 3 scale_w, but the weight 'conv1.weight' has Cout = 2 (expected 1 or 2)");
  }
  SECTION("DMQ factors that do not match Cin") {
    ptq::record_file rec;
    auto e = entry("fc", 0.1f, 0, {0.5f});
    e.value.tensor_balance_factor = {1.0f, 1.0f, 1.0f};
    rec.records.push_back(e);
    auto t = ptq::make_qdq_table(rec, m);
    REQUIRE_FALSE(t.ok());
    CHECK(t.error().message ==
          "layer 'fc': 3 tensor_balance_factor, but the weight 'fc.weight' has Cin = 2");
  }
  SECTION("an offset outside the activation's bits") {
    ptq::record_file rec;
    rec.records.push_back(entry("fc", 0.1f, 128, {0.5f}));
    auto t = ptq::make_qdq_table(rec, m);
    REQUIRE_FALSE(t.ok());
    CHECK(t.error().message == "layer 'fc': offset_d 128 is outside [-128, 127] for 8 bits");
  }
}

TEST_CASE("qdq json: every number under the manifest's names, floats round-trip") {
  ptq::record_file rec;
  auto e = entry("conv1", 0.1f, -5, {0.3f, 0.7f});
  e.value.tensor_balance_factor = {2.0f, 0.5f, 1.0f};
  rec.records.push_back(e);
  ptq::model_manifest m;
  m.layers.push_back(layer("conv1", ptq::layer_type::conv2d, {2, 3, 1, 1}));
  auto t = ptq::make_qdq_table(rec, m);
  REQUIRE(t.ok());
  CHECK(ptq::to_json(t.value()).dump() ==
        R"({"format":"ptq-qdq","layers":[{"activation":{"bits":8,"dtype":"int8","offset_d":-5,)"
        R"("qmax":127,"qmin":-128,"scale":0.1,"tensor":"conv1","zero_point":-5},"cin":3,)"
        R"("cout":2,"dmq_factors":[2.0,0.5,1.0],"force_fp16":false,"groups":1,"name":"conv1",)"
        R"("type":"Conv2d","weight":{"axis":0,"bits":8,"dtype":"int8","qmax":127,"qmin":-128,)"
        R"("scales":[0.3,0.7],"shape":[2,3,1,1],"tensor":"conv1.weight","zero_points":[0,0]}}],)"
        R"("version":1})");
}
