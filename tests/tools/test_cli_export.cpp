// `ptq export` and `ptq calibrate --export`, run as a user would: the digits golden files of
// every format (tests/data/export/digits), and wrong inputs with their exact messages.
#include <catch2/catch.hpp>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "../support/run_cli.hpp"

namespace {

const std::string ex = PTQ_EXAMPLES_DIR;
const std::string golden = std::string(PTQ_TEST_DATA_DIR) + "/export/digits/";
const std::string model =
    " --model " + ex + "/digits/manifest.json --weights " + ex + "/digits/model.safetensors";

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  INFO(path);
  REQUIRE(in);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

bool exists(const std::string& path) {
  return std::ifstream(path).good();
}

struct format_file {
  const char* format;  ///< --format, with the trt-cache version for --export
  const char* golden;  ///< file name in tests/data/export/digits
};

const std::vector<format_file> formats = {{"trt-cache", "digits.cache"},
                                          {"ncnn-table", "digits.table"},
                                          {"aimet-0.6.1", "digits.aimet-0.6.1.json"},
                                          {"aimet-1.0.0", "digits.aimet-1.0.0.json"},
                                          {"amct-deploy", "digits.deploy.json"},
                                          {"qdq-json", "digits.qdq.json"}};

/// A lossy conversion of the digits record: fc's input (after a ReLU) is asymmetric.
const std::string digits_trt_warning =
    "ptq export: warning: layer 'fc': trt-cache: asymmetric activation (offset_d -128) on the "
    "symmetric int8 grid: step 0.0105363 is 2.00787x scale_d 0.00524747 (1.01 bits lost) "
    "[W1220]\n";
/// The config the golden record was calibrated with (conv1 keeps its BatchNorm apart).
const std::string config = " --config " + ex + "/configs/quant.cfg";

}  // namespace

TEST_CASE("ptq calibrate --export writes every format; ptq export gives the same files",
          "[export]") {
  std::string args = "calibrate --quiet --record exp_record.txt";
  for (const auto& f : formats) {
    const std::string fmt =
        std::string(f.format) == "trt-cache" ? "trt-cache:8601" : std::string(f.format);
    args += " --export " + fmt + "=exp_" + f.golden;
  }
  const auto r = ptq_test::run_cli(args);
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(slurp("exp_record.txt") == slurp(golden + "record.txt"));
  for (const auto& f : formats) {
    INFO(f.format);
    CHECK(slurp(std::string("exp_") + f.golden) == slurp(golden + f.golden));
    std::remove((std::string("exp_") + f.golden).c_str());
  }
  std::remove("exp_record.txt");
  CHECK(r.err.find("ptq calibrate: warning: layer 'fc': trt-cache: asymmetric activation") !=
        std::string::npos);

  for (const auto& f : formats) {
    INFO(f.format);
    const std::string out = std::string("exp2_") + f.golden;
    const auto e =
        ptq_test::run_cli("export --format " + std::string(f.format) + " --record " + golden +
                          "record.txt" + model + config + " -o " + out + " --trt-version 8601");
    INFO(e.err);
    CHECK(e.code == 0);
    CHECK(e.out.empty());
    CHECK(slurp(out) == slurp(golden + f.golden));
    std::remove(out.c_str());
  }
}

TEST_CASE("ptq export: lossy conversions are per-layer warnings, errors with --strict",
          "[export]") {
  const std::string args = "export --format trt-cache --trt-version 8601 --record " + golden +
                           "record.txt" + model + " -o exp_strict.cache";
  const auto w = ptq_test::run_cli(args);
  REQUIRE(w.code == 0);
  CHECK(w.err.find(digits_trt_warning) != std::string::npos);
  std::remove("exp_strict.cache");
  const auto s = ptq_test::run_cli(args + " --strict");
  CHECK(s.code == 1);
  CHECK(s.err.find("ptq export: error: layer 'fc': trt-cache: asymmetric activation") !=
        std::string::npos);
  CHECK(s.err.find("[E1220]") != std::string::npos);
  CHECK_FALSE(exists("exp_strict.cache"));  // nothing written
}

