// AIMET encodings and the AMCT deploy numbers (docs/export.md): hand-derived cases, and every
// AIMET file checked against JSON Schemas written from the spec.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "export_fixtures.hpp"
#include "ptq/export/aimet.hpp"
#include "ptq/export/amct_deploy.hpp"
#include "ptq/export/qdq_table_from_manifest.hpp"

using ptq_test::entry;
using ptq_test::layer;

namespace {

/// Runs check_aimet.py (python3-jsonschema) on `text`; its exit status (0: valid).
int check_aimet(const std::string& version, const std::string& text,
                const std::string& channels = "{}") {
  const std::string path = "check_aimet_" + std::to_string(::getpid()) + ".json";
  {
    std::ofstream out(path, std::ios::binary);
    out << text;
  }
  const std::string dir = PTQ_EXPORT_TEST_DIR;
  const std::string cmd = std::string(PTQ_PYTHON3) + " " + dir + "/check_aimet.py " + dir +
                          "/schemas/aimet-" + version + ".schema.json " + path + " '" + channels +
                          "'";
  const int rc = std::system(cmd.c_str());
  std::remove(path.c_str());
  return rc;
}

ptq::qdq_table sample() {
  ptq::record_file rec;
  rec.records.push_back(entry("conv1", 0.0235294f, -128, {0.00412f, 0.00388f, 0.00501f}));
  rec.records.push_back(entry("conv2", 0.02f, 27, {0.5f, 0.25f, 0.125f}));
  auto fc = entry("fc", 0.05f, 0, {0.01f});
  fc.value.wts_type = "INT4";
  rec.records.push_back(fc);
  ptq::model_manifest m;
  m.layers.push_back(layer("conv1", ptq::layer_type::conv2d, {3, 1, 3, 3}));
  m.layers.push_back(layer("conv2", ptq::layer_type::conv2d, {3, 3, 1, 1}));
  m.layers.push_back(layer("fc", ptq::layer_type::linear, {2, 3}));
  auto t = ptq::make_qdq_table(rec, m);
  REQUIRE(t.ok());
  return t.value();
}

}  // namespace

TEST_CASE("aimet 0.6.1: AIMET's offset sign, min/max on the grid, is_symmetric a string") {
  auto r = ptq::write_aimet_0_6_1(sample());
  REQUIRE(r.ok());
  CHECK(r.warnings().empty());
  const auto j = nlohmann::json::parse(r.value());
  CHECK(j["version"] == "0.6.1");
  const auto& a1 = j["activation_encodings"]["conv1"][0];
  // the worked example (s_d 0.0235294, o_d -128): offset -128 - (-128) = 0, min 0, max 255 * s_d
  CHECK(a1["offset"] == 0);
  CHECK(a1["min"].get<double>() == 0.0);
  CHECK(a1["max"].get<double>() == 255.0 * static_cast<double>(0.0235294f));
  CHECK(static_cast<float>(a1["max"].get<double>()) == 5.9999967f);
  CHECK(a1["scale"].get<double>() == static_cast<double>(0.0235294f));
  CHECK(a1["is_symmetric"] == "False");
  CHECK(a1["bitwidth"] == 8);
  CHECK(a1["dtype"] == "int");
  const auto& a2 = j["activation_encodings"]["conv2"][0];  // offset_d 27: AIMET offset -155
  CHECK(a2["offset"] == -155);
  CHECK(a2["min"].get<double>() == -155.0 * static_cast<double>(0.02f));
  CHECK(a2["max"].get<double>() == 100.0 * static_cast<double>(0.02f));
  CHECK(j["activation_encodings"]["fc"][0]["is_symmetric"] == "True");
  CHECK(j["activation_encodings"]["fc"][0]["offset"] == -128);
  const auto& w1 = j["param_encodings"]["conv1.weight"];
  REQUIRE(w1.size() == 3);
  CHECK(w1[1]["scale"].get<double>() == static_cast<double>(0.00388f));
  CHECK(w1[1]["offset"] == -128);
  CHECK(w1[1]["min"].get<double>() == -128.0 * static_cast<double>(0.00388f));
  CHECK(w1[1]["max"].get<double>() == 127.0 * static_cast<double>(0.00388f));
  CHECK(w1[1]["is_symmetric"] == "True");
  const auto& w3 = j["param_encodings"]["fc.weight"];  // per tensor, 4 bits
  REQUIRE(w3.size() == 1);
  CHECK(w3[0]["bitwidth"] == 4);
  CHECK(w3[0]["offset"] == -8);
  CHECK(w3[0]["max"].get<double>() == 7.0 * static_cast<double>(0.01f));
  CHECK(check_aimet("0.6.1", r.value(), R"({"conv1.weight": 3, "conv2.weight": 3})") == 0);
}

