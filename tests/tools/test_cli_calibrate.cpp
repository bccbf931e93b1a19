// `ptq calibrate`, run as a user would.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "../support/run_cli.hpp"
#include "ptq/config/api.hpp"
#include "ptq/core/tensor_view.hpp"
#include "ptq/io/safetensors.hpp"
#include "ptq/session/record.hpp"

namespace {

/// A layer known by its channels alone (0: unknown), for the record's checks.
ptq::layer_info channels(std::string name, std::uint32_t cout, std::uint32_t cin) {
  ptq::layer_info l;
  l.name = std::move(name);
  if (cout != 0)
    l.out_channels = cout;
  if (cin != 0)
    l.in_channels = cin;
  return l;
}

ptq_test::cli_result run(const std::string& args) {
  return ptq_test::run_cli(args);
}

const std::string ex = PTQ_EXAMPLES_DIR;
const std::string files = " --model " + ex + "/digits/manifest.json --weights " + ex +
                          "/digits/model.safetensors --batches " + ex +
                          "/digits/batch0.safetensors " + ex + "/digits/batch1.safetensors";

/// `x` as binary16 bits, the mantissa truncated (tiny values to zero, huge ones to the
/// largest finite value): any finite binary16 will do where the test compares with its
/// float32 value.
std::uint16_t truncated_half(float x) {
  std::uint32_t b = 0;
  std::memcpy(&b, &x, 4);
  const auto sign = static_cast<std::uint16_t>((b >> 16) & 0x8000U);
  const int e = static_cast<int>((b >> 23) & 0xFFU) - 112;
  if (e <= 0)
    return sign;
  if (e >= 31)
    return static_cast<std::uint16_t>(sign | 0x7BFFU);
  return static_cast<std::uint16_t>(sign | static_cast<unsigned>(e) << 10 | ((b >> 13) & 0x3FFU));
}

/// Writes `in`'s tensors to `f16_path` as F16 (safetensors written by hand: ptq writes F32)
/// and their float32 values to `f32_path`.
void write_f16_batch(const std::string& in, const std::string& f16_path,
                     const std::string& f32_path) {
  const auto src = ptq::value_or_throw(ptq::io::read_safetensors(in));
  std::string header = "{", data;
  std::vector<ptq::io::named_tensor> widened;
  for (const auto& e : src.entries) {
    const auto t = ptq::value_or_throw(src.get(e.name));
    std::vector<float> w(t.data.size());
    header += (header.size() > 1 ? ",\"" : "\"") + e.name + R"(":{"dtype":"F16","shape":[)";
    for (std::size_t d = 0; d < t.shape.size(); ++d)
      header += (d ? "," : "") + std::to_string(t.shape[d]);
    header += "],\"data_offsets\":[" + std::to_string(data.size()) + ",";
    for (std::size_t i = 0; i < t.data.size(); ++i) {
      const std::uint16_t h = truncated_half(t.data[i]);
      data.append(reinterpret_cast<const char*>(&h), 2);
      w[i] = ptq::half_to_float(h);
    }
    header += std::to_string(data.size()) + "]}";
    widened.push_back({e.name, t.shape, std::move(w)});
  }
  header += "}";
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i)
    bytes[static_cast<std::size_t>(i)] = static_cast<char>((header.size() >> (8 * i)) & 0xFFU);
  std::ofstream(f16_path, std::ios::binary) << bytes << header << data;
  REQUIRE(ptq::io::write_safetensors(f32_path, widened).ok());
}

}  // namespace

