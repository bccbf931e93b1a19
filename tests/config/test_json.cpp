#include <catch2/catch.hpp>

#include <string>

#include "helpers.hpp"
#include "ptq/config_json.hpp"

using ptq::detail::python_repr;

TEST_CASE("floats print like Python's repr", "[json]") {
  CHECK(python_repr(0.7) == "0.7");
  CHECK(python_repr(20.0) == "20.0");
  CHECK(python_repr(2.0) == "2.0");
  CHECK(python_repr(0.999999) == "0.999999");
  CHECK(python_repr(1e-5) == "1e-05");
  CHECK(python_repr(0.0001) == "0.0001");
  CHECK(python_repr(1e16) == "1e+16");
  CHECK(python_repr(123456789012345.0) == "123456789012345.0");
  CHECK(python_repr(-1.5) == "-1.5");
  CHECK(python_repr(0.0) == "0.0");
  CHECK(python_repr(2.5e-7) == "2.5e-07");
}

TEST_CASE("float32 config values become the shortest decimal, as the toolkit does", "[json]") {
  CHECK(ptq::detail::toolkit_double(0.999999f) == 0.999999);
  CHECK(ptq::detail::toolkit_double(0.3f) == 0.3);
  CHECK(python_repr(ptq::detail::toolkit_double(0.0199999996f)) == "0.02");
}

TEST_CASE("the toolkit layout: 4-space indent, no space after colon, no newline", "[json]") {
  nlohmann::ordered_json j;
  j["a"] = 1;
  j["b"] = nlohmann::ordered_json::array({0.5, 2.0});
  j["c"] = nlohmann::ordered_json::object();
  j["d"] = nlohmann::ordered_json::array();
  j["e"] = "x\"y";
  CHECK(ptq::dump_toolkit_json(j) ==
        "{\n    \"a\":1,\n    \"b\":[\n        0.5,\n        2.0\n    ],\n    \"c\":{},\n"
        "    \"d\":[],\n    \"e\":\"x\\\"y\"\n}");
}

TEST_CASE("detailed JSON reads back equal (to_json / from_json)", "[json]") {
  const char* const cases[] = {"01_precedence",         "09_ada_common_unsupported_types",
                               "13_dmq_common_avgpool", "19_int16_override_linear_conv",
                               "29_seed_dmq_balancer",  "31_seed_quant_hfmg"};
  for (const char* name : cases) {
    INFO(name);
    const auto text = ptq_test::read_data(std::string("resolve-cases/") + name + ".expected.json");
    const auto r = ptq::try_read_quant_config(text);
    INFO(ptq::format_diagnostics(r.diagnostics(), text, name));
    REQUIRE(r.ok());
    CHECK(ptq::to_toolkit_json(r.value()) == text);
    nlohmann::ordered_json j = r.value();
    const auto back = j.get<ptq::resolved_config>();
    CHECK(back == r.value());
  }
}

TEST_CASE("FORCE_FP16_QUANT is written after do_fusion", "[json]") {
  const auto c = ptq_test::parse_ok("fakequant_precision_mode: FORCE_FP16_QUANT");
  const auto r = ptq::resolve_config(c, {ptq_test::layer("l", ptq::layer_type::linear)});
  REQUIRE(r.ok());
  const auto text = ptq::to_toolkit_json(r.value());
  CHECK(text.find("\"do_fusion\":true,\n    \"fakequant_precision_mode\":\"FORCE_FP16_QUANT\",\n"
                  "    \"skip_fusion_layers\":[]") != std::string::npos);
  CHECK(ptq::try_read_quant_config(text).value().fakequant_precision_mode.has_value());
}

namespace {
ptq::errc json_error(const std::string& text) {
  const auto r = ptq::try_read_quant_config(text);
  REQUIRE_FALSE(r.ok());
  return r.error().code;
}
const std::string layer_ok =
    R"("l":{"quant_enable":true,"activation_quant_params":{"num_bits":8,"act_algo":"hfmg","asymmetric":true,"num_of_bins":4096},"weight_quant_params":{"num_bits":8,"channel_wise":false,"wts_algo":"arq_quantize"}})";
}  // namespace

