// The bundled digits model's golden exports (tests/data/export/digits, written by `ptq
// calibrate --record --export` with examples/configs/quant.cfg) reproduced by the library from
// the golden record, and re-read by the grammar parsers and the AIMET schemas.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "grammar_parsers.hpp"
#include "ptq/export.hpp"
#include "ptq/io/safetensors.hpp"

namespace {

const std::string golden = std::string(PTQ_TEST_DATA_DIR) + "/export/digits/";
const std::string digits = std::string(PTQ_EXAMPLES_DIR) + "/digits/";

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  INFO(path);
  REQUIRE(in);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

struct digits_export {
  ptq::record_file record;
  ptq::model_manifest model;
  ptq::qdq_table table;
};

const digits_export& load() {
  static const digits_export d = [] {
    digits_export out;
    out.record = ptq::value_or_throw(ptq::try_parse_record(slurp(golden + "record.txt")));
    const auto weights =
        ptq::value_or_throw(ptq::io::read_safetensors(digits + "model.safetensors"));
    out.model =
        ptq::value_or_throw(ptq::try_parse_manifest(slurp(digits + "manifest.json"), weights));
    ptq::qdq_options o;  // quant.cfg: do_fusion true, skip_fusion_layers "conv1"
    o.skip_fusion_layers = {"conv1"};
    out.table = ptq::value_or_throw(ptq::make_qdq_table(out.record, out.model, o));
    return out;
  }();
  return d;
}

}  // namespace

TEST_CASE("digits: every format reproduces its golden file") {
  const auto& d = load();
  REQUIRE(d.table.layers.size() == 3);  // pool is skipped by quant.cfg
  const std::map<std::string, std::string> files = {{"trt-cache", "digits.cache"},
                                                    {"ncnn-table", "digits.table"},
                                                    {"aimet-0.6.1", "digits.aimet-0.6.1.json"},
                                                    {"aimet-1.0.0", "digits.aimet-1.0.0.json"},
                                                    {"amct-deploy", "digits.deploy.json"},
                                                    {"qdq-json", "digits.qdq.json"}};
  REQUIRE(ptq::export_formats().size() == files.size());
  ptq::export_options o;
  o.trt_version = "8601";
  for (const auto& f : ptq::export_formats()) {
    INFO(f.name);
    auto r = f.write(d.table, o);
    REQUIRE(r.ok());
    CHECK(r.value() == slurp(golden + files.at(std::string(f.name))));
  }
}

TEST_CASE("digits: the TensorRT cache decodes to each layer's step, x127 = amax") {
  const auto& d = load();
  std::string header;
  const auto steps = ptq_test::parse_trt_cache(slurp(golden + "digits.cache"), header);
  CHECK(header == "TRT-8601-EntropyCalibration2");
  REQUIRE(steps.size() == d.record.records.size());
  for (const auto& e : d.record.records) {
    INFO(e.key);
    const float s = *e.value.scale_d;
    const int o = *e.value.offset_d;
    const float amax = s * static_cast<float>(std::max(128 + o, 127 - o));
    const float decoded = steps.at(e.key) * 127.0f;
    if (o == 0) {
      CHECK(steps.at(e.key) == s);
    } else {
      CHECK(std::fabs(decoded - amax) <= std::nextafter(amax, 1e30f) - amax);
    }
  }
}

TEST_CASE("digits: the ncnn table has num_output weight values and one blob value per layer") {
  const auto& d = load();
  const auto t = ptq_test::parse_ncnn_table(slurp(golden + "digits.table"));
  CHECK(t.weights.size() == 3);
  CHECK(t.blobs.size() == 3);
  for (const auto& l : d.table.layers) {
    INFO(l.name);
    CHECK(t.weights.at(l.name + "_param_0").size() == l.cout);  // groups 1: num_output
    CHECK(t.blobs.count(l.name) == 1);
  }
  CHECK(t.weights.at("conv1_param_0").size() == 16);
  CHECK(t.weights.at("fc_param_0").size() == 10);
}

TEST_CASE("digits: the AIMET files pass the schemas and invariants") {
  const std::string dir = PTQ_EXPORT_TEST_DIR;
  for (const char* v : {"0.6.1", "1.0.0"}) {
    INFO(v);
    const std::string cmd = std::string(PTQ_PYTHON3) + " " + dir + "/check_aimet.py " + dir +
                            "/schemas/aimet-" + v + ".schema.json " + golden + "digits.aimet-" + v +
                            ".json '{\"conv1.weight\": 16, \"conv2.weight\": 32, "
                            "\"fc.weight\": 10}'";
    CHECK(std::system(cmd.c_str()) == 0);
  }
}