TEST_CASE("ptq calibrate with no arguments: the bundled model, table and accuracy pair",
          "[calibrate]") {
  const auto r = run("calibrate --quiet");
  INFO(r.err);
  REQUIRE(r.code == 0);
  const auto at = r.out.find("outputs go to ");
  REQUIRE(at != std::string::npos);
  const std::string folder = r.out.substr(at + 14, r.out.find('\n', at) - at - 14);
  for (const char* f : {"/record.txt", "/quant_config.json", "/fake_quant_weights.safetensors"}) {
    CHECK(std::remove((folder + f).c_str()) == 0);  // each output exists
  }
  CHECK(std::remove(folder.c_str()) == 0);
  CHECK(r.out.find("conv1") != std::string::npos);
  CHECK(r.out.find("accuracy on the test split: FP32 99.26 %") != std::string::npos);
  CHECK(r.err.empty());  // the bundled default prints no warning
  const auto j = run("calibrate --quiet --json --record json_record.txt");
  REQUIRE(j.code == 0);
  CHECK(std::remove("json_record.txt") == 0);
  CHECK(j.out.find("\"fp32_accuracy\": 0.9925925925925926") != std::string::npos);
  CHECK(j.out.find("\"activation_sqnr_db\"") != std::string::npos);
}

TEST_CASE("ptq calibrate --auto-accuracy: the toolkit's binary search on the bundled model",
          "[calibrate][auto][slow]") {
  // No drop at all: every layer quantized loses 0.19 points; the search keeps conv1 (the least
  // estimated SQNR) in float, found in 3 evaluations of the 3 ranked layers.
  const auto r = run("calibrate --auto-accuracy 0 --quiet --record auto_record.txt");
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("auto-accuracy: every layer quantized:  99.07 % (a drop of 0.19 points): "
                   "refused\n"
                   "auto-accuracy: skip_layers : [\"conv1\", \"fc\"]:  99.26 % (a drop of 0.00 "
                   "points): accepted\n"
                   "auto-accuracy: skip_layers : \"conv1\":  99.26 % (a drop of 0.00 points): "
                   "accepted\n"
                   "auto-accuracy: 3 evaluations; skip_layers : \"conv1\"\n") != std::string::npos);
  const std::string rec = ptq::value_or_throw(ptq::try_read_text_file("auto_record.txt"));
  CHECK(rec.find("key: \"conv1\"") == std::string::npos);  // in float: not in the record
  CHECK(rec.find("key: \"conv2\"") != std::string::npos);
  CHECK(std::remove("auto_record.txt") == 0);
  // A drop of 0.5 points: every layer quantized is accepted at once.
  const auto one = run("calibrate --auto-accuracy 0.5 --quiet --record auto_record.txt");
  REQUIRE(one.code == 0);
  CHECK(one.out.find("auto-accuracy: 1 evaluations; every layer stays quantized") !=
        std::string::npos);
  CHECK(std::remove("auto_record.txt") == 0);
  // From files there is no evaluation: a usage error that says where one is.
  const auto files = run("calibrate " + ex +
                         "/configs/quant.cfg --model m.json --weights "
                         "w.safetensors --batches b.safetensors --auto-accuracy 1");
  CHECK(files.code == 2);
  CHECK(files.err.find("--auto-accuracy needs an evaluation") != std::string::npos);
}

