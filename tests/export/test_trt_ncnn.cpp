// The TensorRT cache and the ncnn table (docs/export.md): hand-derived cases (the AMCT deploy
// worked example too) and re-reading parsers written from the engines' grammars.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "export_fixtures.hpp"
#include "grammar_parsers.hpp"
#include "ptq/export/ncnn_table.hpp"
#include "ptq/export/qdq_table_from_manifest.hpp"
#include "ptq/export/trt_cache.hpp"

using ptq_test::entry;
using ptq_test::layer;
using ptq_test::parse_ncnn_table;
using ptq_test::parse_trt_cache;

namespace {

ptq::export_options trt(bool strict = false) {
  ptq::export_options o;
  o.trt_version = "8601";
  o.strict = strict;
  return o;
}

std::vector<std::string> messages(const std::vector<ptq::error>& diags) {
  std::vector<std::string> out;
  for (const auto& d : diags)
    out.push_back(ptq::format_error(d));
  return out;
}

/// The AMCT deploy worked example: s_d 0.0235294, o_d -128, three channels.
ptq::qdq_table worked_example() {
  ptq::record_file rec;
  rec.records.push_back(entry("conv1", 0.0235294f, -128, {0.00412f, 0.00388f, 0.00501f}));
  ptq::model_manifest m;
  m.layers.push_back(layer("conv1", ptq::layer_type::conv2d, {3, 2, 3, 3}));
  auto t = ptq::make_qdq_table(rec, m);
  REQUIRE(t.ok());
  return t.value();
}

}  // namespace

TEST_CASE("trt cache: the spec's worked example, and its loss reported") {
  auto r = ptq::write_trt_cache(worked_example(), trt());
  REQUIRE(r.ok());
  CHECK(r.value() == "TRT-8601-EntropyCalibration2\nconv1: 3d4182ff\n");
  CHECK(messages(r.warnings()) ==
        std::vector<std::string>{
            "warning: layer 'conv1': trt-cache: asymmetric activation (offset_d -128) on the "
            "symmetric int8 grid: step 0.0472441 is 2.00787x scale_d 0.0235294 (1.01 bits "
            "lost) [W1220]\n"});
  std::string header;
  const auto steps = parse_trt_cache(r.value(), header);
  CHECK(header == "TRT-8601-EntropyCalibration2");
  REQUIRE(steps.count("conv1") == 1);
  // decode x 127 == amax (255 * s_d), to 1 ulp
  const float amax = 0.0235294f * 255.0f;
  CHECK(std::fabs(steps.at("conv1") * 127.0f - amax) <= std::nextafter(amax, 1e9f) - amax);
  auto strict = ptq::write_trt_cache(worked_example(), trt(true));
  REQUIRE_FALSE(strict.ok());
  CHECK(strict.error().code == ptq::errc::export_lossy);
  CHECK(ptq::format_error(strict.error()).rfind("error: layer 'conv1': trt-cache: asymmetric", 0) ==
        0);
}

TEST_CASE("trt cache: symmetric 8-bit is exact (step = scale_d), asymmetric off {0,-128}") {
  ptq::record_file rec;
  rec.records.push_back(entry("a", 1.0f / 127.0f, 0, {0.5f}));
  rec.records.push_back(entry("b", 0.02f, 27, {0.5f}));
  auto t = ptq::make_qdq_table(rec);
  REQUIRE(t.ok());
  auto r = ptq::write_trt_cache(t.value(), trt());
  REQUIRE(r.ok());
  // b: amax = 0.02 * max(128 + 27, 127 - 27) = 3.1, step 3.1 / 127 (ratio 1.22047)
  const float step_b = 0.02f * 155.0f / 127.0f;
  CHECK(r.value() ==
        "TRT-8601-EntropyCalibration2\na: 3c010204\nb: " + ptq::detail::float_hex(step_b) + "\n");
  REQUIRE(r.warnings().size() == 1);
  CHECK(r.warnings()[0].message ==
        "layer 'b': trt-cache: asymmetric activation (offset_d 27) on the symmetric int8 grid: "
        "step 0.0244094 is 1.22047x scale_d 0.02 (0.29 bits lost)");
}

