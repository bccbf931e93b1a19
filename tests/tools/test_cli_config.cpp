// The `ptq` tool's config subcommands, run as a user would.
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
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
  CHECK(r.err ==
        "ptq check: error: CONFIG: cannot open '/nonexistent.cfg': No such file or directory "
        "[E1001]\n");
}

TEST_CASE("ptq check refuses a directory, a device and a file above the limit", "[cli]") {
  auto r = run("check /dev/zero");
  CHECK(r.code == 1);
  CHECK(r.err ==
        "ptq check: error: CONFIG: '/dev/zero' is a character device; a regular file is needed "
        "[E1002]\n");
  CHECK(r.out.empty());
  const std::string dir = ptq_test::data_path("seeds");
  r = run("check " + dir);
  CHECK(r.code == 1);
  CHECK(r.err == "ptq check: error: CONFIG: '" + dir +
                     "' is a directory; a regular file is needed [E1002]\n");
  const std::string big = "ptq_cli_check_big.cfg";
  REQUIRE(std::system(("truncate -s 17M " + big).c_str()) == 0);
  r = run("check " + big);
  CHECK(r.code == 1);
  CHECK(r.err ==
        "ptq check: error: CONFIG: '" + big + "' is 17825792 bytes; the limit is 16 MiB [E1003]\n");
  CHECK(std::remove(big.c_str()) == 0);
  // (--record: a run without outputs would first make its temporary output folder)
  r = run("calibrate " + dir + " --record ptq_cli_dir_record.txt");
  CHECK(r.code == 1);
  CHECK(std::remove("ptq_cli_dir_record.txt") != 0);  // nothing was written
  CHECK(r.err.find("'" + dir + "' is a directory; a regular file is needed [E1002]") !=
        std::string::npos);
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

TEST_CASE("ptq check of a 5 MB one-line file with a NUL prints a bounded, printable error",
          "[cli]") {
  const std::string path = "ptq_cli_test_long_line.cfg";
  {
    std::FILE* f = std::fopen(path.c_str(), "wb");
    REQUIRE(f != nullptr);
    const std::string text = std::string(300, ' ') + '\0' + std::string(std::size_t{5} << 20, 'x');
    REQUIRE(std::fwrite(text.data(), 1, text.size(), f) == text.size());
    std::fclose(f);
  }
  const auto r = run("check " + path);
  std::remove(path.c_str());
  CHECK(r.code == 1);
  CHECK(r.err == path +
                     ":1:301: error: unexpected character '\\x00' [E101]\n"
                     " 1 | ..." +
                     std::string(60, ' ') + "\\x00" + std::string(59, 'x') +
                     "...\n"
                     "   |    " +
                     std::string(60, ' ') + "^~~~\n");
}
