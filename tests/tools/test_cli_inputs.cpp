// `ptq` given bad inputs and outputs, and interrupted: each a clear error naming what and where
// (exact message and exit code), and nothing lost or left behind.
#include <catch2/catch.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "../support/run_cli.hpp"
#include "ptq/io/safetensors.hpp"

#ifdef PTQ_CLI_PATH
namespace {

namespace fs = std::filesystem;

const std::string ex = PTQ_EXAMPLES_DIR;
const std::string files = " --model " + ex + "/digits/manifest.json --weights " + ex +
                          "/digits/model.safetensors --batches " + ex +
                          "/digits/batch0.safetensors " + ex + "/digits/batch1.safetensors";

void write(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// A fresh empty folder under the working directory.
std::string fresh_dir(const std::string& name) {
  fs::remove_all(name);
  fs::create_directories(name);
  return name;
}

std::size_t entries(const std::string& dir) {
  std::size_t n = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    (void)e;
    ++n;
  }
  return n;
}

// A long AdaRound on the bundled model; the shell waits for its first progress line, then acts.
std::string long_ada_then(const std::string& args, const std::string& action) {
  write("long_ada.cfg",
        "batch_num: 2\ncommon_config { ada_quantize { num_iteration: 2000000 } }\n");
  return "bash -c 'err=long_ada_err.txt; " + std::string(PTQ_CLI_PATH) + " calibrate " + args +
         " >/dev/null 2>$err & pid=$!; for i in $(seq 1200); do grep -q \"ada conv\" $err && "
         "break; sleep 0.05; done; " +
         action + "; wait $pid; echo rc=$?; cat $err >&2'";
}

}  // namespace

TEST_CASE("a directory or a device as an input file is an error naming it", "[cli][inputs]") {
  fresh_dir("cfg_dir");
  auto r = ptq_test::run_cli("check cfg_dir");
  CHECK(r.code == 1);
  CHECK(r.err ==
        "ptq check: error: CONFIG: 'cfg_dir' is a directory; a regular file is needed [E1002]\n");
  r = ptq_test::run_cli("calibrate cfg_dir --quiet");
  CHECK(r.code == 1);
  CHECK(r.out.empty());  // refused before the outputs folder is made
  CHECK(
      r.err ==
      "ptq calibrate: error: CONFIG: 'cfg_dir' is a directory; a regular file is needed [E1002]\n");
  r = ptq_test::run_cli("calibrate cfg_dir" + files + " --quiet");
  CHECK(r.code == 1);
  CHECK(
      r.err ==
      "ptq calibrate: error: CONFIG: 'cfg_dir' is a directory; a regular file is needed [E1002]\n");
  r = ptq_test::run_cli("calibrate " + ex + "/configs/quant_hfmg.cfg --model " + ex +
                        "/digits/manifest.json --weights cfg_dir --batches " + ex +
                        "/digits/batch0.safetensors --quiet");
  CHECK(r.code == 1);
  CHECK(r.err ==
        "ptq calibrate: error: --weights: 'cfg_dir' is a directory; a regular file is needed "
        "[E1002]\n");
  r = ptq_test::run_cli("resolve " + ex + "/configs/quant.cfg --layers cfg_dir");
  CHECK(r.code == 1);
  CHECK(
      r.err ==
      "ptq resolve: error: --layers: 'cfg_dir' is a directory; a regular file is needed [E1002]\n");
  fs::remove_all("cfg_dir");
  // Reading is bounded: /dev/zero never ends, and is refused at the limit.
  r = ptq_test::run_cli("check /dev/zero");
  CHECK(r.code == 1);
  CHECK(r.err ==
        "ptq check: error: CONFIG: '/dev/zero' is a character device; a regular file is needed "
        "[E1002]\n");
  r = ptq_test::run_cli("observe /dev/zero");
  CHECK(r.code != 0);
  r = ptq_test::run_cli("calibrate " + ex + "/configs/quant_hfmg.cfg --model " + ex +
                        "/digits/manifest.json --weights /dev/zero --batches " + ex +
                        "/digits/batch0.safetensors --quiet");
  CHECK(r.code == 1);
  CHECK(r.err ==
        "ptq calibrate: error: --weights: '/dev/zero' is a character device; a regular "
        "file is needed [E1002]\n");
}

TEST_CASE("an unknown command is named", "[cli]") {
  const auto r = ptq_test::run_cli("bogus");
  CHECK(r.code == 2);
  CHECK(
      r.err.rfind("ptq: error: unknown command 'bogus' [E1105]\nnote: the commands are calibrate, "
                  "check, ",
                  0) == 0);
}