TEST_CASE("ptq export: without --config the fused bias is an announced assumption", "[export]") {
  const std::string args = "export --format amct-deploy --record " + golden + "record.txt" + model;
  const auto r = ptq_test::run_cli(args + " -o exp_deploy.json");
  REQUIRE(r.code == 0);
  CHECK(r.err ==
        "ptq export: warning: layers conv1, conv2 have a BatchNorm: the bias written is the fused "
        "one (do_fusion: true); give the calibration's CONFIG with --config if it kept a "
        "BatchNorm apart [W1220]\n");
  CHECK(slurp("exp_deploy.json") != slurp(golden + "digits.deploy.json"));  // conv1's bias
  std::remove("exp_deploy.json");
  const auto s = ptq_test::run_cli(args + " --strict -o exp_deploy.json");
  CHECK(s.code == 1);
  CHECK_FALSE(exists("exp_deploy.json"));
}

TEST_CASE("ptq export: wrong inputs are clear errors and write nothing", "[export]") {
  SECTION("a missing record") {
    const auto r =
        ptq_test::run_cli("export --format qdq-json --record no_such_record.txt -o x.json");
    CHECK(r.code == 1);
    CHECK(r.err ==
          "ptq export: error: --record: cannot open 'no_such_record.txt': No such file or "
          "directory [E1001]\n");
    CHECK_FALSE(exists("x.json"));
  }
  SECTION("a missing weights file") {
    const auto r =
        ptq_test::run_cli("export --format qdq-json --record " + golden + "record.txt --model " +
                          ex + "/digits/manifest.json --weights nope.safetensors -o x.json");
    CHECK(r.code == 1);
    CHECK(r.err ==
          "ptq export: error: --weights: cannot open 'nope.safetensors': No such file or "
          "directory [E1001]\n");
  }
  SECTION("a record layer the model does not have") {
    {
      std::ofstream rec("exp_bad_record.txt");
      rec << "record {\n  key: \"conv9\"\n  value {\n    scale_d: 0.5\n    offset_d: 0\n"
             "    scale_w: 0.25\n    offset_w: 0\n  }\n}\n";
    }
    const auto r = ptq_test::run_cli("export --format aimet-0.6.1 --record exp_bad_record.txt" +
                                     model + " -o x.json");
    CHECK(r.code == 1);
    CHECK(r.err ==
          "ptq export: error: record layer 'conv9' is not in the model manifest [E1201]\n"
          "note: the manifest's layers are conv1, conv2, pool, fc\n");
    CHECK_FALSE(exists("x.json"));
    std::remove("exp_bad_record.txt");
  }
  SECTION("a Cout that does not match the weights") {
    {
      std::ofstream rec("exp_bad_record.txt");
      rec << "record {\n  key: \"conv1\"\n  value {\n    scale_d: 0.5\n    offset_d: 0\n"
             "    scale_w: 0.25\n    scale_w: 0.25\n    offset_w: 0\n    offset_w: 0\n  }\n}\n";
    }
    const auto r = ptq_test::run_cli("export --format qdq-json --record exp_bad_record.txt" +
                                     model + " -o x.json");
    CHECK(r.code == 1);
    CHECK(r.err ==
          "ptq export: error: layer 'conv1': 2 scale_w, but the weight 'conv1.weight' has Cout = "
          "16 (expected 1 or 16) [E1203]\n");
    std::remove("exp_bad_record.txt");
  }
  SECTION("a record that does not parse") {
    {
      std::ofstream rec("exp_bad_record.txt");
      rec << "record {\n  key: \"conv1\"\n  value {\n    scale_d: -1\n    offset_d: 0\n  }\n}\n";
    }
    const auto r =
        ptq_test::run_cli("export --format qdq-json --record exp_bad_record.txt -o x.json");
    CHECK(r.code == 1);
    CHECK(r.err.rfind("exp_bad_record.txt:1:1: error: record 'conv1': scale_d must be finite "
                      "and greater than 0 [E701]\n",
                      0) == 0);
    std::remove("exp_bad_record.txt");
  }
  SECTION("a bad format name") {
    const auto r =
        ptq_test::run_cli("export --format trt --record " + golden + "record.txt -o x.json");
    CHECK(r.code == 2);
    CHECK(r.err ==
          "ptq export: error: unknown format 'trt' [E1207]\nnote: the formats are trt-cache, "
          "ncnn-table, aimet-0.6.1, aimet-1.0.0, amct-deploy, qdq-json, onnx-qdq, onnx\n");
  }
  SECTION("ncnn-table without the model") {
    const auto r = ptq_test::run_cli("export --format ncnn-table --record " + golden +
                                     "record.txt -o x.table");
    CHECK(r.code == 1);
    CHECK(r.err ==
          "ptq export: error: ncnn-table needs the layer types and output-channel counts; give "
          "--model and --weights [E1206]\n");
  }
  SECTION("--onnx without the model, before any file is read") {
    const auto r =
        ptq_test::run_cli("export --format qdq-json --record no_such_record.txt --onnx " + ex +
                          "/digits/model.onnx -o x.json");
    CHECK(r.code == 1);
    CHECK(r.err ==
          "ptq export: error: --onnx needs --model and --weights: the manifest's weight names "
          "find each layer's node [E1206]\n");
  }
  SECTION("trt-cache without its version") {
    const auto r =
        ptq_test::run_cli("export --format trt-cache --record " + golden + "record.txt -o x.cache");
    CHECK(r.code == 1);
    CHECK(r.err ==
          "ptq export: error: trt-cache needs the TensorRT version as the decimal number TensorRT "
          "prints in the cache header (8601 for 8.6.1, 100300 for 10.3.0), got '' [E1208]\n");
    CHECK_FALSE(exists("x.cache"));
  }
  SECTION("--model without --weights") {
    const auto r =
        ptq_test::run_cli("export --format qdq-json --record " + golden + "record.txt --model " +
                          ex + "/digits/manifest.json -o x.json");
    CHECK(r.code == 2);
    CHECK(r.err ==
          "ptq export: error: --model and --weights go together (the manifest names tensors of "
          "the weights file)\n");
  }
  SECTION("the output overwrites an input") {
    const auto r = ptq_test::run_cli("export --format qdq-json --record " + golden +
                                     "record.txt -o " + golden + "record.txt");
    CHECK(r.code == 1);
    CHECK(r.err.find("[E1101]") != std::string::npos);
  }
}

