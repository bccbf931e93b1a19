// `ptq calibrate --report / --report-json`: the outputs of a run are byte-identical with and
// without a report, for the bundled model and from files; the report's values are the run's;
// its skip_layers line parses; report paths are checked and written like every other output.
// (The page in a real browser: test_report_browser.py.)
#include <catch2/catch.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include <nlohmann/json.hpp>

#include "../support/run_cli.hpp"
#include "ptq/config.hpp"

namespace {

namespace fs = std::filesystem;

const std::string ex = PTQ_EXAMPLES_DIR;
const std::string files = " --model " + ex + "/digits/manifest.json --weights " + ex +
                          "/digits/model.safetensors --batches " + ex +
                          "/digits/batch0.safetensors " + ex + "/digits/batch1.safetensors";

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// stdout without the timing line and the report lines.
std::string table_of(const std::string& out) {
  std::string keep;
  std::size_t at = 0;
  while (at < out.size()) {
    const auto end = out.find('\n', at);
    const std::string line = out.substr(at, end == std::string::npos ? end : end - at + 1);
    at = end == std::string::npos ? out.size() : end + 1;
    if (line.rfind("calibrated in", 0) == 0 || line.rfind("report", 0) == 0 ||
        line.rfind("record:", 0) == 0 || line.rfind("quant config:", 0) == 0 ||
        line.rfind("fake-quant weights:", 0) == 0) {
      continue;
    }
    keep += line;
  }
  return keep;
}

/// Runs `args` twice, without and with a report, and checks that every other output is the same.
nlohmann::json same_outputs_with_report(const std::string& args, const std::string& tag) {
  const std::string a = "rep_" + tag + "_a", b = "rep_" + tag + "_b";
  const auto out = [](const std::string& p) {
    return " --record " + p + ".txt --quant-config " + p + ".json --fake-quant-weights " + p +
           ".safetensors";
  };
  const auto r1 = ptq_test::run_cli(args + out(a));
  INFO(r1.err);
  REQUIRE(r1.code == 0);
  const auto r2 =
      ptq_test::run_cli(args + out(b) + " --report " + b + ".html --report-json " + b + ".rj");
  INFO(r2.err);
  REQUIRE(r2.code == 0);
  for (const char* ext : {".txt", ".json", ".safetensors"}) {
    INFO(ext);
    CHECK(slurp(a + ext) == slurp(b + ext));
    CHECK(std::remove((a + ext).c_str()) == 0);
    CHECK(std::remove((b + ext).c_str()) == 0);
  }
  CHECK(table_of(r1.out) == table_of(r2.out));
  CHECK(r1.err == r2.err);
  CHECK(r2.out.find("report:             " + b + ".html\n") != std::string::npos);
  CHECK(r2.out.find("report JSON:        " + b + ".rj\n") != std::string::npos);
  const std::string page = slurp(b + ".html");
  CHECK(page.rfind("<!DOCTYPE html>", 0) == 0);
  CHECK(page.find("http") == std::string::npos);
  auto j = nlohmann::json::parse(slurp(b + ".rj"));
  CHECK(std::remove((b + ".html").c_str()) == 0);
  CHECK(std::remove((b + ".rj").c_str()) == 0);
  return j;
}

template <class V>
std::vector<std::string> names_of(const V& located_names) {
  std::vector<std::string> out;
  for (const auto& n : located_names)
    out.push_back(n.value);
  return out;
}

// The suggestion follows its rule: exactly the layers more than 6 dB below the median score, and
// a config line that the parser reads back to those names (no line when none stands out).
void check_skip_line(const nlohmann::json& j) {
  const auto& sens = j["sensitivity"];
  const std::string line = sens["skip_layers_line"];
  const auto suggested = sens["suggested_skip_layers"].get<std::vector<std::string>>();
  INFO(line);
  std::vector<std::string> below;
  for (const auto& e : sens["ranked"]) {
    if (e["score_db"].get<double>() < sens["median_db"].get<double>() - 6.0)
      below.push_back(e["layer"]);
  }
  CHECK(suggested == below);
  if (suggested.empty()) {
    CHECK(line.empty());
    return;
  }
  const auto c = ptq::try_parse_config("batch_num : 1\n" + line + "\n");
  REQUIRE(c.ok());
  CHECK(names_of(c.value().skip_layers) == suggested);
}

}  // namespace

TEST_CASE("ptq calibrate --report, bundled model: the same outputs, the run's numbers",
          "[calibrate][report]") {
  const auto j = same_outputs_with_report("calibrate --quiet", "bundled");
  CHECK(j["summary"]["fp32_accuracy"].get<double>() == 0.9925925925925926);
  CHECK(j["summary"]["quantized_accuracy"].get<double>() > 0.98);
  CHECK(j["summary"]["batch_num"] == 2);
  REQUIRE(j["layers"].size() == 4);
  CHECK(j["layers"][2]["name"] == "pool");
  CHECK(j["layers"][2]["quant_enable"] == false);  // skip_layers : "pool" in quant.cfg
  CHECK(j["layers"][0]["activation"]["algorithm"] == "ifmr");
  CHECK(j["layers"][0]["activation"]["percentile_start"].is_array());
  CHECK(j["layers"][1]["dmq"] == true);
  CHECK(j["layers"][1]["balance_factors"].size() == 16);
  const std::string method = j["sensitivity"]["method"];
  CHECK(method.find("against the FP32 network: SQNR of the logits on the 64 calibration images") !=
        std::string::npos);
  REQUIRE(j["sensitivity"]["ranked"].size() == 3);
  for (const auto& e : j["sensitivity"]["ranked"])
    CHECK(e["score_db"].get<double>() > 10.0);  // each layer alone barely moves the logits
  check_skip_line(j);
}