TEST_CASE("outputs that overwrite an input or each other are refused before any work",
          "[cli][outputs]") {
  const std::string cfg = " " + ex + "/configs/quant_hfmg.cfg";
  auto r = ptq_test::run_cli("calibrate" + cfg + files + " --fake-quant-weights " + ex +
                             "/digits/../digits/model.safetensors --quiet");
  CHECK(r.code == 1);
  CHECK(r.err == "ptq calibrate: error: --fake-quant-weights '" + ex +
                     "/digits/../digits/model.safetensors' is the same file as --weights '" + ex +
                     "/digits/model.safetensors'; an output must not overwrite an input "
                     "[E1101]\n");
  r = ptq_test::run_cli("calibrate" + cfg + files + " --record same.txt --quant-config ./same.txt");
  CHECK(r.code == 1);
  CHECK(r.err ==
        "ptq calibrate: error: --record and --quant-config are the same file "
        "'./same.txt'; give each output its own file [E1101]\n");
  CHECK_FALSE(fs::exists("same.txt"));
  // A symlink to an input is the input.
  fs::remove("link.safetensors");
  fs::create_symlink(ex + "/digits/model.safetensors", "link.safetensors");
  r = ptq_test::run_cli("calibrate" + cfg + files + " --record link.safetensors");
  CHECK(r.code == 1);
  CHECK(r.err.find("--record 'link.safetensors' is the same file as --weights") !=
        std::string::npos);
  fs::remove("link.safetensors");
  // The bundled run checks against the bundled files too.
  r = ptq_test::run_cli("calibrate --record " + ex + "/configs/quant.cfg");
  CHECK(r.code == 1);
  CHECK(r.err.find("--record '" + ex + "/configs/quant.cfg' is the same file as CONFIG") !=
        std::string::npos);
}

TEST_CASE("output paths are checked before calibration starts", "[cli][outputs]") {
  const std::string base = "calibrate " + ex + "/configs/quant_hfmg.cfg" + files + " --quiet";
  auto r = ptq_test::run_cli(base + " --record no_such_dir/r.txt");
  CHECK(r.code == 1);
  CHECK(r.err ==
        "ptq calibrate: error: --record 'no_such_dir/r.txt': the folder 'no_such_dir' "
        "does not exist [E1102]\n");
  fresh_dir("out_dir");
  r = ptq_test::run_cli(base + " --quant-config out_dir");
  CHECK(r.code == 1);
  CHECK(r.err ==
        "ptq calibrate: error: --quant-config 'out_dir': is a folder; give the file to "
        "write [E1102]\n");
  r = ptq_test::run_cli(base + " --record /proc/ptq_record.txt");
  CHECK(r.code == 1);
  CHECK(r.err.rfind("ptq calibrate: error: --record '/proc/ptq_record.txt': cannot create a file "
                    "in '/proc': ",
                    0) == 0);
  CHECK(entries("out_dir") == 0);
  fs::remove_all("out_dir");
}

TEST_CASE("errors keep their context: the weights file and tensor, the batch file",
          "[cli][inputs]") {
  std::string err;
  REQUIRE(ptq::io::write_safetensors("w_rank3.safetensors",
                                     {{"fc.weight", {4, 3, 2}, std::vector<float>(24, 0.1f)}})
              .ok());
  REQUIRE(ptq::io::write_safetensors("w_fc.safetensors",
                                     {{"fc.weight", {4, 3}, std::vector<float>(12, 0.1f)}})
              .ok());
  REQUIRE(ptq::io::write_safetensors("x_fc5.safetensors",
                                     {{"fc", {2, 5}, std::vector<float>(10, 0.5f)}})
              .ok());
  write("fc.json", R"({"layers":[{"name":"fc","type":"Linear","weight":"fc.weight"}]})");
  write("b1.cfg", "batch_num: 1\n");
  write("dmq.cfg", "batch_num: 1\ncommon_config { dmq_balancer { migration_strength: 0.5 } }\n");
  auto r = ptq_test::run_cli(
      "calibrate b1.cfg --model fc.json --weights w_rank3.safetensors --batches "
      "x_fc5.safetensors --quiet");
  CHECK(r.code == 1);
  CHECK(r.err ==
        "w_rank3.safetensors: error: layer 'fc': fc.weight: a Linear weight has rank 2, "
        "got shape [4, 3, 2] [E801]\nnote: the layer's weight is tensor 'fc.weight' "
        "(names from the manifest)\n");
  r = ptq_test::run_cli(
      "calibrate dmq.cfg --model fc.json --weights w_fc.safetensors --batches x_fc5.safetensors "
      "--quiet");
  CHECK(r.code == 1);
  CHECK(r.err.rfind("x_fc5.safetensors: error: ", 0) == 0);  // the DMQ batch names its file
  CHECK(r.err.find("5 input channels") != std::string::npos);
  r = ptq_test::run_cli(
      "calibrate b1.cfg --model fc.json --weights w_fc.safetensors --batches x_fc5.safetensors "
      "--quiet");
  CHECK(r.code == 1);
  CHECK(r.err ==
        "x_fc5.safetensors: error: fc input [2, 5]: has 5 input channels (axis -1); the "
        "layer takes 3 [E803]\n");
  for (const char* f : {"w_rank3.safetensors", "w_fc.safetensors", "x_fc5.safetensors", "fc.json",
                        "b1.cfg", "dmq.cfg"}) {
    CHECK(std::remove(f) == 0);
  }
}