TEST_CASE("trt cache: 4-bit, INT16, DMQ and FORCE_FP16 are reported per layer") {
  ptq::record_file rec;
  auto a = entry("a4", 0.5f, 0, {0.5f});
  a.value.act_type = "INT4";
  auto w = entry("w16", 0.5f, 0, {0.5f});
  w.value.act_type = "INT16";
  auto d = entry("dmq", 0.25f, 0, {0.5f});
  d.value.tensor_balance_factor = {0.5f, 4.0f};
  d.value.fakequant_precision_mode = "FORCE_FP16_QUANT";
  rec.records = {a, w, d};
  auto t = ptq::make_qdq_table(rec);
  REQUIRE(t.ok());
  auto r = ptq::write_trt_cache(t.value(), trt());
  REQUIRE(r.ok());
  // a4: amax = 0.5 * 8 = 4 (the 4-bit grid's clip), step 4/127; w16 is left out
  CHECK(r.value() == "TRT-8601-EntropyCalibration2\na4: " + ptq::detail::float_hex(4.0f / 127.0f) +
                         "\ndmq: 3e800000\n");
  CHECK(messages(r.warnings()) ==
        std::vector<std::string>{
            "warning: layer 'a4': trt-cache: 4-bit activation on the int8 grid: step 0.0314961 "
            "is 0.0629921x scale_d 0.5 (same clip range 4, a different grid) [W1220]\n",
            "warning: layer 'w16': trt-cache: INT16 activation has no TensorRT int8 form; the "
            "layer is left out (it runs unquantized) [W1220]\n",
            "warning: layer 'dmq': trt-cache: 2 DMQ factors in [0.5, 4] are not in the file; the "
            "graph needs Mul(x, 1/b) before the layer and the weight times b along Cin "
            "(docs/export.md) [W1220]\n",
            "warning: layer 'dmq': trt-cache: FORCE_FP16_QUANT is not in the file (the deploy "
            "dequant scale keeps 10 mantissa bits, up to 2^-10 relative) [W1220]\n"});
}

TEST_CASE("trt cache: the header options are checked") {
  const auto t = worked_example();
  ptq::export_options o;
  auto r = ptq::write_trt_cache(t, o);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == ptq::errc::export_option_invalid);
  CHECK(r.error().message ==
        "trt-cache needs the TensorRT version as the decimal number TensorRT prints in the cache "
        "header (8601 for 8.6.1, 100300 for 10.3.0), got ''");
  o.trt_version = "100300";
  o.trt_calibrator = "Min Max";
  r = ptq::write_trt_cache(t, o);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().message ==
        "the TensorRT calibrator 'Min Max' must be a word such as EntropyCalibration2 or "
        "MinMaxCalibration");
  o.trt_calibrator = "MinMaxCalibration";
  r = ptq::write_trt_cache(t, o);
  REQUIRE(r.ok());
  CHECK(r.value().rfind("TRT-100300-MinMaxCalibration\n", 0) == 0);
}

TEST_CASE("ncnn table: the spec's worked example") {
  auto r = ptq::write_ncnn_table(worked_example());
  REQUIRE(r.ok());
  CHECK(r.value() == "conv1_param_0 242.71843 257.73196 199.6008\nconv1 21.16668\n");
  REQUIRE(r.warnings().size() == 2);
  CHECK(r.warnings()[0].message.rfind("layer 'conv1': ncnn-table: asymmetric activation", 0) == 0);
  CHECK(r.warnings()[1].code == ptq::errc::export_engine_caveat);  // an 8-bit 3x3 stride-1 conv
  const auto p = parse_ncnn_table(r.value());
  CHECK(p.weights.at("conv1_param_0") ==
        std::vector<float>{1.0f / 0.00412f, 1.0f / 0.00388f, 1.0f / 0.00501f});
  CHECK(p.blobs.at("conv1") == 127.0f / (0.0235294f * 255.0f));
}

