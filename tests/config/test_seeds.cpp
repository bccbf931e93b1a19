// The seed documents' sample files, copied exactly as printed.
#include <catch2/catch.hpp>

#include <string>

#include "helpers.hpp"
#include "ptq/config_json.hpp"

using ptq_test::read_data;

TEST_CASE("every seed sample parses exactly as printed", "[seeds]") {
  ptq::parse_options no_checks;
  no_checks.validate = false;
  for (const char* name :
       {"quant.cfg", "quant_hfmg.cfg", "ada_round.cfg", "dmq_balancer.cfg", "legacy_quant.cfg"}) {
    INFO(name);
    const auto text = read_data(std::string("seeds/") + name);
    const auto r = ptq::try_parse_config(text, no_checks);
    INFO(ptq::format_diagnostics(r.diagnostics(), text, name));
    CHECK(r.ok());
  }
}

TEST_CASE("quant.cfg as printed: the placeholder type is reported where it stands", "[seeds]") {
  const auto text = read_data("seeds/quant.cfg");
  const auto r = ptq::try_parse_config(text);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == ptq::errc::unknown_layer_type);
  CHECK(r.error().where.begin.line == 7);
  CHECK(r.error().where.begin.column == 18);
  CHECK(r.error().note.find("Conv2d") != std::string::npos);
  CHECK(ptq::format_diagnostic(r.error(), text, "quant.cfg") ==
        "quant.cfg:7:18: error: 'Optype' is not a quantizable layer type [E315]\n"
        " 7 | skip_layer_types:\"\n"
        "   |                  ^\n"
        "note: valid types: Conv2d, Conv3d, Linear, ConvTranspose2d, AvgPool2d, Conv1d, "
        "ConvTranspose1d, GRU, LSTM\n");
  std::size_t spans = 0;
  for (const auto& d : r.diagnostics())
    spans += d.code == ptq::errc::string_spans_lines;
  CHECK(spans == 4);  // skip_layers, skip_layer_types, skip_fusion_layers, layer_name
}

TEST_CASE("dmq_balancer.cfg as printed: both placeholder types are reported", "[seeds]") {
  const auto r = ptq::try_parse_config(read_data("seeds/dmq_balancer.cfg"));
  REQUIRE_FALSE(r.ok());
  std::size_t n = 0;
  for (const auto& d : r.diagnostics()) {
    if (d.code == ptq::errc::unknown_layer_type) {
      ++n;
      CHECK((d.where.begin.line == 7 || d.where.begin.line == 31));
    }
  }
  CHECK(n == 2);
}

TEST_CASE("the seeds without placeholders check cleanly", "[seeds]") {
  for (const char* name : {"quant_hfmg.cfg", "ada_round.cfg", "legacy_quant.cfg"}) {
    INFO(name);
    const auto r = ptq::try_parse_config(read_data(std::string("seeds/") + name));
    CHECK(r.ok());
    CHECK(ptq_test::warnings_of(r).empty());
  }
}

namespace {
std::vector<ptq::layer_info> bundled_layers(const std::string& file) {
  const auto r = ptq::try_read_layer_list(read_data(file));
  REQUIRE(r.ok());
  return r.value();
}
}  // namespace

TEST_CASE("with placeholders replaced, the seeds check, resolve and round-trip", "[seeds]") {
  const std::string dir = std::string(PTQ_TEST_DATA_DIR) + "/../../examples/configs/";
  for (const char* name :
       {"quant.cfg", "quant_hfmg.cfg", "ada_round.cfg", "dmq_balancer.cfg", "legacy_quant.cfg"}) {
    INFO(name);
    std::string text;
    text = ptq::value_or_throw(ptq::try_read_text_file(dir + name));
    const auto c = ptq_test::parse_ok(text);
    const std::string layers_file =
        std::string(name) == "legacy_quant.cfg" ? "legacy_quant.layers.json" : "layers.json";
    std::string layers_text;
    layers_text = ptq::value_or_throw(ptq::try_read_text_file(dir + layers_file));
    const auto layers = ptq::try_read_layer_list(layers_text);
    REQUIRE(layers.ok());
    const auto resolved = ptq::resolve_config(c, layers.value());
    INFO(ptq::format_diagnostics(resolved.diagnostics(), text, name));
    REQUIRE(resolved.ok());
    CHECK(resolved.value().layers.size() == layers.value().size());
    const auto again = ptq_test::parse_ok(ptq::write_config(c));
    CHECK(again == c);
  }
}

TEST_CASE("quant.cfg with real names: the toolkit's precedence per layer", "[seeds]") {
  std::string text;
  text = ptq::value_or_throw(ptq::try_read_text_file(std::string(PTQ_TEST_DATA_DIR) +
                                                     "/../../examples/configs/quant.cfg"));
  const auto c = ptq_test::parse_ok(text);
  const auto layers = bundled_layers("../../examples/configs/layers.json");
  const auto r = ptq::resolve_config(c, layers);
  REQUIRE(r.ok());
  const auto& rc = r.value();
  CHECK(rc.batch_num == 2);
  CHECK(rc.skip_fusion_layers == std::vector<std::string>{"conv1"});
  const auto* conv1 = rc.find("conv1");  // override_layer_types Conv2d
  REQUIRE(conv1);
  CHECK(conv1->weight->num_bits == 6);
  CHECK_FALSE(conv1->weight->channel_wise);
  CHECK_FALSE(conv1->activation.asymmetric);
  CHECK(conv1->activation.search_step == 0.02f);
  const auto* conv2 = rc.find("conv2");  // override_layer_configs: no quant_bits -> 8
  REQUIRE(conv2);
  CHECK(conv2->weight->num_bits == 8);
  CHECK(conv2->weight->channel_wise);
  const auto* fc = rc.find("fc");  // override_layer_types Linear: per-tensor, 8 bits
  REQUIRE(fc);
  CHECK(fc->weight->num_bits == 8);
  CHECK_FALSE(fc->weight->channel_wise);
  CHECK(fc->activation.asymmetric);
  CHECK(*fc->dmq_balancer_param == 0.5f);
  const auto* pool = rc.find("pool");
  REQUIRE(pool);
  CHECK_FALSE(pool->quant_enable);
  CHECK_FALSE(pool->dmq_balancer_param);
  // The bundled default prints no warning: fc has its own override and pool is skipped, so
  // nothing the config asks for is degraded.
  CHECK(r.diagnostics().empty());
}