TEST_CASE("ptq calibrate --report from files: the same outputs, HFMG search paths",
          "[calibrate][report]") {
  const auto j = same_outputs_with_report(
      "calibrate " + ex + "/configs/quant_hfmg.cfg --quiet" + files, "files");
  CHECK(j["summary"]["fp32_accuracy"].is_null());
  CHECK(j["summary"]["model"] == ex + "/digits/manifest.json");
  CHECK(j["summary"]["activation_sqnr_on"] ==
        "the last calibration batch (" + ex + "/digits/batch1.safetensors)");
  REQUIRE(j["layers"].size() == 4);
  for (const auto& l : j["layers"]) {
    INFO(l["name"]);
    REQUIRE(l["quant_enable"] == true);
    const auto& a = l["activation"];
    CHECK(a["algorithm"] == "hfmg");
    CHECK(a["percentile_start"].is_null());
    CHECK(a["search"]["x_name"] == "step");
    CHECK(a["search"]["loss"].size() == a["search"]["x"].size());
    CHECK(a["search"]["best"].get<std::size_t>() < a["search"]["loss"].size());
    std::int64_t total = 0;
    for (const auto& c : a["histogram"])
      total += c.get<std::int64_t>();
    CHECK(total == a["count"].get<std::int64_t>());
  }
  CHECK(j["sensitivity"]["method"].get<std::string>().rfind("from files, no network runs", 0) == 0);
  check_skip_line(j);
}

TEST_CASE("report paths are outputs: checked first, written all or nothing",
          "[calibrate][report]") {
  auto r = ptq_test::run_cli("calibrate --quiet --record same.txt --report same.txt");
  CHECK(r.code == 1);
  CHECK(r.err ==
        "ptq calibrate: error: --record and --report are the same file 'same.txt'; give each "
        "output its own file [E1101]\n");
  r = ptq_test::run_cli("calibrate --quiet --record rep_ok.txt --report-json no_such_dir/r.json");
  CHECK(r.code == 1);
  CHECK(r.err ==
        "ptq calibrate: error: --report-json 'no_such_dir/r.json': the folder 'no_such_dir' "
        "does not exist [E1102]\n");
  CHECK_FALSE(fs::exists("rep_ok.txt"));
  // The bounded memory mode keeps no search statistics to show.
  r = ptq_test::run_cli(
      "calibrate --quiet --memory bounded --record rep_b.txt --report rep_b.html");
  CHECK(r.code == 2);
  CHECK(r.err == "ptq calibrate: error: --report and --report-json need --memory one-pass\n");
  CHECK_FALSE(fs::exists("rep_b.txt"));
  CHECK_FALSE(fs::exists("rep_b.html"));
  // A report alone is an output option: it is written where asked, and no temporary folder is
  // made for the other outputs.
  r = ptq_test::run_cli("calibrate --quiet --report rep_alone.html");
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(fs::is_regular_file("rep_alone.html"));
  CHECK(r.out.find("outputs go to ") == std::string::npos);
  CHECK(r.out.find("\nreport:             rep_alone.html\n") != std::string::npos);
  CHECK(std::remove("rep_alone.html") == 0);
}

TEST_CASE("ptq calibrate --json lists its layers as the report does", "[calibrate][report]") {
  // One per-layer schema: --json's layers are the report JSON's without the search statistics.
  const auto r = ptq_test::run_cli(
      "calibrate --quiet --json --record json_layers.txt --report-json json_layers.rj");
  INFO(r.err);
  REQUIRE(r.code == 0);
  const auto printed = nlohmann::json::parse(r.out);
  const auto report = nlohmann::json::parse(slurp("json_layers.rj"));
  CHECK(std::remove("json_layers.txt") == 0);
  CHECK(std::remove("json_layers.rj") == 0);
  REQUIRE(printed["layers"].size() == 4);
  REQUIRE(report["layers"].size() == 4);
  for (std::size_t i = 0; i < 4; ++i) {
    auto a = printed["layers"][i], b = report["layers"][i];
    INFO(b["name"]);
    if (b["quant_enable"] == true) {
      CHECK(a["activation"].is_null());
      CHECK(b["activation"].is_object());
      a.erase("activation");
      b.erase("activation");
    }
    CHECK(a == b);
  }
  CHECK(printed["layers"][1]["name"] == "conv2");
  CHECK(printed["layers"][1]["weight_algorithm"] == "arq");
  CHECK(printed["layers"][1]["scale_w"].size() == 32);  // conv2: Cout 32
}
