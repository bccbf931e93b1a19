// The `ptq` tool's config subcommands, run as a user would.
#include <catch2/catch.hpp>

#include <cstdio>
#include <string>

#include "../config/helpers.hpp"
#include "../support/run_cli.hpp"

namespace {

ptq_test::cli_result run(const std::string& args) {
  return ptq_test::run_cli(args);
}

std::string data(const std::string& rel) {
  return ptq_test::data_path(rel);
}

}  // namespace

TEST_CASE("ptq resolve reproduces every golden case byte for byte", "[cli]") {
  for (const char* name :
       {"01_precedence", "03_asymmetric_offset_false_common_hfmg", "07_hfmg_vs_ifmr_defaults",
        "09_ada_common_unsupported_types", "11_quant_bits7_common", "13_dmq_common_avgpool",
        "17_channel_wise_common_linear_overridden", "19_int16_override_linear_conv", "25_int4_pack",
        "29_seed_dmq_balancer", "31_seed_quant_hfmg"}) {
    INFO(name);
    const std::string base = data(std::string("resolve-cases/") + name);
    const auto r = run("resolve " + base + ".cfg --layers " + base + ".layers.json");
    CHECK(r.code == 0);
    CHECK(r.out == ptq_test::read_data(std::string("resolve-cases/") + name + ".expected.json"));
  }
}

TEST_CASE("ptq resolve fails with exit 1 where the toolkit fails", "[cli]") {
  for (const char* name :
       {"05_conv3d_override_asymmetric_error", "21_int16_override_linear_nobias_error",
        "23_skip_fusion_linear_error"}) {
    INFO(name);
    const std::string base = data(std::string("resolve-cases/") + name);
    const auto r = run("resolve " + base + ".cfg --layers " + base + ".layers.json");
    CHECK(r.code == 1);
    CHECK(r.out.empty());
    CHECK(r.err.find(".cfg:") != std::string::npos);
    CHECK(r.err.find(": error: ") != std::string::npos);
  }
  const auto r =
      run("resolve " + data("seeds/quant_hfmg.cfg") + " --layers " + data("seeds/quant.cfg"));
  CHECK(r.code == 1);
  CHECK(r.err.find("not valid JSON") != std::string::npos);
}

TEST_CASE("ptq check: exit 0 with a summary, exit 1 with rendered errors", "[cli]") {
  auto r = run("check " + data("seeds/legacy_quant.cfg"));
  CHECK(r.code == 0);
  CHECK(r.out.find("valid: older dialect") != std::string::npos);
  r = run("check " + data("seeds/quant.cfg"));
  CHECK(r.code == 1);
  CHECK(r.err.find("quant.cfg:7:18: error: 'Optype' is not a quantizable layer type [E315]") !=
        std::string::npos);
  CHECK(r.err.find("warning: string literal spans lines") != std::string::npos);
  r = run("check /nonexistent.cfg");
  CHECK(r.code == 1);
  CHECK(r.err.find("ptq check: error: CONFIG: cannot open '/nonexistent.cfg': No such file or "
                   "directory [E1001]") != std::string::npos);
}

TEST_CASE("ptq fmt prints canonical text that checks again", "[cli]") {
  const auto r = run("fmt " + data("resolve-cases/29_seed_dmq_balancer.cfg"));
  REQUIRE(r.code == 0);
  CHECK(r.out.rfind("batch_num: 2\nactivation_offset: true\nskip_layers: \"conv3\"\n", 0) == 0);
  CHECK(ptq::try_parse_config(r.out).ok());
}

TEST_CASE("usage errors exit 2; --help exits 0", "[cli]") {
  CHECK(run("").code == 2);
  CHECK(run("frobnicate").code == 2);
  CHECK(run("check").code == 2);
  CHECK(run("check --bogus x.cfg").code == 2);
  const auto h = run("--help");
  CHECK(h.code == 0);
  CHECK(h.out.find("resolve") != std::string::npos);
  CHECK(h.out.find("Exit codes") != std::string::npos);
  for (const char* sub : {"check", "fmt", "resolve", "demo"}) {
    INFO(sub);
    CHECK(run(std::string(sub) + " --help").code == 0);
  }
}

TEST_CASE("ptq demo resolves every bundled config", "[cli]") {
  const auto r = run("demo " + data("../../examples/configs"));
  CHECK(r.code == 0);
  CHECK(r.out.find("6 of 6 configs resolved") != std::string::npos);
  CHECK(r.out.find("digits_ada.cfg") != std::string::npos);
  CHECK(r.out.find("conv1     Conv2d     yes    arq int6 per-tensor") != std::string::npos);
}
