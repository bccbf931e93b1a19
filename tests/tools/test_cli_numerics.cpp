// Every golden numeric case of the reference toolkit (tests/data/numeric-cases, spec README's
// tolerances and `alt` rule) through `ptq observe|weights|balance`, and the CLI's errors.
#include <sys/wait.h>
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "../support/half_npy.hpp"
#include "../support/run_cli.hpp"
#include "ptq/core/fp16.hpp"
#include "ptq/core/tensor_view.hpp"
#include "ptq/io/npy.hpp"

namespace {

namespace fs = std::filesystem;

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

ptq_test::cli_result run_cli(const std::vector<std::string>& args) {
  return ptq_test::run_cli_argv(args);
}

bool rel_close(double got, double want, double rel) {
  return std::fabs(got - want) <= rel * std::max(std::fabs(got), std::fabs(want));
}

const fs::path cases_dir = fs::path(PTQ_TEST_DATA_DIR) / "numeric-cases";

}  // namespace

TEST_CASE("golden numeric cases of the reference toolkit", "[cli][golden]") {
  std::vector<fs::path> dirs;
  for (const auto& e : fs::directory_iterator(cases_dir)) {
    if (e.is_directory())
      dirs.push_back(e.path());
  }
  std::sort(dirs.begin(), dirs.end());
  REQUIRE(dirs.size() == 44);
  int passed = 0;
  for (const auto& d : dirs) {
    const auto c = nlohmann::json::parse(slurp(d / "case.json"));
    std::vector<std::string> args = c.at("args").get<std::vector<std::string>>();
    for (const auto& in : c.at("inputs"))
      args.push_back((d / in.get<std::string>()).string());
    const auto r = run_cli(args);
    INFO(d.filename().string() << "\nstdout: " << r.out << "\nstderr: " << r.err);
    const auto& exp = c.at("expected");
    const auto& tol = c.at("tolerance");
    if (exp.contains("error")) {
      CHECK(r.code == 1);  // an error status, not a signal
      CHECK(r.err.rfind("ptq ", 0) == 0);
      CHECK(r.err.find(": error: ") != std::string::npos);
      ++passed;
      continue;
    }
    REQUIRE(r.code == 0);
    const auto got = nlohmann::json::parse(r.out);
    const std::string algo = c.at("algo");
    if (algo == "ifmr" || algo == "hfmg") {
      std::vector<std::pair<double, long>> accepted{
          {exp.at("scale").get<double>(), exp.at("offset").get<long>()}};
      if (tol.contains("alt")) {
        for (const auto& a : tol.at("alt")) {
          accepted.emplace_back(a.at(0).get<double>(), a.at(1).get<long>());
        }
      }
      const double rel = tol.at("scale_rel");
      const bool ok = std::any_of(accepted.begin(), accepted.end(), [&](const auto& p) {
        return rel_close(got.at("scale").get<double>(), p.first, rel) &&
               got.at("offset").get<long>() == p.second;
      });
      CHECK(ok);
      CHECK(got.contains("clip_min"));
      CHECK(got.contains("clip_max"));
      passed += ok ? 1 : 0;
    } else if (algo == "arq") {
      const auto gs = got.at("scale_w").get<std::vector<double>>();
      const auto ws = exp.at("scale_w").get<std::vector<double>>();
      REQUIRE(gs.size() == ws.size());
      for (std::size_t i = 0; i < gs.size(); ++i)
        CHECK(rel_close(gs[i], ws[i], tol.at("scale_rel")));
      CHECK(got.at("offset_w") == exp.at("offset_w"));
      ++passed;
    } else {
      const auto gf = got.at("tensor_balance_factor").get<std::vector<double>>();
      const auto wf = exp.at("tensor_balance_factor").get<std::vector<double>>();
      REQUIRE(gf.size() == wf.size());
      for (std::size_t i = 0; i < gf.size(); ++i) {
        CHECK(rel_close(gf[i], wf[i], tol.at("factor_rel")));
      }
      ++passed;
    }
  }
  CHECK(passed == 44);
}

TEST_CASE("CLI: printed floats round-trip float32", "[cli]") {
  const auto d = cases_dir / "001_ifmr_normal-1b-asym8";
  const auto r = run_cli(
      {"observe", "--algo", "ifmr", "--max-percentile", "0.9999", (d / "batch0.npy").string()});
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out);
  // the shortest text that reads back to the same float32
  CHECK(r.out.find("\"scale\": 0.000278067,") != std::string::npos);
  CHECK(static_cast<float>(j.at("scale").get<double>()) == 0.00027806698926724494f);
  CHECK(j.at("offset") == -12);
}

