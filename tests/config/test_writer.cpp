#include <catch2/catch.hpp>

#include <string>

#include "helpers.hpp"

TEST_CASE("canonical proto text", "[writer]") {
  const auto c = ptq_test::parse_ok(
      "batch_num:2 skip_layers:'a\"b' common_config<arq_quantize{quant_bits:6}"
      "ifmr_quantize{search_step:0.02 dst_type:INT16}dmq_balancer{}>"
      "override_layer_types{layer_type:\"Linear\" "
      "calibration_config{hfmg_quantize{num_of_bins:2048}}}");
  CHECK(ptq::write_config(c) ==
        "batch_num: 2\n"
        "skip_layers: \"a\\\"b\"\n"
        "common_config {\n"
        "  arq_quantize {\n"
        "    quant_bits: 6\n"
        "  }\n"
        "  ifmr_quantize {\n"
        "    search_step: 0.02\n"
        "    dst_type: INT16\n"
        "  }\n"
        "  dmq_balancer {\n"
        "  }\n"
        "}\n"
        "override_layer_types {\n"
        "  layer_type: \"Linear\"\n"
        "  calibration_config {\n"
        "    hfmg_quantize {\n"
        "      num_of_bins: 2048\n"
        "    }\n"
        "  }\n"
        "}\n");
}

TEST_CASE("parse, write, parse gives an equal config for every valid test input", "[writer]") {
  std::vector<std::string> files = {"seeds/quant_hfmg.cfg", "seeds/ada_round.cfg",
                                    "seeds/legacy_quant.cfg"};
  for (const char* name :
       {"01_precedence", "03_asymmetric_offset_false_common_hfmg",
        "05_conv3d_override_asymmetric_error", "07_hfmg_vs_ifmr_defaults",
        "09_ada_common_unsupported_types", "11_quant_bits7_common", "13_dmq_common_avgpool",
        "17_channel_wise_common_linear_overridden", "19_int16_override_linear_conv",
        "21_int16_override_linear_nobias_error", "23_skip_fusion_linear_error", "25_int4_pack",
        "29_seed_dmq_balancer", "31_seed_quant_hfmg"}) {
    files.push_back(std::string("resolve-cases/") + name + ".cfg");
  }
  for (const auto& f : files) {
    INFO(f);
    const auto c = ptq_test::parse_ok(ptq_test::read_data(f));
    const auto text = ptq::write_config(c);
    const auto again = ptq_test::parse_ok(text);
    CHECK(again == c);
    CHECK(ptq::write_config(again) == text);
  }
}

TEST_CASE("special floats and strings survive the round trip", "[writer]") {
  ptq::parse_options raw;
  raw.validate = false;
  const auto r = ptq::try_parse_config(
      "skip_layers: \"tab\\there\\001\" common_config { ada_quantize { reg_param: 1e-30 "
      "beta_range_start: inf beta_range_end: 3.4028235e38 } }",
      raw);
  REQUIRE(r.ok());
  const auto again = ptq::try_parse_config(ptq::write_config(r.value()), raw);
  REQUIRE(again.ok());
  CHECK(again.value() == r.value());
}
