#include <catch2/catch.hpp>

#include <cmath>
#include <string>

#include "helpers.hpp"

using ptq_test::parse_ok;
using ptq_test::warnings_of;

TEST_CASE("scalars of every kind bind to typed fields", "[parser]") {
  const auto c = parse_ok(R"(
    batch_num: 0x10
    activation_offset: False
    do_fusion: t
    fakequant_precision_mode: FORCE_FP16_QUANT
    common_config {
      arq_quantize { channel_wise: 0 quant_bits: 07 }
      ifmr_quantize { search_range_start: .75 search_range_end: 1.25f search_step: 5e-2
                      max_percentile: 1 min_percentile: 0.999999 asymmetric: true dst_type: 2 }
      dmq_balancer: { migration_strength: +0.4 }
    }
  )");
  CHECK(*c.batch_num == 16);
  CHECK(*c.activation_offset == false);
  CHECK(*c.do_fusion == true);
  CHECK(*c.fakequant_precision_mode == ptq::fakequant_precision_mode::force_fp16_quant);
  REQUIRE(c.common_config);
  const auto& cc = *c.common_config;
  REQUIRE(cc.arq);
  CHECK(*cc.arq->channel_wise == false);
  CHECK(*cc.arq->quant_bits == 7);  // octal 07
  REQUIRE(cc.ifmr);
  CHECK(*cc.ifmr->search_range_start == 0.75f);
  CHECK(*cc.ifmr->search_range_end == 1.25f);
  CHECK(*cc.ifmr->search_step == 0.05f);
  CHECK(*cc.ifmr->max_percentile == 1.0f);  // an integer where a float is expected
  CHECK(*cc.ifmr->min_percentile == 0.999999f);
  CHECK(*cc.ifmr->dst_type == ptq::calibration_data_type::int16);  // enum by number
  REQUIRE(cc.dmq);
  CHECK(*cc.dmq->migration_strength == 0.4f);
  CHECK_FALSE(cc.ada);
  CHECK_FALSE(cc.hfmg);
}

TEST_CASE("unset is kept apart from set", "[parser]") {
  const auto c = parse_ok("common_config { ifmr_quantize { search_step: 0.02 } }");
  CHECK_FALSE(c.batch_num.has_value());
  CHECK_FALSE(c.activation_offset.has_value());
  CHECK_FALSE(c.common_config->ifmr->asymmetric.has_value());
  CHECK(c.common_config->ifmr->search_step.has_value());
}

TEST_CASE("floats: inf, nan, suffixes, and float32 rounding like the toolkit", "[parser]") {
  auto r = ptq::try_parse_config(
      "common_config { ada_quantize { reg_param: inf beta_range_start: -Infinity "
      "beta_range_end: nanf warm_start: 1e39 } }",
      {ptq::text_limits{}, false});
  REQUIRE(r.ok());
  const auto& a = *r.value().common_config->ada;
  CHECK(std::isinf(*a.reg_param));
  CHECK(*a.beta_range_start < 0);
  CHECK(std::isinf(*a.beta_range_start));
  CHECK(std::isnan(*a.beta_range_end));
  CHECK(std::isinf(*a.warm_start));  // larger than float32: infinity, as the toolkit stores it
}

TEST_CASE("the numeric field type is a template parameter", "[parser]") {
  const auto r =
      ptq::try_parse_config<double>("common_config { dmq_balancer { migration_strength: 0.3 } }");
  REQUIRE(r.ok());
  CHECK(*r.value().common_config->dmq->migration_strength == 0.3);
}

TEST_CASE("syntax variants: <>, optional colon, separators, lists", "[parser]") {
  const auto c = parse_ok(R"(
    skip_layers: ["a", 'b'], skip_layers: "c";
    skip_layer_types: "Conv1d" "" ;
    common_config < arq_quantize: < channel_wise: true > >
    override_layer_configs: [ { layer_name: "x" calibration_config {} }, < layer_name: "y"
      calibration_config {} > ]
    override_layer_configs { layer_name: 'z' "2" calibration_config: {} }
  )");
  REQUIRE(c.skip_layers.size() == 3);
  CHECK(c.skip_layers[0].value == "a");
  CHECK(c.skip_layers[1].value == "b");
  CHECK(c.skip_layers[2].value == "c");
  REQUIRE(c.skip_layer_types.size() == 1);
  CHECK(c.skip_layer_types[0].value == "Conv1d");  // adjacent literals concatenate
  CHECK(*c.common_config->arq->channel_wise);
  REQUIRE(c.override_layer_configs.size() == 3);
  CHECK(*c.override_layer_configs[2].layer_name == "z2");
}