TEST_CASE("CLI: errors and usage errors", "[cli]") {
  const fs::path tmp = fs::temp_directory_path();
  // missing file, malformed file -> exit 1 with "ptq <cmd>: error: "
  auto missing = run_cli({"observe", "--algo", "hfmg", (tmp / "no_such_file.npy").string()});
  CHECK(missing.code == 1);
  CHECK(missing.err.rfind("ptq observe: error: ", 0) == 0);
  const fs::path junk = tmp / "ptq_numerics_junk.npy";
  std::ofstream(junk) << "not an npy file";
  auto bad = run_cli({"weights", "--type", "Conv2d", junk.string()});
  CHECK(bad.code == 1);
  CHECK(bad.err.find("ptq weights: error: ") == 0);
  CHECK(bad.err.find("bad magic") != std::string::npos);
  // shape mismatch between activation and weight
  std::vector<float> a(2 * 3 * 4, 1.0f), w(5 * 2 * 3, 0.5f);
  const fs::path an = tmp / "ptq_numerics_act.npy", wn = tmp / "ptq_numerics_w.npy";
  REQUIRE(ptq::io::write_npy(an.string(), a.data(), {2, 3, 4}).ok());
  REQUIRE(ptq::io::write_npy(wn.string(), w.data(), {5, 2, 3}).ok());
  auto mis = run_cli({"balance", "--alpha", "0.5", "--type", "Conv1d", an.string(), wn.string()});
  CHECK(mis.code == 1);
  CHECK(mis.err.find("ptq balance: error: ") == 0);
  CHECK(mis.err.find("input channels") != std::string::npos);
  // usage errors -> exit 2
  CHECK(run_cli({"observe", "--algo", "kl", an.string()}).code == 2);
  CHECK(run_cli({"observe", "--bits", "4", an.string()}).code == 2);
  CHECK(run_cli({"observe"}).code == 2);
  CHECK(run_cli({"weights", "--type", "Bogus", wn.string()}).code == 2);
  CHECK(run_cli({"weights", "--type", "Conv1d", "--channel-wise", "--per-tensor", wn.string()})
            .code == 2);
  CHECK(run_cli({"balance", "--alpha", "0.9", "--type", "Conv1d", an.string(), wn.string()}).code ==
        2);
  // weights: default granularity by type, fake-quant output
  auto def = run_cli({"weights", "--type", "Conv1d", wn.string()});
  REQUIRE(def.code == 0);
  CHECK(nlohmann::json::parse(def.out).at("scale_w").size() == 5);
  const fs::path fq = tmp / "ptq_numerics_fq.npy";
  auto fqr = run_cli({"weights", "--type", "Conv1d", "--fake-quant-out", fq.string(), wn.string()});
  REQUIRE(fqr.code == 0);
  auto back = ptq::io::try_read_npy(fq.string());
  REQUIRE(back.ok());
  CHECK(back.value().data == w);  // 0.5 is exactly on the grid (scale 0.5/127)
  // FORCE_FP16_QUANT scale
  auto fp = run_cli({"observe", "--algo", "hfmg", "--fp16-scale", an.string()});
  REQUIRE(fp.code == 0);
  CHECK(static_cast<float>(nlohmann::json::parse(fp.out).at("scale").get<double>()) ==
        ptq::fp16_scale(1.0f / 255.0f));
  // the candidate rules and the thread count: same printed result for 1 and 3 threads
  const auto inc = run_cli({"observe", "--algo", "ifmr", "--candidates", "inclusive", an.string()});
  CHECK(inc.code == 0);
  const auto d013 = cases_dir / "013_ifmr_fine-step-student-t-1b-asym8" / "batch0.npy";
  const std::vector<std::string> base{
      "observe", "--algo",        "ifmr", "--search-range-start", "0.995", "--search-range-end",
      "1.005",   "--search-step", "2e-05"};
  auto one = base, three = base;
  one.insert(one.end(), {"--threads", "1", d013.string()});
  three.insert(three.end(), {"--threads", "3", d013.string()});
  const auto r1 = run_cli(one), r3 = run_cli(three);
  CHECK(r1.code == 0);
  CHECK(r1.out == r3.out);
  for (const auto& p : {junk, an, wn, fq})
    fs::remove(p);
}