TEST_CASE("CONFIG alone calibrates the bundled model, and --help says so", "[cli]") {
  const auto h = ptq_test::run_cli("calibrate --help");
  CHECK(h.code == 0);
  CHECK(h.out.find("ptq calibrate CONFIG                 the bundled digits model with CONFIG") !=
        std::string::npos);
  CHECK(h.out.find("it does not calibrate your model") != std::string::npos);
  CHECK(h.out.find("share/ptq/") != std::string::npos);  // where the bundled data is looked for
  const auto r = ptq_test::run_cli("calibrate " + ex +
                                   "/configs/quant_hfmg.cfg --json --quiet "
                                   "--record bundled_hfmg.txt");
  CHECK(r.code == 0);
  CHECK(std::remove("bundled_hfmg.txt") == 0);
}

TEST_CASE("progress does not call a layer in skip_fusion_layers fused", "[cli]") {
  write("skip_fusion.cfg", "batch_num: 2\nskip_fusion_layers: \"conv1\"\n");
  const auto r = ptq_test::run_cli("calibrate skip_fusion.cfg" + files);
  CHECK(r.code == 0);
  CHECK(r.err.find("fusion 1/2 conv1") == std::string::npos);
  CHECK(r.err.find("fusion 1/1 conv1") == std::string::npos);
  CHECK(r.err.find("ptq calibrate: fusion 1/1 conv2\n") != std::string::npos);
  CHECK(std::remove("skip_fusion.cfg") == 0);
}

TEST_CASE("SIGINT and SIGTERM during AdaRound leave no files and no empty folder",
          "[cli][outputs][slow]") {
  const std::string tmp = fs::absolute(fresh_dir("sig_tmp")).string();
  // The no-argument form (bundled model) with its ptq-calibrate-* folder in TMPDIR.
  auto r = ptq_test::run_shell_command("TMPDIR=" + tmp + " " +
                                       long_ada_then("long_ada.cfg", "kill -INT $pid"));
  CHECK(r.out.find("rc=130") != std::string::npos);
  CHECK(r.err.find("ptq calibrate: error: interrupted (SIGINT); no output was written [E1103]") !=
        std::string::npos);
  CHECK(entries(tmp) == 0);
  // Named outputs: nothing written, no temporary file.
  fresh_dir("sig_out");
  r = ptq_test::run_shell_command(long_ada_then(
      "long_ada.cfg --record sig_out/r.txt --fake-quant-weights sig_out/w.st", "kill -TERM $pid"));
  CHECK(r.out.find("rc=143") != std::string::npos);
  CHECK(r.err.find("interrupted (SIGTERM)") != std::string::npos);
  CHECK(entries("sig_out") == 0);
  fs::remove_all("sig_tmp");
  fs::remove_all("sig_out");
  std::remove("long_ada_err.txt");
}

TEST_CASE("outputs are all or nothing: a target that turns into a folder leaves none",
          "[cli][outputs][slow]") {
  // Long enough (3 layers of 400 iterations, a second or more) for the mkdir after the first
  // layer's progress line to come before the outputs.
  write("mid_ada.cfg", "batch_num: 2\ncommon_config { ada_quantize { num_iteration: 400 } }\n");
  fresh_dir("aon");
  const auto r = ptq_test::run_shell_command(long_ada_then(
      "mid_ada.cfg --record aon/r.txt --quant-config aon/q.json --fake-quant-weights aon/w.st",
      "mkdir aon/w.st"));
  CHECK(r.out.find("rc=1") != std::string::npos);
  CHECK(r.err.find("ptq calibrate: error: --fake-quant-weights 'aon/w.st': is a folder; no output "
                   "was written [E1102]") != std::string::npos);
  CHECK(entries("aon") == 1);  // only the folder made by the test: no r.txt, q.json, *.tmp.*
  CHECK(fs::is_directory("aon/w.st"));
  fs::remove_all("aon");
  std::remove("mid_ada.cfg");
  std::remove("long_ada.cfg");
  std::remove("long_ada_err.txt");
}
#endif