TEST_CASE("detailed JSON rules (spec 4.5)", "[json]") {
  CHECK(ptq::try_read_quant_config("{\"version\":1," + layer_ok + "}").ok());
  CHECK(json_error("{\"version\":2," + layer_ok + "}") == ptq::errc::json_value_out_of_range);
  CHECK(json_error("{\"batch_num\":0," + layer_ok + "}") == ptq::errc::json_value_out_of_range);
  CHECK(json_error("{\"batch_num\":1.5," + layer_ok + "}") == ptq::errc::json_wrong_type);
  CHECK(json_error("{\"version\":1,\"version\":1," + layer_ok + "}") == ptq::errc::json_invalid);
  CHECK(json_error("{\"version\":1,") == ptq::errc::json_invalid);
  CHECK(json_error("{\"fakequant_precision_mode\":\"FP8\"," + layer_ok + "}") ==
        ptq::errc::fakequant_mode_invalid);
  CHECK(json_error(R"({"l":{"quant_enable":false,"activation_quant_params":{}}})") ==
        ptq::errc::nothing_to_quantize);
  CHECK(
      json_error(
          R"({"l":{"quant_enable":true,"activation_quant_params":{"num_bits":8,"num_of_bins":4096,"search_step":0.01}}})") ==
      ptq::errc::json_value_out_of_range);
  CHECK(json_error(R"({"l":{"quant_enable":true,"activation_quant_params":{"num_bits":32}}})") ==
        ptq::errc::json_value_out_of_range);
  CHECK(json_error(
            R"({"l":{"quant_enable":true,"activation_quant_params":{"max_percentile":0.5}}})") ==
        ptq::errc::json_value_out_of_range);
  CHECK(
      json_error(
          R"({"l":{"quant_enable":true,"activation_quant_params":{"search_range":[1.3,0.7]}}})") ==
      ptq::errc::json_value_out_of_range);
  CHECK(
      json_error(
          R"({"l":{"quant_enable":true,"activation_quant_params":{},"weight_quant_params":{"channel_wise":true,"wts_algo":"arq_quantize","reg_param":0.1}}})") ==
      ptq::errc::json_unknown_key);
  CHECK(
      json_error(
          R"({"l":{"quant_enable":true,"activation_quant_params":{},"weight_quant_params":{"channel_wise":true,"wts_algo":"ada_quantize","beta_range":[2,20]}}})") ==
      ptq::errc::json_value_out_of_range);
  CHECK(
      json_error(
          R"({"l":{"quant_enable":true,"dmq_balancer_param":0.9,"activation_quant_params":{}}})") ==
      ptq::errc::json_value_out_of_range);
  CHECK(json_error(R"({"l":{"quant_enable":true,"activation_quant_params":{},"bogus":1}})") ==
        ptq::errc::json_unknown_key);
}

TEST_CASE("malformed JSON reports line and column", "[json]") {
  const auto r = ptq::try_read_quant_config("{\n  \"version\": 1,\n  oops\n}");
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == ptq::errc::json_invalid);
  CHECK(r.error().where.begin.line == 3);
  CHECK(r.error().where.begin.column == 3);
}

TEST_CASE("malformed JSON with classic Mac OS line ends: lines end at a lone CR, as excerpts do",
          "[json]") {
  // The config lexer and the excerpt count a CR that no LF follows as a line end; a JSON error
  // counted with LF only would name line 1 and show the wrong text.
  const std::string text = "{\r  \"version\": 1,\r\n  oops\r}";
  const auto r = ptq::try_read_quant_config(text);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().where.begin.line == 3);
  CHECK(r.error().where.begin.column == 3);
  const std::string rendered = ptq::format_diagnostic(r.error(), text, "q.json");
  CHECK(rendered.rfind("q.json:3:3: error: malformed JSON: [json.exception.parse_error.101] "
                       "parse error: syntax error while parsing object key",
                       0) == 0);  // nlohmann's own (LF-only) line count is left out
  CHECK(rendered.substr(rendered.find('\n') + 1) ==
        " 3 |   oops\n"
        "   |   ^\n");
}

TEST_CASE("a UTF-8 byte order mark before the JSON is skipped; columns count from after it",
          "[json]") {
  const std::string bom = "\xEF\xBB\xBF";
  const std::string text = bom + "{\"version\": x}";
  const auto r = ptq::try_read_quant_config(text);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().where.begin.line == 1);
  CHECK(r.error().where.begin.column == 13);
  const std::string rendered = ptq::format_diagnostic(r.error(), text, "q.json");
  CHECK(rendered.substr(rendered.find('\n') + 1) ==
        " 1 | {\"version\": x}\n"
        "   |             ^\n");
  const auto layers = ptq::try_read_layer_list(bom + R"([{"name":"a","type":"Conv2d"}])");
  REQUIRE(layers.ok());
  CHECK(layers.value().front().name == "a");
}

TEST_CASE("layer lists", "[json]") {
  const auto r = ptq::try_read_layer_list(
      R"([{"name":"a","type":"Conv2d","in_channels":3,"groups":1},{"name":"b","type":"Linear","bias":false}])");
  REQUIRE(r.ok());
  REQUIRE(r.value().size() == 2);
  CHECK(*r.value()[0].in_channels == 3);
  CHECK_FALSE(r.value()[1].has_bias);
  CHECK_FALSE(r.value()[1].in_channels.has_value());
  for (const char* bad :
       {"{}", "[1]", R"([{"type":"Conv2d"}])", R"([{"name":"a","type":"Optype"}])",
        R"([{"name":"a","type":"LSTM"}])", R"([{"name":"a","type":"Conv2d","groups":0}])",
        R"([{"name":"a","type":"Conv2d","colour":1}])", "[", ""}) {
    INFO(bad);
    const auto e = ptq::try_read_layer_list(bad);
    REQUIRE_FALSE(e.ok());
    CHECK(e.error().code == ptq::errc::bad_layer_list);
  }
}