TEST_CASE("CLI: observe --memory bounded prints the one-pass output byte for byte",
          "[cli][golden][two_pass]") {
  int compared = 0;
  for (const auto& e : fs::directory_iterator(cases_dir)) {
    if (!e.is_directory())
      continue;
    const auto c = nlohmann::json::parse(slurp(e.path() / "case.json"));
    std::vector<std::string> args = c.at("args").get<std::vector<std::string>>();
    if (args.at(0) != "observe")
      continue;
    for (const auto& in : c.at("inputs"))
      args.push_back((e.path() / in.get<std::string>()).string());
    const auto one = run_cli(args);
    args.insert(args.begin() + 1, {"--memory", "bounded"});
    const auto two = run_cli(args);
    INFO(e.path().filename().string() << "\n" << one.err << "\n" << two.err);
    CHECK(two.code == one.code);
    CHECK(two.out == one.out);
    CHECK(two.err == one.err);
    ++compared;
  }
  CHECK(compared == 27);
  CHECK(run_cli({"observe", "--memory", "small",
                 (cases_dir / "001_ifmr_normal-1b-asym8" / "batch0.npy").string()})
            .code == 2);
}

TEST_CASE("CLI: observe --order-invariant gives the same output for any batch order",
          "[cli][invariant]") {
  const auto d = cases_dir / "019_hfmg_bimodal-3b-4096bins-asym8";
  const std::string b0 = (d / "batch0.npy").string(), b1 = (d / "batch1.npy").string(),
                    b2 = (d / "batch2.npy").string();
  const auto fwd = run_cli({"observe", "--algo", "hfmg", "--order-invariant", b0, b1, b2});
  INFO(fwd.err);
  REQUIRE(fwd.code == 0);
  CHECK(fwd.out.rfind("{\"scale\": ", 0) == 0);
  CHECK(run_cli({"observe", "--algo", "hfmg", "--order-invariant", b2, b1, b0}).out == fwd.out);
  CHECK(run_cli({"observe", "--algo", "hfmg", "--order-invariant", b1, b2, b0}).out == fwd.out);
  const auto ifmr = run_cli({"observe", "--algo", "ifmr", "--order-invariant", b0});
  CHECK(ifmr.code == 2);
  CHECK(ifmr.err == "ptq observe: error: --order-invariant needs --algo hfmg (and one pass)\n");
}

TEST_CASE("CLI: observe on float16 batches prints what it prints for their float32 values",
          "[cli][float16]") {
  const fs::path tmp = fs::temp_directory_path();
  // Two float16 batches (one over a conversion block), and the same values as float32.
  std::mt19937 rng(7);
  std::vector<std::string> halves, floats;
  for (const std::size_t n : {std::size_t{300000}, std::size_t{4321}}) {
    std::vector<std::uint16_t> h(n);
    for (auto& v : h) {
      do {
        v = static_cast<std::uint16_t>(rng());
      } while (((v >> 10) & 0x1F) == 0x1F || ((v >> 10) & 0x1F) < 10);
    }
    const std::string bytes = ptq_test::half_npy_bytes(h);
    const std::string stem = "ptq_f16_" + std::to_string(n);
    std::ofstream((tmp / (stem + "_h.npy")), std::ios::binary) << bytes;
    std::vector<float> f(n);
    for (std::size_t i = 0; i < n; ++i)
      f[i] = ptq::half_to_float(h[i]);
    REQUIRE(ptq::io::write_npy((tmp / (stem + "_f.npy")).string(), f.data(), {n}).ok());
    halves.push_back((tmp / (stem + "_h.npy")).string());
    floats.push_back((tmp / (stem + "_f.npy")).string());
  }
  for (const std::string algo : {"ifmr", "hfmg"}) {
    for (const std::string memory : {"one-pass", "bounded"}) {
      std::vector<std::string> a{"observe", "--algo", algo, "--memory", memory};
      std::vector<std::string> b = a;
      a.insert(a.end(), halves.begin(), halves.end());
      b.insert(b.end(), floats.begin(), floats.end());
      const auto from_halves = run_cli(a);
      const auto from_floats = run_cli(b);
      INFO(algo << " " << memory << "\n" << from_halves.err);
      CHECK(from_halves.code == 0);
      CHECK(from_halves.out == from_floats.out);
      CHECK(from_halves.out.find("\"scale\"") != std::string::npos);
    }
  }
  // A float16 file cut short names the file and the sizes.
  std::ifstream in(halves[1], std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const fs::path cut = tmp / "ptq_f16_cut.npy";
  std::ofstream(cut, std::ios::binary) << bytes.substr(0, bytes.size() - 3);
  const auto r = run_cli({"observe", "--algo", "hfmg", cut.string()});
  CHECK(r.code == 1);
  CHECK(r.err == "ptq observe: error: " + cut.string() +
                     ": truncated data: expected 8642 bytes, found 8639 [E1011]\n");
}