TEST_CASE("ptq calibrate from files writes the three outputs", "[calibrate]") {
  const auto r = run("calibrate " + ex + "/configs/dmq_balancer.cfg" + files +
                     " --record cal_record.txt --quant-config cal_config.json "
                     "--fake-quant-weights cal_weights.safetensors --threads 2");
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.err.find("ptq calibrate: dmq 1/3 conv1") != std::string::npos);  // plain progress
  std::string text;
  text = ptq::value_or_throw(ptq::try_read_text_file("cal_record.txt"));
  const std::vector<ptq::layer_info> shapes{channels("conv1", 16, 1), channels("conv2", 32, 16),
                                            channels("pool", 0, 0), channels("fc", 10, 512)};
  const auto rec = ptq::try_parse_record(text, &shapes);
  INFO(text.substr(0, 400));
  REQUIRE(rec.ok());
  CHECK(rec.value().records.size() == 3);  // pool is skipped by the config
  CHECK(rec.value().find("fc")->tensor_balance_factor.size() == 512);
  text = ptq::value_or_throw(ptq::try_read_text_file("cal_config.json"));
  CHECK(text.rfind("{\n    \"version\":1,\n    \"batch_num\":2,", 0) == 0);
  const auto read = ptq::io::read_safetensors("cal_weights.safetensors");
  REQUIRE(read.ok());
  const auto& w = read.value();
  CHECK(w.find("conv1.weight"));
  CHECK(w.find("conv1.bias"));
  CHECK(w.find("bn1.weight"));        // conv1 is in skip_fusion_layers: its BatchNorm stays
  CHECK_FALSE(w.find("bn2.weight"));  // conv2 is fused: its BatchNorm is gone
  CHECK_FALSE(w.find("bn2.running_var"));
  CHECK(w.find("fc.weight"));
  // Same inputs, another thread count: the same record, byte for byte. --timings prints one
  // line with each part of the run (no progress lines with --quiet).
  const auto timed = run("calibrate " + ex + "/configs/dmq_balancer.cfg" + files +
                         " --record cal_record2.txt --threads 1 --quiet --timings");
  REQUIRE(timed.code == 0);
  INFO(timed.err);
  const auto line_at = timed.err.find("timings: load ");  // after the config's warnings
  REQUIRE(line_at != std::string::npos);
  CHECK((line_at == 0 || timed.err[line_at - 1] == '\n'));
  CHECK(timed.err.find("timings:", line_at + 1) == std::string::npos);  // one line
  for (const char* part : {" fusion ", " open ", " dmq ", " weights ", " activations ", " finish ",
                           " outputs ", " total "}) {
    CHECK(timed.err.find(part, line_at) != std::string::npos);
  }
  CHECK(run("calibrate --quiet --timings").code == 2);  // the bundled model: not timed
  std::string again;
  again = ptq::value_or_throw(ptq::try_read_text_file("cal_record2.txt"));
  text = ptq::value_or_throw(ptq::try_read_text_file("cal_record.txt"));
  CHECK(again == text);
  for (const char* f :
       {"cal_record.txt", "cal_record2.txt", "cal_config.json", "cal_weights.safetensors"}) {
    std::remove(f);
  }
}