TEST_CASE("ncnn table: value counts per layer kind; weight lines first") {
  ptq::record_file rec;
  rec.records.push_back(entry("dw", 0.5f, 0, {0.25f, 0.5f, 0.125f}));
  rec.records.push_back(entry("grouped", 0.5f, 0, {0.25f, 0.5f, 0.125f, 0.125f}));
  rec.records.push_back(entry("fc", 0.5f, 0, {0.1f}));
  rec.records.push_back(entry("up", 0.5f, 0, {0.1f}));
  auto w6 = entry("six", 0.5f, 0, {0.25f, 0.5f});
  w6.value.wts_type = "INT6";
  rec.records.push_back(w6);
  ptq::model_manifest m;
  auto dw = layer("dw", ptq::layer_type::conv2d, {3, 1, 3, 3});
  dw.desc.conv.groups = 3;
  auto gr = layer("grouped", ptq::layer_type::conv2d, {4, 2, 3, 3});
  gr.desc.conv.groups = 2;
  m.layers = {dw, gr, layer("fc", ptq::layer_type::linear, {4, 8}),
              layer("up", ptq::layer_type::conv_transpose2d, {2, 2, 2, 2}),
              layer("six", ptq::layer_type::conv2d, {2, 1, 3, 3})};
  auto t = ptq::make_qdq_table(rec, m);
  REQUIRE(t.ok());
  auto r = ptq::write_ncnn_table(t.value());
  REQUIRE(r.ok());
  // depthwise: one per group = channel (exact); grouped: per group, the larger step (1/0.5,
  // 1/0.125); Linear: the per-tensor value replicated num_output = 4 times; 6-bit weights:
  // 1/scale_w as the record has it (ARQ's 31/amax, or 32/amax when the negative side
  // dominates); ConvTranspose2d is left out.
  CHECK(r.value() ==
        "dw_param_0 4 2 8\n"
        "grouped_param_0 2 8\n"
        "fc_param_0 10 10 10 10\n"
        "six_param_0 4 2\n"
        "dw 2\ngrouped 2\nfc 2\nsix 2\n");
  CHECK(messages(r.warnings()) ==
        std::vector<std::string>{
            "warning: layer 'grouped': ncnn-table: ConvolutionDepthWise holds one weight scale "
            "per group; the largest step of each group is used, up to 2x a channel's calibrated "
            "step [W1220]\n",
            "warning: layer 'up': ncnn-table: ncnn's int8 table covers Convolution, "
            "ConvolutionDepthWise and InnerProduct only, not ConvTranspose2d; the layer is left "
            "out (it runs in float) [W1220]\n"});
  const auto p = parse_ncnn_table(r.value());
  CHECK(p.weights.size() == 4);
  CHECK(p.blobs.size() == 4);
  CHECK(p.weights.at("fc_param_0").size() == 4);  // num_output
  CHECK(p.weights.at("dw_param_0").size() == 3);  // group
  CHECK(p.weights.at("grouped_param_0").size() == 2);
}

TEST_CASE("ncnn table: needs the manifest; names ncnn would misfile are errors") {
  ptq::record_file rec;
  rec.records.push_back(entry("fc", 0.5f, 0, {0.1f}));
  auto t = ptq::make_qdq_table(rec);
  REQUIRE(t.ok());
  auto r = ptq::write_ncnn_table(t.value());
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == ptq::errc::export_needs_model);
  CHECK(r.error().message ==
        "layer 'fc': ncnn-table needs the layer types and output-channel counts; give --model "
        "and --weights");
  ptq::record_file bad;
  bad.records.push_back(entry("block_param_1", 0.5f, 0, {0.1f}));
  ptq::model_manifest m;
  m.layers.push_back(layer("block_param_1", ptq::layer_type::linear, {2, 2}));
  auto tb = ptq::make_qdq_table(bad, m);
  REQUIRE(tb.ok());
  r = ptq::write_ncnn_table(tb.value());
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == ptq::errc::export_not_representable);
  CHECK(r.error().message ==
        "layer 'block_param_1': ncnn-table: ncnn's reader files a key containing \"_param_\" as "
        "a weight, cuts keys at whitespace and finds no weights of a name over 247 bytes "
        "('block_param_1', 13 bytes); rename the layer");
  // ncnn2int8 looks a layer's weights up as "<name>_param_0" in 256 bytes: 247 is the longest
  // name it finds, 248 is cut. The key is the engine's layer name (`node`) when known.
  for (const std::size_t n : {std::size_t{247}, std::size_t{248}}) {
    ptq::record_file one;
    one.records.push_back(entry("fc", 0.5f, 0, {0.1f}));
    ptq::model_manifest mf;
    mf.layers.push_back(layer("fc", ptq::layer_type::linear, {2, 2}));
    auto tn = ptq::make_qdq_table(one, mf);
    REQUIRE(tn.ok());
    tn.value().layers[0].node = std::string(n, 'x');
    r = ptq::write_ncnn_table(tn.value());
    CHECK(r.ok() == (n == 247));
    if (r.ok())
      CHECK(r.value().rfind(std::string(n, 'x') + "_param_0 10 10\n", 0) == 0);
  }
}

