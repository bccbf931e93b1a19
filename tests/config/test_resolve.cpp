#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "helpers.hpp"
#include "ptq/config_json.hpp"

using ptq::layer_type;
using ptq_test::layer;
using ptq_test::parse_ok;
using ptq_test::read_data;

namespace {

const char* const golden_ok[] = {"01_precedence",
                                 "03_asymmetric_offset_false_common_hfmg",
                                 "07_hfmg_vs_ifmr_defaults",
                                 "09_ada_common_unsupported_types",
                                 "11_quant_bits7_common",
                                 "13_dmq_common_avgpool",
                                 "17_channel_wise_common_linear_overridden",
                                 "19_int16_override_linear_conv",
                                 "25_int4_pack",
                                 "29_seed_dmq_balancer",
                                 "31_seed_quant_hfmg"};

struct golden_error {
  const char* name;
  ptq::errc code;
  std::uint32_t line;
  std::uint32_t column;
};
const golden_error golden_errors[] = {
    {"05_conv3d_override_asymmetric_error", ptq::errc::unsupported_setting, 3, 52},
    {"21_int16_override_linear_nobias_error", ptq::errc::unsupported_setting, 3, 50},
    {"23_skip_fusion_linear_error", ptq::errc::not_fusable, 1, 21},
};

ptq::result<ptq::resolved_config> resolve_case(const std::string& name) {
  const auto text = read_data("resolve-cases/" + name + ".cfg");
  const auto c = parse_ok(text);
  const auto layers = ptq::try_read_layer_list(read_data("resolve-cases/" + name + ".layers.json"));
  REQUIRE(layers.ok());
  return ptq::resolve_config(c, layers.value());
}

}  // namespace

TEST_CASE("golden resolve cases: byte-identical JSON", "[resolve]") {
  for (const char* name : golden_ok) {
    INFO(name);
    const auto r = resolve_case(name);
    REQUIRE(r.ok());
    CHECK(ptq::to_toolkit_json(r.value()) ==
          read_data(std::string("resolve-cases/") + name + ".expected.json"));
  }
}

TEST_CASE("golden resolve cases: the toolkit's errors", "[resolve]") {
  for (const auto& g : golden_errors) {
    INFO(g.name);
    const auto r = resolve_case(g.name);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == g.code);
    CHECK(r.error().where.begin.line == g.line);
    CHECK(r.error().where.begin.column == g.column);
  }
}

TEST_CASE("names in skip_layers, overrides and skip_fusion_layers must exist", "[resolve]") {
  const std::vector<ptq::layer_info> layers{layer("conv1", layer_type::conv2d),
                                            layer("fc", layer_type::linear)};
  auto r = ptq::resolve_config(parse_ok("skip_layers: \"conv_1\""), layers);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == ptq::errc::unknown_layer);
  CHECK(r.error().where.begin.column == 14);
  CHECK(r.error().note == "did you mean 'conv1'?");
  r = ptq::resolve_config(
      parse_ok("override_layer_configs { layer_name: \"nope\" calibration_config {} }"), layers);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == ptq::errc::unknown_layer);
  r = ptq::resolve_config(parse_ok("skip_fusion_layers: \"x\""), layers);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == ptq::errc::unknown_layer);
}

TEST_CASE("nothing left to quantize is an error", "[resolve]") {
  const std::vector<ptq::layer_info> layers{layer("conv1", layer_type::conv2d),
                                            layer("fc", layer_type::linear)};
  const auto r =
      ptq::resolve_config(parse_ok("skip_layers: \"conv1\" skip_layer_types: \"Linear\""), layers);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == ptq::errc::nothing_to_quantize);
}

TEST_CASE("an empty layer list says so, not that skip_layers skips everything", "[resolve]") {
  const auto r = ptq::resolve_config(parse_ok(""), {});
  REQUIRE_FALSE(r.ok());
  REQUIRE(r.diagnostics().size() == 1);
  CHECK(r.error().code == ptq::errc::bad_layer_list);
  CHECK(r.error().message == "the layer list is empty: the model has no layer to quantize");
}