TEST_CASE("ptq calibrate errors", "[calibrate]") {
  auto r = run("calibrate " + ex + "/configs/quant.cfg --model " + ex + "/digits/manifest.json");
  CHECK(r.code == 2);
  r = run("calibrate --model x.json");
  CHECK(r.code == 2);
  {
    std::ofstream bad("bad.safetensors", std::ios::binary);
    bad << "\x10\x00\x00\x00\x00\x00\x00\x00{\"a\":1}";
  }
  r = run("calibrate " + ex + "/configs/quant.cfg --model " + ex +
          "/digits/manifest.json --weights bad.safetensors --batches bad.safetensors");
  CHECK(r.code == 1);
  CHECK(r.err.find("bad.safetensors") != std::string::npos);
  std::remove("bad.safetensors");
  {
    std::ofstream m("bad_manifest.json");
    m << R"({"layers":[{"name":"conv1","type":"Conv2d","weight":"nope.weight"}]})";
  }
  r = run("calibrate " + ex + "/configs/quant_hfmg.cfg --model bad_manifest.json --weights " + ex +
          "/digits/model.safetensors --batches " + ex + "/digits/batch0.safetensors");
  CHECK(r.code == 1);
  CHECK(r.err.find("'nope.weight' is not in the file") != std::string::npos);
  std::remove("bad_manifest.json");
  r = run("calibrate " + ex + "/configs/quant_hfmg.cfg --model " + ex +
          "/digits/manifest.json --weights " + ex + "/digits/model.safetensors --batches " + ex +
          "/digits/batch0.safetensors");
  CHECK(r.code == 1);
  CHECK(r.err.find("batch_num is 2 but only 1 batch file") != std::string::npos);
  r = run("calibrate " + ex + "/configs/quant_hfmg.cfg --model " + ex +
          "/digits/manifest.json --weights " + ex + "/digits/model.safetensors --batches " + ex +
          "/digits/model.safetensors " + ex + "/digits/model.safetensors");
  CHECK(r.code == 1);
  CHECK(r.err.find("each batch file holds every quantizable layer's input") != std::string::npos);
}
TEST_CASE("ptq calibrate with AdaRound: --ada-data, --seed, progress and errors",
          "[calibrate][ada]") {
  {
    std::ofstream c("ada_small.cfg");
    c << "batch_num: 2\ncommon_config { ada_quantize { num_iteration: 120 } }\n";
  }
  const std::string base = "calibrate ada_small.cfg" + files;
  // Without samples: a clear error naming the first AdaRound layer and the option.
  auto r = run(base + " --quiet");
  CHECK(r.code == 1);
  CHECK(r.err.find("layer 'conv1' uses ada_quantize: give its input samples with --ada-data") !=
        std::string::npos);
  // A file without the layer's samples.
  r = run(base + " --quiet --ada-data " + ex + "/digits/model.safetensors");
  CHECK(r.code == 1);
  CHECK(r.err.find("/digits/model.safetensors: error: tensor 'conv1' is not in the file "
                   "[E1013]\nnote: the AdaRound samples file holds each AdaRound layer's input "
                   "samples under the layer's name\n") != std::string::npos);
  // Each batch file holds every layer's input under its name: usable as AdaRound samples.
  const std::string ok = base + " --ada-data " + ex + "/digits/batch0.safetensors";
  r = run(ok + " --seed 7 --fake-quant-weights ada_w7.safetensors");
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("AdaRound seed:      7") != std::string::npos);
  CHECK(r.err.find("ptq calibrate: ada conv2 120/120 recon ") != std::string::npos);
  CHECK(r.out.find("ada/ifmr") != std::string::npos);
  r = run(ok + " --json --quiet --seed 7 --fake-quant-weights ada_w7b.safetensors");
  REQUIRE(r.code == 0);
  CHECK(r.out.find("\"ada_seed\": 7") != std::string::npos);
  CHECK(r.err.find("ada conv2") == std::string::npos);  // --quiet
  std::string a, b;
  a = ptq::value_or_throw(ptq::try_read_text_file("ada_w7.safetensors"));
  b = ptq::value_or_throw(ptq::try_read_text_file("ada_w7b.safetensors"));
  CHECK(a == b);  // the same seed: the same weights, byte for byte
  CHECK(run(ok + " --quiet --json").out.find("\"ada_seed\": 0") != std::string::npos);
  r = run(ok + " --seed -3");
  CHECK(r.code == 2);
  CHECK(r.err.find("--seed") != std::string::npos);
  // The bundled example takes its samples from its calibration images.
  r = run("calibrate --ada-data x.safetensors");
  CHECK(r.code == 2);
  CHECK(r.err.find("--ada-data goes with --model") != std::string::npos);
  for (const char* f : {"ada_small.cfg", "ada_w7.safetensors", "ada_w7b.safetensors"})
    CHECK(std::remove(f) == 0);
}