TEST_CASE("a scalar given twice: the last wins, with a warning naming both places", "[parser]") {
  const auto r = ptq::try_parse_config("batch_num: 2\nbatch_num: 3\n");
  REQUIRE(r.ok());
  CHECK(*r.value().batch_num == 3);
  const auto w = warnings_of(r);
  REQUIRE(w.size() == 1);
  CHECK(w[0].code == ptq::errc::field_repeated);
  CHECK(w[0].where.begin.line == 2);
  CHECK(w[0].message.find("1:12") != std::string::npos);
}

TEST_CASE("a message given twice is merged", "[parser]") {
  const auto c = parse_ok(
      "common_config { arq_quantize { channel_wise: true } }\n"
      "common_config { arq_quantize { quant_bits: 6 } dmq_balancer {} }\n");
  REQUIRE(c.common_config->arq);
  CHECK(*c.common_config->arq->channel_wise);
  CHECK(*c.common_config->arq->quant_bits == 6);
  CHECK(c.common_config->dmq);
}

TEST_CASE("oneof: the last member wins with a warning naming both", "[parser]") {
  const auto r = ptq::try_parse_config(
      "common_config {\n arq_quantize { channel_wise: true }\n ada_quantize { num_iteration: 5 }\n"
      " hfmg_quantize {}\n ifmr_quantize {}\n}\n");
  REQUIRE(r.ok());
  const auto& cc = *r.value().common_config;
  CHECK_FALSE(cc.arq);
  REQUIRE(cc.ada);
  CHECK(*cc.ada->num_iteration == 5);
  CHECK_FALSE(cc.hfmg);
  CHECK(cc.ifmr);
  const auto w = warnings_of(r);
  REQUIRE(w.size() == 2);
  CHECK(w[0].code == ptq::errc::oneof_replaced);
  CHECK(w[0].where.begin.line == 3);
  CHECK(w[0].message.find("arq_quantize") != std::string::npos);
  CHECK(w[1].where.begin.line == 5);
}

TEST_CASE("strings spanning lines are trimmed and warned about", "[parser]") {
  const auto r = ptq::try_parse_config("skip_layers : \"\n  conv1 \n\"\n");
  REQUIRE(r.ok());
  CHECK(r.value().skip_layers.at(0).value == "conv1");
  const auto w = warnings_of(r);
  REQUIRE(w.size() == 1);
  CHECK(w[0].code == ptq::errc::string_spans_lines);
  CHECK(w[0].where.begin.line == 1);
  CHECK(w[0].where.begin.column == 15);
}

TEST_CASE("the older dialect reads into the same model", "[parser]") {
  const auto c = parse_ok(ptq_test::read_data("seeds/legacy_quant.cfg"));
  CHECK(c.uses_legacy_fields());
  CHECK(c.legacy_blocks_apply());
  REQUIRE(c.conv_calibration_config);
  CHECK(*c.conv_calibration_config->arq->channel_wise);
  REQUIRE(c.fc_calibration_config);
  CHECK_FALSE(*c.fc_calibration_config->arq->channel_wise);
  CHECK(c.override_layer_configs.size() == 2);
  CHECK(c.skip_layers.at(0).value == "conv_1");
}