TEST_CASE("a malformed layer list is an error", "[resolve]") {
  const std::vector<ptq::layer_info> layers{layer("a", layer_type::conv2d),
                                            layer("a", layer_type::linear)};
  const auto r = ptq::resolve_config(parse_ok(""), layers);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == ptq::errc::bad_layer_list);
}

TEST_CASE("settings a layer cannot take: warnings via common_config, errors via overrides",
          "[resolve]") {
  const std::vector<ptq::layer_info> layers{
      layer("conv", layer_type::conv2d), layer("c3d", layer_type::conv3d),
      layer("fc", layer_type::linear), layer("pool", layer_type::avg_pool2d)};
  struct row {
    const char* block;
    const char* layer_name;
    const char* type_name;
  };
  const row rows[] = {
      {"arq_quantize { quant_bits: 6 }", "fc", "Linear"},
      {"arq_quantize { channel_wise: true }", "pool", "AvgPool2d"},
      {"ada_quantize { }", "c3d", "Conv3d"},
      {"dmq_balancer { }", "pool", "AvgPool2d"},
      {"hfmg_quantize { dst_type: INT16 }", "pool", "AvgPool2d"},
      {"ifmr_quantize { asymmetric: true }", "c3d", "Conv3d"},
  };
  for (const auto& rw : rows) {
    INFO(rw.block);
    const std::string block = rw.block;
    const auto common = ptq::resolve_config(parse_ok("common_config { " + block + " }"), layers);
    REQUIRE(common.ok());
    bool warned = false;
    for (const auto& d : common.diagnostics()) {
      warned |= d.code == ptq::errc::degraded_setting &&
                d.message.find("'" + std::string(rw.layer_name) + "'") != std::string::npos;
    }
    CHECK(warned);
    const auto by_name =
        ptq::resolve_config(parse_ok(std::string("override_layer_configs { layer_name: \"") +
                                     rw.layer_name + "\" calibration_config { " + block + " } }"),
                            layers);
    REQUIRE_FALSE(by_name.ok());
    CHECK(by_name.error().code == ptq::errc::unsupported_setting);
    const auto by_type =
        ptq::resolve_config(parse_ok(std::string("override_layer_types { layer_type: \"") +
                                     rw.type_name + "\" calibration_config { " + block + " } }"),
                            layers);
    REQUIRE_FALSE(by_type.ok());
    CHECK(by_type.error().code == ptq::errc::unsupported_setting);
  }
}

TEST_CASE("degraded values take the fallback", "[resolve]") {
  const std::vector<ptq::layer_info> layers{layer("c3d", layer_type::conv3d),
                                            layer("fc", layer_type::linear)};
  const auto r = ptq::resolve_config(
      parse_ok("common_config { arq_quantize { channel_wise: true quant_bits: 7 } "
               "ifmr_quantize { asymmetric: true dst_type: INT16 } }"),
      layers);
  REQUIRE(r.ok());
  const auto* fc = r.value().find("fc");
  CHECK_FALSE(fc->weight->channel_wise);
  CHECK(fc->weight->num_bits == 8);
  CHECK(fc->activation.num_bits == 16);  // Linear with bias takes INT16
  const auto* c3d = r.value().find("c3d");
  CHECK_FALSE(c3d->activation.asymmetric);
  CHECK(c3d->activation.num_bits == 8);
  CHECK(c3d->weight->num_bits == 8);
}

TEST_CASE("strict mode rejects channel_wise inherited by Linear, as the toolkit", "[resolve]") {
  const std::vector<ptq::layer_info> layers{layer("conv", layer_type::conv2d),
                                            layer("fc", layer_type::linear)};
  ptq::resolve_options strict;
  strict.strict_channel_wise = true;
  const auto c = parse_ok("common_config {\n  arq_quantize { channel_wise: true } }");
  const auto r = ptq::resolve_config(c, layers, strict);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == ptq::errc::unsupported_setting);
  CHECK(r.error().where.begin.line == 2);
  CHECK(ptq::resolve_config(c, layers).ok());
}