TEST_CASE("ptq calibrate with AdaRound on a ConvTranspose2d with output_padding",
          "[calibrate][ada]") {
  // deconv: ConvTranspose2d 3 -> 4, groups 1, 3x3, stride 2, padding 1, output_padding 1, on
  // 5x5 inputs (10x10 outputs), then Sigmoid.
  std::vector<float> w(3 * 4 * 9), b(4), x(8 * 3 * 5 * 5);
  for (std::size_t i = 0; i < w.size(); ++i)
    w[i] = 0.3f * std::sin(0.7f * static_cast<float>(i));
  for (std::size_t i = 0; i < x.size(); ++i)
    x[i] = std::cos(0.37f * static_cast<float>(i));
  b = {0.1f, -0.1f, 0.2f, 0.0f};
  REQUIRE(ptq::io::write_safetensors("deconv_w.safetensors",
                                     {{"deconv.weight", {3, 4, 3, 3}, w}, {"deconv.bias", {4}, b}})
              .ok());
  REQUIRE(ptq::io::write_safetensors("deconv_x.safetensors", {{"deconv", {8, 3, 5, 5}, x}}).ok());
  {
    std::ofstream m("deconv.json");
    m << R"({"layers":[{"name":"deconv","type":"ConvTranspose2d","weight":"deconv.weight",)"
      << R"("bias":"deconv.bias","stride":[2,2],"padding":[1,1],"output_padding":[1,1],)"
      << R"("activation":"Sigmoid"}]})";
    std::ofstream c("deconv.cfg");
    c << "batch_num: 1\ncommon_config { ada_quantize { num_iteration: 50 } }\n";
  }
  const std::string base =
      "calibrate deconv.cfg --model deconv.json --weights "
      "deconv_w.safetensors --batches deconv_x.safetensors --quiet";
  auto r = run(base + " --ada-data deconv_x.safetensors --record deconv_record.txt --json");
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("\"weight_algorithm\": \"ada\"") != std::string::npos);
  CHECK(r.out.find("\"activation_algorithm\": \"ifmr\"") != std::string::npos);
  std::string text;
  text = ptq::value_or_throw(ptq::try_read_text_file("deconv_record.txt"));
  const auto rec = ptq::try_parse_record(text);
  REQUIRE(rec.ok());
  CHECK(rec.value().find("deconv")->scale_w.size() == 4);  // per output channel
  // The table's type column is as wide as "ConvTranspose2d" and a space.
  r = run(base + " --ada-data deconv_x.safetensors --record deconv_record_table.txt");
  REQUIRE(r.code == 0);
  CHECK(r.out.find("type             algorithms") != std::string::npos);
  CHECK(r.out.find("ConvTranspose2d  ada/ifmr") != std::string::npos);
  // output_padding 2 is not below the stride or the dilation: PyTorch rejects it, so does ptq.
  {
    std::ofstream m("deconv.json");
    m << R"({"layers":[{"name":"deconv","type":"ConvTranspose2d","weight":"deconv.weight",)"
      << R"("stride":[2,2],"padding":[1,1],"output_padding":[2,2]}]})";
  }
  r = run(base + " --ada-data deconv_x.safetensors");
  CHECK(r.code == 1);
  CHECK(r.err.find("output_padding") != std::string::npos);
  // A NaN among the samples: named by layer and flat index.
  x[17] = std::nanf("");
  REQUIRE(ptq::io::write_safetensors("deconv_nan.safetensors", {{"deconv", {8, 3, 5, 5}, x}}).ok());
  {
    std::ofstream m("deconv.json");
    m << R"({"layers":[{"name":"deconv","type":"ConvTranspose2d","weight":"deconv.weight",)"
      << R"("stride":[2,2],"padding":[1,1],"output_padding":[1,1]}]})";
  }
  r = run(base + " --ada-data deconv_nan.safetensors");
  CHECK(r.code == 1);
  CHECK(r.err.find("deconv input: NaN at flat index 17") != std::string::npos);
  for (const char* f : {"deconv_w.safetensors", "deconv_x.safetensors", "deconv_nan.safetensors",
                        "deconv.json", "deconv.cfg", "deconv_record.txt"}) {
    CHECK(std::remove(f) == 0);
  }
}