TEST_CASE("aimet 1.0.0: lists of named entries, is_sym a boolean, no min/max") {
  auto r = ptq::write_aimet_1_0_0(sample());
  REQUIRE(r.ok());
  const auto j = nlohmann::json::parse(r.value());
  CHECK(j["version"] == "1.0.0");
  REQUIRE(j["activation_encodings"].size() == 3);
  const auto& a2 = j["activation_encodings"][1];
  CHECK(a2 == nlohmann::json{{"name", "conv2"},
                             {"dtype", "INT"},
                             {"enc_type", "PER_TENSOR"},
                             {"bw", 8},
                             {"is_sym", false},
                             {"scale", nlohmann::json::array({static_cast<double>(0.02f)})},
                             {"offset", nlohmann::json::array({-155})}});
  const auto& w1 = j["param_encodings"][0];
  CHECK(w1["name"] == "conv1.weight");
  CHECK(w1["enc_type"] == "PER_CHANNEL");
  CHECK(w1["is_sym"] == true);
  CHECK(w1["offset"] == nlohmann::json::array({-128, -128, -128}));
  CHECK(j["param_encodings"][2]["enc_type"] == "PER_TENSOR");
  CHECK(j["param_encodings"][2]["bw"] == 4);
  CHECK(check_aimet("1.0.0", r.value(), R"({"conv1.weight": 3})") == 0);
}

TEST_CASE("aimet: the schema checker rejects what breaks the spec's invariants") {
  // a test of the test: each mutation of a valid file must fail check_aimet.py
  auto r = ptq::write_aimet_0_6_1(sample());
  REQUIRE(r.ok());
  auto j = nlohmann::json::parse(r.value());
  auto bad = j;
  bad["activation_encodings"]["conv1"][0]["is_symmetric"] = false;  // a bool, not the string
  CHECK(check_aimet("0.6.1", bad.dump()) != 0);
  bad = j;
  bad["activation_encodings"]["conv2"][0]["offset"] = 155;  // the zero point's sign
  CHECK(check_aimet("0.6.1", bad.dump()) != 0);
  bad = j;
  bad["activation_encodings"]["conv2"][0]["max"] = 2.0;  // off the grid
  CHECK(check_aimet("0.6.1", bad.dump()) != 0);
  CHECK(check_aimet("0.6.1", j.dump(), R"({"conv1.weight": 4})") != 0);
  auto r1 = ptq::write_aimet_1_0_0(sample());
  REQUIRE(r1.ok());
  auto k = nlohmann::json::parse(r1.value());
  k["param_encodings"][0]["enc_type"] = "PER_TENSOR";
  CHECK(check_aimet("1.0.0", k.dump()) != 0);
}

TEST_CASE("aimet: DMQ and FORCE_FP16 are reported, strict makes them errors") {
  ptq::record_file rec;
  auto e = entry("conv1", 0.5f, 0, {0.5f});
  e.value.tensor_balance_factor = {2.0f};
  rec.records.push_back(e);
  auto t = ptq::make_qdq_table(rec);
  REQUIRE(t.ok());
  auto r = ptq::write_aimet_1_0_0(t.value());
  REQUIRE(r.ok());
  REQUIRE(r.warnings().size() == 1);
  CHECK(r.warnings()[0].message ==
        "layer 'conv1': aimet-1.0.0: 1 DMQ factors in [2, 2] are not in the file; the graph needs "
        "Mul(x, 1/b) before the layer and the weight times b along Cin (docs/export.md)");
  ptq::export_options o;
  o.strict = true;
  CHECK_FALSE(ptq::write_aimet_0_6_1(t.value(), o).ok());
}