TEST_CASE("the older dialect: conv and fc blocks by type, overrides by name", "[resolve]") {
  const auto c = parse_ok(read_data("seeds/legacy_quant.cfg"));
  const std::vector<ptq::layer_info> layers{
      layer("conv_1", layer_type::conv2d), layer("conv_2", layer_type::conv2d),
      layer("conv_3", layer_type::conv1d), layer("fc_4", layer_type::linear),
      layer("fc_5", layer_type::linear),   layer("pool", layer_type::avg_pool2d)};
  const auto r = ptq::resolve_config(c, layers);
  REQUIRE(r.ok());
  const auto& rc = r.value();
  CHECK_FALSE(rc.find("conv_1")->quant_enable);
  CHECK(rc.find("conv_2")->activation.search_range_start == 0.8f);
  CHECK(rc.find("conv_3")->weight->channel_wise);
  CHECK(rc.find("conv_3")->activation.search_range_start == 0.7f);
  CHECK_FALSE(rc.find("fc_4")->weight->channel_wise);
  CHECK(rc.find("fc_5")->activation.search_step == 0.02f);
  CHECK_FALSE(rc.find("pool")->weight->channel_wise);
  CHECK(rc.batch_num == 2);
}

TEST_CASE("older-dialect blocks next to common_config do not apply", "[resolve]") {
  const auto c = parse_ok(
      "common_config { ifmr_quantize { search_step: 0.05 } }\n"
      "conv_calibration_config { arq_quantize { channel_wise: false } ifmr_quantize { "
      "search_range_start: 0.7 search_range_end: 1.3 search_step: 0.01 max_percentile: 1 "
      "min_percentile: 1 } }\n"
      "fc_calibration_config { }\n");
  const auto r = ptq::resolve_config(c, {layer("conv", layer_type::conv2d)});
  REQUIRE(r.ok());
  CHECK(r.value().layers[0].weight->channel_wise);
  CHECK(r.value().layers[0].activation.search_step == 0.05f);
}

TEST_CASE("INT4 weights fall back to 8 bits on grouped or odd-Cin layers", "[resolve]") {
  auto grouped = layer("dw", layer_type::conv2d);
  grouped.groups = 4;
  auto odd = layer("rgb", layer_type::conv2d);
  odd.in_channels = 3;
  auto even = layer("c", layer_type::conv2d);
  even.in_channels = 8;
  const auto r = ptq::resolve_config(parse_ok("common_config { arq_quantize { quant_bits: 4 } }"),
                                     {grouped, odd, even});
  REQUIRE(r.ok());
  CHECK(r.value().find("dw")->weight->num_bits == 8);
  CHECK(r.value().find("rgb")->weight->num_bits == 8);
  CHECK(r.value().find("c")->weight->num_bits == 4);
  const auto over = ptq::resolve_config(
      parse_ok("override_layer_configs { layer_name: \"dw\" calibration_config { arq_quantize { "
               "quant_bits: 4 } } }"),
      {grouped});
  REQUIRE_FALSE(over.ok());
  CHECK(over.error().code == ptq::errc::unsupported_setting);
}

TEST_CASE("a layer list's unknown key names its entry from 1 and the key it resembles",
          "[resolve][layers]") {
  const auto r = ptq::try_read_layer_list(
      R"([{"name": "conv1", "type": "Conv2d"}, {"name": "fc", "typ": "Linear"}])");
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == ptq::errc::bad_layer_list);
  CHECK(r.error().message == "layer list entry 2 has unknown key 'typ'");
  CHECK(r.error().note == "did you mean 'type'?");
}