TEST_CASE("ptq calibrate --memory bounded: the one-pass outputs byte for byte",
          "[calibrate][two_pass]") {
  for (const char* cfg : {"dmq_balancer.cfg", "quant.cfg", "quant_hfmg.cfg"}) {
    INFO(cfg);
    const std::string base = "calibrate " + ex + "/configs/" + cfg + files + " --quiet";
    const auto one = run(base +
                         " --record mm_r1.txt --quant-config mm_c1.json "
                         "--fake-quant-weights mm_w1.safetensors");
    INFO(one.err);
    REQUIRE(one.code == 0);
    const auto two = run(base +
                         " --memory bounded --record mm_r2.txt --quant-config mm_c2.json "
                         "--fake-quant-weights mm_w2.safetensors");
    INFO(two.err);
    REQUIRE(two.code == 0);
    // The table is the same; the output names and the time differ.
    const auto table = [](const std::string& out) { return out.substr(0, out.find("record:")); };
    CHECK(table(two.out) == table(one.out));
    CHECK(two.out.find("record:") != std::string::npos);
    for (const auto& [a, b] : {std::pair<const char*, const char*>{"mm_r1.txt", "mm_r2.txt"},
                               {"mm_c1.json", "mm_c2.json"},
                               {"mm_w1.safetensors", "mm_w2.safetensors"}}) {
      INFO(a);
      std::ifstream fa(a, std::ios::binary), fb(b, std::ios::binary);
      const std::string ta((std::istreambuf_iterator<char>(fa)), std::istreambuf_iterator<char>());
      const std::string tb((std::istreambuf_iterator<char>(fb)), std::istreambuf_iterator<char>());
      CHECK_FALSE(ta.empty());
      CHECK(ta == tb);
    }
    for (const char* f : {"mm_r1.txt", "mm_r2.txt", "mm_c1.json", "mm_c2.json", "mm_w1.safetensors",
                          "mm_w2.safetensors"}) {
      std::remove(f);
    }
  }
  // The bundled model: the engine runs its calibration batches twice, same accuracy pair.
  const auto b = run("calibrate --quiet --memory bounded --record mm_bundled.txt");
  INFO(b.err);
  REQUIRE(b.code == 0);
  CHECK(b.out.find("accuracy on the test split: FP32 99.26 %") != std::string::npos);
  CHECK(b.out.find("99.07 %") != std::string::npos);
  std::remove("mm_bundled.txt");
  const auto at = b.out.find("outputs go to ");
  if (at != std::string::npos) {
    const std::string folder = b.out.substr(at + 14, b.out.find('\n', at) - at - 14);
    for (const char* f : {"/quant_config.json", "/fake_quant_weights.safetensors"})
      std::remove((folder + f).c_str());
    std::remove(folder.c_str());
  }
  CHECK(run("calibrate --quiet --memory half").code == 2);
}

