// `ptq` messages that say what is wrong and where: ignored inputs are named, a misplaced config
// is explained, batches are numbered from 1 as --batches counts them, and a file name holding a
// control byte stays one visible line (exact message and exit code).
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <utility>

#include "../support/run_cli.hpp"
#include "ptq/kernels/kernel_set.hpp"
#include "ptq/version.hpp"

#ifdef PTQ_CLI_PATH
namespace {

const std::string ex = PTQ_EXAMPLES_DIR;
const std::string model =
    " --model " + ex + "/digits/manifest.json --weights " + ex + "/digits/model.safetensors";
const std::string batch0 = ex + "/digits/batch0.safetensors";
const std::string batch1 = ex + "/digits/batch1.safetensors";

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A copy of batch 1 of the bundled data with a NaN at flat index 5 of its first tensor (conv1).
void write_nan_batch(const std::string& path) {
  std::string bytes = slurp(batch1);
  REQUIRE(bytes.size() > 8);
  std::uint64_t header = 0;
  for (int i = 7; i >= 0; --i)
    header = header << 8 | static_cast<unsigned char>(bytes[static_cast<std::size_t>(i)]);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::memcpy(&bytes[8 + header + 5 * sizeof(float)], &nan, sizeof nan);
  std::ofstream(path, std::ios::binary) << bytes;
}

}  // namespace

TEST_CASE("--batches beyond batch_num are named, not silently dropped", "[cli][inputs]") {
  std::ofstream("extra.safetensors", std::ios::binary) << slurp(batch1);
  const auto r =
      ptq_test::run_cli("calibrate " + ex + "/configs/quant_hfmg.cfg" + model + " --batches " +
                        batch0 + " " + batch1 + " extra.safetensors --quiet --record extra.txt");
  CHECK(r.code == 0);
  CHECK(r.err ==
        "ptq calibrate: warning: --batches: 3 files for the config's batch_num 2: "
        "'extra.safetensors' is not read [W1107]\n"
        "note: raise batch_num in the config to calibrate on more batches\n");
  CHECK(std::remove("extra.txt") == 0);
  CHECK(std::remove("extra.safetensors") == 0);
}

TEST_CASE("a config after --batches is explained, not read as a batch", "[cli][inputs]") {
  const auto r = ptq_test::run_cli("calibrate" + model + " --batches " + batch0 + " " + ex +
                                   "/configs/quant_hfmg.cfg --quiet");
  CHECK(r.code == 2);
  CHECK(r.out.empty());
  CHECK(r.err == "ptq calibrate: error: --batches: '" + ex +
                     "/configs/quant_hfmg.cfg' is a config: --batches reads every file after "
                     "it, so give CONFIG first (ptq calibrate CONFIG --model M --weights W "
                     "--batches B...)\n");
}

TEST_CASE("a bad second batch file is batch 2, in every memory mode", "[cli][inputs]") {
  write_nan_batch("nan_b2.safetensors");
  for (const char* cfg : {"/configs/quant.cfg", "/configs/quant_hfmg.cfg"}) {
    for (const char* mode : {"one-pass", "bounded"}) {
      INFO(cfg << " --memory " << mode);
      const auto r =
          ptq_test::run_cli("calibrate " + ex + cfg + model + " --batches " + batch0 +
                            " nan_b2.safetensors --quiet --record nan_b2.txt --memory " + mode);
      CHECK(r.code == 1);
      CHECK(r.err ==
            "nan_b2.safetensors: error: conv1 input batch 2: NaN at flat index 5 [E902]\n");
    }
  }
  CHECK(std::remove("nan_b2.safetensors") == 0);
  CHECK(std::remove("nan_b2.txt") != 0);  // no output of a failed run
}

TEST_CASE("control bytes in a file name or an argument are shown as \\xHH, one line",
          "[cli][inputs]") {
  auto r = ptq_test::run_cli("check \"$(printf 'no\\nsuch.cfg')\"");
  CHECK(r.code == 1);
  CHECK(r.err ==
        "ptq check: error: CONFIG: cannot open 'no\\x0asuch.cfg': No such file or directory "
        "[E1001]\n");
  r = ptq_test::run_cli("\"$(printf 'cal\\nibrate\\033[2J')\"");
  CHECK(r.code == 2);
  CHECK(r.err.rfind("ptq: error: unknown command 'cal\\x0aibrate\\x1b[2J' [E1105]\nnote: ", 0) ==
        0);
  r = ptq_test::run_cli("check " + ex + "/configs/quant.cfg \"$(printf 'x\\ny')\"");
  CHECK(r.code == 2);
  CHECK(r.err.rfind("The following argument was not expected: x\\x0ay\n", 0) == 0);
}
TEST_CASE("ptq --version names the version and the kernel set this CPU runs", "[cli]") {
  const auto r = ptq_test::run_cli("--version");
  CHECK(r.code == 0);
  // The tool links ptq::kernels: the best set of this CPU, as the library picks it.
  CHECK(r.out == std::string("ptq ") + PTQ_VERSION_STRING +
                     " (kernels: " + ptq::kernels::dispatched_kernels().arch_name + ")\n");
}

TEST_CASE("ptq --help lists each command on one line", "[cli]") {
  const auto r = ptq_test::run_cli("--help");
  CHECK(r.code == 0);
  const auto at = r.out.find("Subcommands:\n");
  REQUIRE(at != std::string::npos);
  const std::string list = r.out.substr(at, r.out.find("\n\n", at) - at);
  CHECK(
      list.find("\n  calibrate                   Calibrate a model: record, detailed JSON config, "
                "fake-quantized weights (no model files: the bundled digits model)\n  check ") !=
      std::string::npos);
  CHECK(list.find("\n  export                      Export a calibration record to TensorRT, ncnn, "
                  "AIMET, AMCT deploy, QDQ JSON or ONNX\n  observe ") != std::string::npos);
  // The long text of a command comes after its options.
  for (const auto& [c, text] : {std::pair<std::string, std::string>{"calibrate", "all or nothing"},
                                {"export", "written atomically"}}) {
    const auto h = ptq_test::run_cli(c + " --help");
    CHECK(h.code == 0);
    INFO(c);
    REQUIRE(h.out.find(text) != std::string::npos);
    CHECK(h.out.find("Options:") < h.out.find(text));
  }
}
#endif