TEST_CASE("ptq calibrate --export: a bad value is a usage error before any work", "[export]") {
  auto r = ptq_test::run_cli("calibrate --quiet --export trt=x.cache");
  CHECK(r.code == 2);
  CHECK(r.err.find("unknown format 'trt'") != std::string::npos);
  r = ptq_test::run_cli("calibrate --quiet --export aimet-0.6.1");
  CHECK(r.code == 2);
  CHECK(r.err.find("--export 'aimet-0.6.1' must be FORMAT=OUT, e.g. aimet-0.6.1=enc.json") !=
        std::string::npos);
  r = ptq_test::run_cli("calibrate --quiet --record exp_r.txt --export trt-cache=exp_r.cache");
  CHECK(r.code == 2);
  CHECK(r.err.find("--export 'trt-cache=exp_r.cache': trt-cache needs the TensorRT version, "
                   "trt-cache:VERSION=OUT (8601 for 8.6.1, 100300 for 10.3.0)") !=
        std::string::npos);
  CHECK_FALSE(exists("exp_r.txt"));
  CHECK_FALSE(exists("exp_r.cache"));
  r = ptq_test::run_cli("calibrate --quiet --export onnx-qdq=exp_q.onnx");
  CHECK(r.code == 2);
  CHECK(r.err.find("--export 'onnx-qdq=exp_q.onnx': onnx-qdq rewrites the float ONNX model of "
                   "your model; give it with --onnx MODEL.onnx") != std::string::npos);
  r = ptq_test::run_cli("calibrate --quiet --onnx model.onnx");
  CHECK(r.code == 2);
  CHECK(r.err.find("--onnx is read by --export only: add --export FORMAT=OUT") !=
        std::string::npos);
  r = ptq_test::run_cli("calibrate --quiet --export onnx-qdq:tvm=exp_q.onnx");
  CHECK(r.code == 2);
  CHECK(r.err.find("the engines of onnx-qdq are onnxruntime and tensorrt") != std::string::npos);
}