TEST_CASE("ptq calibrate --order-invariant: the batch order does not change the record",
          "[calibrate][invariant]") {
  const std::string base = "calibrate " + ex + "/configs/quant_hfmg.cfg --model " + ex +
                           "/digits/manifest.json --weights " + ex +
                           "/digits/model.safetensors --quiet --order-invariant --batches ";
  const std::string b0 = ex + "/digits/batch0.safetensors", b1 = ex + "/digits/batch1.safetensors";
  const auto fwd = run(base + b0 + " " + b1 + " --record oi_fwd.txt");
  INFO(fwd.err);
  REQUIRE(fwd.code == 0);
  const auto rev = run(base + b1 + " " + b0 + " --record oi_rev.txt");
  REQUIRE(rev.code == 0);
  const auto toolkit = run("calibrate " + ex + "/configs/quant_hfmg.cfg" + files +
                           " --quiet --record oi_toolkit.txt");
  REQUIRE(toolkit.code == 0);
  const auto text = [](const char* path) {
    std::ifstream f(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  };
  CHECK_FALSE(text("oi_fwd.txt").empty());
  CHECK(text("oi_fwd.txt") == text("oi_rev.txt"));
  CHECK(text("oi_fwd.txt") != text("oi_toolkit.txt"));
  for (const char* f : {"oi_fwd.txt", "oi_rev.txt", "oi_toolkit.txt"})
    std::remove(f);
  const auto bad = run(base + b0 + " " + b1 + " --memory bounded --record oi_bad.txt");
  CHECK(bad.code == 2);
  CHECK(bad.err.find("--order-invariant is one pass: not with --memory bounded, --mpi or "
                     "--report") != std::string::npos);
}

TEST_CASE("ptq calibrate's table keeps its columns for long layer names", "[calibrate]") {
  std::vector<float> w(4 * 6), x(2 * 6);
  for (std::size_t i = 0; i < w.size(); ++i)
    w[i] = 0.1f * static_cast<float>(i % 7) - 0.3f;
  for (std::size_t i = 0; i < x.size(); ++i)
    x[i] = 0.25f * static_cast<float>(i) - 1.0f;
  const std::string name = "encoder.block0.attention.proj";  // wider than the 12-column default
  REQUIRE(ptq::io::write_safetensors("long_w.safetensors", {{name + ".weight", {4, 6}, w}}).ok());
  REQUIRE(ptq::io::write_safetensors("long_x.safetensors", {{name, {2, 6}, x}}).ok());
  {
    std::ofstream m("long.json");
    m << R"({"layers":[{"name":")" << name << R"(","type":"Linear","weight":")" << name
      << R"(.weight"}]})";
    std::ofstream c("long.cfg");
    c << "batch_num: 1\n";
  }
  const auto r =
      run("calibrate long.cfg --model long.json --weights long_w.safetensors --batches "
          "long_x.safetensors --record long_record.txt");
  INFO(r.err);
  REQUIRE(r.code == 0);
  std::istringstream lines(r.out);
  std::string header, row;
  std::getline(lines, header);
  std::getline(lines, row);
  REQUIRE(header.rfind("layer ", 0) == 0);
  REQUIRE(row.rfind(name + "  ", 0) == 0);
  for (const char* column : {"type", "bits", "w SQNR"}) {
    INFO(column << "\n" << header << "\n" << row);
    const auto at = header.find(column);
    REQUIRE(at != std::string::npos);
    CHECK(row[at - 1] == ' ');
    CHECK(row[at] != ' ');
  }
  for (const char* f :
       {"long_w.safetensors", "long_x.safetensors", "long.json", "long.cfg", "long_record.txt"}) {
    CHECK(std::remove(f) == 0);
  }
}

TEST_CASE("ptq calibrate reads float16 batches: the outputs of their float32 values",
          "[calibrate]") {
  write_f16_batch(ex + "/digits/batch0.safetensors", "f16_b0.safetensors", "f32_b0.safetensors");
  write_f16_batch(ex + "/digits/batch1.safetensors", "f16_b1.safetensors", "f32_b1.safetensors");
  const std::string model = " --model " + ex + "/digits/manifest.json --weights " + ex +
                            "/digits/model.safetensors --batches ";
  for (const char* cfg : {"quant.cfg", "quant_hfmg.cfg", "dmq_balancer.cfg"}) {
    INFO(cfg);
    std::string record[2];
    for (int half = 0; half < 2; ++half) {
      const std::string p = half ? "f16" : "f32";
      const auto r = run("calibrate " + ex + "/configs/" + cfg + model + p + "_b0.safetensors " +
                         p + "_b1.safetensors --quiet --record " + p + "_record.txt");
      INFO(r.err);
      REQUIRE(r.code == 0);
      record[half] = ptq::value_or_throw(ptq::try_read_text_file(p + "_record.txt"));
    }
    CHECK(record[0] == record[1]);
  }
  for (const char* f : {"f16_b0.safetensors", "f32_b0.safetensors", "f16_b1.safetensors",
                        "f32_b1.safetensors", "f16_record.txt", "f32_record.txt"}) {
    std::remove(f);
  }
}