TEST_CASE("amct deploy: the toolkit's worked example") {
  ptq::record_file rec;
  rec.records.push_back(entry("conv1", 0.0235294f, -128, {0.00412f, 0.00388f, 0.00501f}));
  ptq::model_manifest m;
  auto l = layer("conv1", ptq::layer_type::conv2d, {3, 1, 1, 1});
  l.set_bias({0.5f, -0.25f, 0.013f});
  m.layers.push_back(l);
  auto t = ptq::make_qdq_table(rec, m);
  REQUIRE(t.ok());
  auto n = ptq::amct_deploy_numbers(t.value());
  REQUIRE(n.ok());
  const auto& d = n.value()[0];
  CHECK(d.quant_scale == 42.500023f);
  CHECK(d.quant_offset == -128);
  CHECK(d.dst_type == "INT8");
  CHECK(d.dequant_param == std::vector<std::uint64_t>{0x38cb4cdfu, 0x38bf7521u, 0x38f73792u});
  CHECK(d.bias == std::vector<std::int32_t>{5158, -2738, 110});
  auto r = ptq::write_amct_deploy(t.value());
  REQUIRE(r.ok());
  CHECK(r.value() == R"({
  "format": "amct-deploy",
  "layers": [
    {
      "bias_int32": [
        5158,
        -2738,
        110
      ],
      "dequant": {
        "node": "conv1.dequant",
        "param": [
          952847583,
          952071457,
          955725714
        ],
        "param_hex": [
          "0x0000000038cb4cdf",
          "0x0000000038bf7521",
          "0x0000000038f73792"
        ],
        "scale": [
          9.694113e-05,
          9.129407e-05,
          0.000117882286
        ]
      },
      "name": "conv1",
      "quant": {
        "dst_type": "INT8",
        "node": "conv1.quant",
        "offset": -128,
        "scale": 42.500023
      }
    }
  ],
  "version": 1
}
)");
}

TEST_CASE("amct deploy: ties to even, per-tensor broadcast, FORCE_FP16 s19, DMQ, INT16, pool") {
  ptq::record_file rec;
  auto fc = entry("fc", 0.5f, 3, {0.5f});
  fc.value.act_type = "INT16";
  fc.value.fakequant_precision_mode = "FORCE_FP16_QUANT";
  fc.value.tensor_balance_factor = {4.0f, 0.5f};
  rec.records.push_back(fc);
  rec.records.push_back(entry("pool", 0.25f, -128, {1.0f}));
  ptq::model_manifest m;
  auto l = layer("fc", ptq::layer_type::linear, {3, 2});
  l.set_bias({0.625f, -0.375f, 0.125f});  // / 0.25: 2.5, -1.5, 0.5
  m.layers.push_back(l);
  ptq::manifest_layer p;
  p.desc.name = "pool";
  p.desc.type = ptq::layer_type::avg_pool2d;
  m.layers.push_back(p);
  auto t = ptq::make_qdq_table(rec, m);
  REQUIRE(t.ok());
  auto n = ptq::amct_deploy_numbers(t.value());
  REQUIRE(n.ok());
  const auto& d = n.value()[0];
  CHECK(d.bias == std::vector<std::int32_t>{2, -2, 0});  // numpy's round: ties to even
  CHECK(d.dst_type == "INT16");
  CHECK(d.quant_offset == 3);
  CHECK(d.dequant_scale == std::vector<float>{ptq::truncate_s19(0.25f)});
  CHECK(d.dmq_mul == std::vector<float>{0.25f, 2.0f});
  const auto& q = n.value()[1];
  CHECK(q.dequant_scale == std::vector<float>{0.25f});
  CHECK(q.bias.empty());

  // s19 drops the low 13 mantissa bits: 0.1f * 0.3f = 0x3cf5c290 -> 0x3cf5c000
  ptq::record_file rec2;
  auto c = entry("fc", 0.1f, 0, {0.3f});
  c.value.fakequant_precision_mode = "FORCE_FP16_QUANT";
  rec2.records.push_back(c);
  auto t2 = ptq::make_qdq_table(rec2);
  REQUIRE(t2.ok());
  auto n2 = ptq::amct_deploy_numbers(t2.value());
  REQUIRE(n2.ok());
  CHECK((n2.value()[0].dequant_param[0] & 0x1fffu) == 0);
}

TEST_CASE("amct deploy: an int32 bias overflow is a clear error") {
  ptq::record_file rec;
  rec.records.push_back(entry("conv1", 0.001f, 0, {0.001f}));
  ptq::model_manifest m;
  auto l = layer("conv1", ptq::layer_type::conv2d, {1, 1, 1, 1});
  l.set_bias({1e10f});
  m.layers.push_back(l);
  auto t = ptq::make_qdq_table(rec, m);
  REQUIRE(t.ok());
  auto r = ptq::write_amct_deploy(t.value());
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == ptq::errc::export_bias_overflow);
  CHECK(r.error().message ==
        "layer 'conv1': amct-deploy: bias[0] 1e+10 / (scale_w 0.001 * scale_d 0.001) = 1e+16 does "
        "not fit int32");
}