TEST_CASE("ncnn table: what ncnn computes differently is said, per layer (W1221)") {
  ptq::record_file rec;
  rec.records.push_back(entry("k3", 0.5f, 0, {0.25f, 0.25f}));    // 3x3 stride 1, 8 bits
  rec.records.push_back(entry("k3s2", 0.5f, 0, {0.25f, 0.25f}));  // stride 2: no Winograd
  auto six = entry("k3six", 0.5f, 0, {0.25f, 0.25f});
  six.value.wts_type = "INT6";  // 6-bit weights: what ncnn2table itself uses there
  rec.records.push_back(six);
  rec.records.push_back(entry("min", 0.5f, 0, {0.25f, 0.25f}));  // 1x1 with a code of -128
  rec.records.push_back(entry("bn", 0.5f, 0, {0.25f, 0.25f}));   // 1x1, BatchNorm kept apart
  ptq::model_manifest m;
  m.layers.push_back(layer("k3", ptq::layer_type::conv2d, {2, 1, 3, 3}));
  m.layers.push_back(layer("k3s2", ptq::layer_type::conv2d, {2, 1, 3, 3}));
  m.layers.back().desc.conv.stride = {2, 2};
  m.layers.push_back(layer("k3six", ptq::layer_type::conv2d, {2, 1, 3, 3}));
  m.layers.push_back(layer("min", ptq::layer_type::conv2d, {2, 2, 1, 1}));
  // W[1][0] = -32: -32 / 0.25 = -128; W[1][1] = -31.9 rounds to -128 too; W[0][1] = -31.8:
  // -127.2, -127.
  m.layers.back().set_weight({2, 2, 1, 1}, {0.0f, -31.8f, -32.0f, -31.9f});
  m.layers.push_back(layer("bn", ptq::layer_type::conv2d, {2, 1, 1, 1}));
  ptq::batch_norm_params bn;
  bn.weight = bn.bias = bn.running_mean = bn.running_var = {1.0f, 1.0f};
  m.layers.back().desc.batch_norm = bn;
  ptq::qdq_options kept;
  kept.skip_fusion_layers = {"bn"};
  auto t = ptq::make_qdq_table(rec, m, kept);
  REQUIRE(t.ok());
  auto r = ptq::write_ncnn_table(t.value());
  REQUIRE(r.ok());
  CHECK(messages(r.warnings()) ==
        std::vector<std::string>{
            "warning: layer 'k3': ncnn-table: 8-bit weights on a 3x3 stride-1 convolution: ncnn "
            "runs it with int8 Winograd F43, which can overflow with full-range weights "
            "(ncnn2table quantizes such layers to 6 bits); calibrate it with quant_bits: 6 "
            "[W1221]\n",
            "warning: layer 'min': ncnn-table: 2 weight code(s) of -128, which ncnn clamps to "
            "-127 (the weight moves by one step) [W1221]\n",
            "warning: layer 'bn': ncnn-table: its BatchNorm is kept apart (skip_fusion_layers or "
            "do_fusion: false): ncnnoptimize folds it into the convolution, whose folded weights "
            "these scales were not taken on; convert without ncnnoptimize, or let calibration "
            "fold it [W1221]\n"});
  ptq::export_options strict;  // an engine's caveat is no loss of the file: not an error
  strict.strict = true;
  CHECK(ptq::write_ncnn_table(t.value(), strict).ok());
}

TEST_CASE("ncnn table: strict turns a left-out layer into an error and writes nothing") {
  ptq::record_file rec;
  auto e = entry("c", 0.5f, 0, {0.1f, 0.1f});
  e.value.act_type = "INT16";
  rec.records.push_back(e);
  ptq::model_manifest m;
  m.layers.push_back(layer("c", ptq::layer_type::conv2d, {2, 1, 1, 1}));
  auto t = ptq::make_qdq_table(rec, m);
  REQUIRE(t.ok());
  ptq::export_options o;
  o.strict = true;
  auto r = ptq::write_ncnn_table(t.value(), o);
  REQUIRE_FALSE(r.ok());
  CHECK(ptq::format_error(r.error()) ==
        "error: layer 'c': ncnn-table: INT16 activation has no ncnn int8 form; the layer is left "
        "out (it runs in float) [E1220]\n");
}