TEST_CASE("older dialect: required fields and weight_offset", "[parser]") {
  auto r = ptq::try_parse_config("weight_offset: false\nconv_calibration_config { }\n");
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == ptq::errc::missing_field);
  CHECK(r.error().message.find("fc_calibration_config") != std::string::npos);
  r = ptq::try_parse_config(
      "weight_offset: true\nconv_calibration_config { }\nfc_calibration_config { }\n");
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == ptq::errc::weight_offset_invalid);
  CHECK(r.error().where.begin.line == 1);
  r = ptq::try_parse_config(
      "conv_calibration_config { ifmr_quantize { search_step: 0.01 } }\n"
      "fc_calibration_config { arq_quantize { channel_wise: true } }\n");
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == ptq::errc::missing_field);  // 4 of ifmr's 5 fields
  bool fc_cw = false;
  for (const auto& d : r.diagnostics())
    fc_cw |= d.code == ptq::errc::legacy_fc_channel_wise;
  CHECK(fc_cw);
}

TEST_CASE("older dialect blocks are ignored next to common_config, with a warning", "[parser]") {
  const auto r = ptq::try_parse_config(
      "common_config { }\nconv_calibration_config { }\nfc_calibration_config { }\n");
  REQUIRE(r.ok());
  CHECK_FALSE(r.value().legacy_blocks_apply());
  const auto w = warnings_of(r);
  REQUIRE(w.size() == 1);
  CHECK(w[0].code == ptq::errc::legacy_blocks_ignored);
  CHECK(w[0].message.find("conv_calibration_config and fc_calibration_config") !=
        std::string::npos);
  CHECK(w[0].where.begin.line == 2);
}

TEST_CASE("validation can be switched off", "[parser]") {
  ptq::parse_options o;
  o.validate = false;
  CHECK(ptq::try_parse_config("batch_num: 0", o).ok());
  CHECK_FALSE(ptq::try_parse_config("batch_num: 0").ok());
}

TEST_CASE("search_step is compared with the range as exact decimals", "[parser]") {
  CHECK(ptq::try_parse_config("common_config { ifmr_quantize { search_range_start: 0.7 "
                              "search_range_end: 1.3 search_step: 0.6 } }")
            .ok());
  CHECK_FALSE(ptq::try_parse_config("common_config { ifmr_quantize { search_range_start: 0.7 "
                                    "search_range_end: 1.3 search_step: 0.600001 } }")
                  .ok());
}

#if PTQ_EXCEPTIONS
TEST_CASE("the throwing API renders the errors", "[parser]") {
  try {
    (void)ptq::parse_config("batch_num: -1\n", "x.cfg");
    FAIL("no exception");
  } catch (const ptq::exception& e) {
    CHECK(e.code() == ptq::errc::value_does_not_fit);
    CHECK(std::string(e.what()).rfind("x.cfg:1:12: error: value -1 does not fit", 0) == 0);
  }
  CHECK_THROWS_AS(ptq::parse_config_file("/nonexistent/file.cfg"), ptq::exception);
}
#endif

TEST_CASE("a CR alone ends a line, comments included, with a warning (W607)", "[parser]") {
  // Classic Mac OS line ends: protobuf's text format reads a lone CR as a space, so its first
  // comment would run to the end of the file and the config would check as empty.
  const auto cr =
      ptq::try_parse_config("# global\rbatch_num: 5\r# more\ractivation_offset: false\r");
  REQUIRE(cr.ok());
  CHECK(cr->batch_num.value_or(0) == 5);
  CHECK(cr->activation_offset.value_or(true) == false);
  const auto w = cr.warnings();
  REQUIRE(w.size() == 1);
  CHECK(w[0].code == ptq::errc::lone_cr_line_end);
  CHECK(w[0].where.begin.line == 1);
  CHECK(w[0].where.begin.column == 9);
  // Errors after a CR are on their line, and the rendered source line is that line alone.
  const std::string bad = "batch_num: 1\rbatch_nun: 2\r";
  const auto e = ptq::try_parse_config(bad);
  REQUIRE_FALSE(e.ok());
  CHECK(e.error().where.begin.line == 2);
  const auto shown = ptq::format_diagnostic(e.error(), bad, "mac.cfg");
  CHECK(shown.rfind("mac.cfg:2:1: error:", 0) == 0);
  CHECK(shown.find(" 2 | batch_nun: 2\n") != std::string::npos);
  // CR LF and LF files: no warning.
  CHECK(ptq::try_parse_config("# a\r\nbatch_num: 5\r\n").warnings().empty());
  CHECK(ptq::try_parse_config("# a\nbatch_num: 5\n").warnings().empty());
}
