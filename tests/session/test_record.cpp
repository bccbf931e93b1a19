#include <catch2/catch.hpp>

#include <string>

#include "ptq/session/record.hpp"
#include "ptq/session/record_json_io.hpp"

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

ptq::record_file sample() {
  ptq::record_file rec;
  ptq::layer_record a;
  a.scale_d = 0.0235294f;
  a.offset_d = -128;
  a.scale_w = {0.00412f, 0.00388f, 0.00501f};
  a.offset_w = {0, 0, 0};
  a.act_type = "INT8";
  a.wts_type = "INT8";
  rec.records.push_back({"backbone.conv1", a});
  ptq::layer_record b;
  b.scale_d = 1.0f;
  b.offset_d = 5;
  b.scale_w = {0.5f};
  b.offset_w = {0};
  b.tensor_balance_factor = {0.25f, 4.0f};
  b.act_type = "INT16";
  b.wts_type = "INT6";
  b.fakequant_precision_mode = "FORCE_FP16_QUANT";
  rec.records.push_back({"head.fc", b});
  return rec;
}

ptq::errc first_error(const std::string& text,
                      const std::vector<ptq::layer_info>* shapes = nullptr) {
  const auto r = ptq::try_parse_record(text, shapes);
  REQUIRE_FALSE(r.ok());
  return r.error().code;
}

}  // namespace

TEST_CASE("record text: field-number order, the toolkit's float form", "[record]") {
  CHECK(ptq::write_record(sample()) ==
        "record {\n"
        "  key: \"backbone.conv1\"\n"
        "  value {\n"
        "    scale_d: 0.0235294\n"
        "    offset_d: -128\n"
        "    scale_w: 0.00412\n"
        "    scale_w: 0.00388\n"
        "    scale_w: 0.00501\n"
        "    offset_w: 0\n"
        "    offset_w: 0\n"
        "    offset_w: 0\n"
        "    act_type: \"INT8\"\n"
        "    wts_type: \"INT8\"\n"
        "  }\n"
        "}\n"
        "record {\n"
        "  key: \"head.fc\"\n"
        "  value {\n"
        "    scale_d: 1.0\n"
        "    offset_d: 5\n"
        "    scale_w: 0.5\n"
        "    offset_w: 0\n"
        "    tensor_balance_factor: 0.25\n"
        "    tensor_balance_factor: 4.0\n"
        "    act_type: \"INT16\"\n"
        "    wts_type: \"INT6\"\n"
        "    fakequant_precision_mode: \"FORCE_FP16_QUANT\"\n"
        "  }\n"
        "}\n");
}

TEST_CASE("record text reads back equal; so does the JSON form", "[record]") {
  const auto rec = sample();
  const auto back = ptq::try_parse_record(ptq::write_record(rec));
  REQUIRE(back.ok());
  CHECK(back.value() == rec);
  nlohmann::ordered_json j = rec;
  CHECK(j["head.fc"]["tensor_balance_factor"][1] == 4.0);
  CHECK(j.get<ptq::record_file>() == rec);
  const auto from_text = ptq::try_read_record_json(j.dump());
  REQUIRE(from_text.ok());
  CHECK(from_text.value() == rec);
  // Malformed JSON has its line:column; a key given twice is refused, not the last one kept.
  const auto bad = ptq::try_read_record_json("{\n  \"a\": {\"scale_d\": 0.5,,}\n}");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message.rfind("the record is not valid JSON at 2:24: ", 0) == 0);
  const auto twice = ptq::try_read_record_json(
      R"({"a": {"scale_d": 0.5, "offset_d": 0}, "a": {"scale_d": 0.5, "offset_d": 0}})");
  REQUIRE_FALSE(twice.ok());
  CHECK(twice.error().code == ptq::errc::record_duplicate_key);
  CHECK(twice.error().message == "key 'a' appears twice in one object of the record");
}

TEST_CASE("record checks (spec 6)", "[record]") {
  const std::string ok_value = "scale_d: 0.5 offset_d: 3 scale_w: 0.1 offset_w: 0";
  CHECK(ptq::try_parse_record("record { key: \"a\" value { " + ok_value + " } }").ok());
  CHECK(first_error("record { key: \"a\" value { scale_d: 0 offset_d: 3 } }") ==
        ptq::errc::record_value_invalid);
  CHECK(first_error("record { key: \"a\" value { scale_d: inf offset_d: 3 } }") ==
        ptq::errc::record_value_invalid);
  CHECK(first_error("record { key: \"a\" value { scale_d: 1 offset_d: 128 } }") ==
        ptq::errc::record_value_invalid);
  CHECK(ptq::try_parse_record(
            "record { key: \"a\" value { scale_d: 1 offset_d: 300 act_type: \"INT16\" } }")
            .ok());
  CHECK(first_error(
            "record { key: \"a\" value { scale_d: 1 offset_d: 0 scale_w: 1 offset_w: 1 } }") ==
        ptq::errc::record_value_invalid);
  CHECK(first_error("record { key: \"a\" value { scale_d: 1 offset_d: 0 scale_w: 1 scale_w: 2 "
                    "offset_w: 0 } }") == ptq::errc::record_length_mismatch);
  CHECK(first_error("record { key: \"a\" value { scale_d: 1 offset_d: 0 wts_type: \"INT5\" } }") ==
        ptq::errc::record_value_invalid);
  CHECK(first_error(
            "record { key: \"a\" value { scale_d: 1 offset_d: 0 tensor_balance_factor: 0 } }") ==
        ptq::errc::record_value_invalid);
  CHECK(first_error("record { key: \"a\" value { offset_d: 0 } }") ==
        ptq::errc::record_missing_field);
  CHECK(first_error("record { value { scale_d: 1 offset_d: 0 } }") ==
        ptq::errc::record_missing_field);
  CHECK(first_error("record { key: \"a\" value { scale_d: 1 offset_d: 0 } }\n"
                    "record { key: \"a\" value { scale_d: 1 offset_d: 0 } }") ==
        ptq::errc::record_duplicate_key);
  CHECK(first_error("record { key: \"a\" value { scale_h: 1 } }") == ptq::errc::unknown_field);
  CHECK(first_error("record { key: \"a\" value { scale_d: 1 offset_d: 2.5 } }") ==
        ptq::errc::value_does_not_fit);
}

TEST_CASE("record checks against the model's layers", "[record]") {
  const std::vector<ptq::layer_info> shapes{channels("a", 2, 3)};
  const std::string good =
      "record { key: \"a\" value { scale_d: 1 offset_d: 0 scale_w: 1 scale_w: 2 offset_w: 0 "
      "offset_w: 0 tensor_balance_factor: 1 tensor_balance_factor: 1 tensor_balance_factor: 1 } }";
  CHECK(ptq::try_parse_record(good, &shapes).ok());
  CHECK(first_error("record { key: \"b\" value { scale_d: 1 offset_d: 0 } }", &shapes) ==
        ptq::errc::record_unknown_layer);
  CHECK(first_error("record { key: \"a\" value { scale_d: 1 offset_d: 0 scale_w: 1 scale_w: 1 "
                    "scale_w: 1 offset_w: 0 offset_w: 0 offset_w: 0 } }",
                    &shapes) == ptq::errc::record_length_mismatch);
  CHECK(
      first_error("record { key: \"a\" value { scale_d: 1 offset_d: 0 tensor_balance_factor: 1 } }",
                  &shapes) == ptq::errc::record_length_mismatch);
}

TEST_CASE("record errors carry line and column", "[record]") {
  const auto r = ptq::try_parse_record("record {\n  key: \"a\"\n  value { scale_d: x }\n}");
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == ptq::errc::wrong_type);
  CHECK(r.error().where.begin.line == 3);
  CHECK(r.error().where.begin.column == 20);
  const auto s = ptq::try_parse_record("record { key: \"a\" value { scale_d: 1 offset_d: 0 }");
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().code == ptq::errc::unexpected_end);
}
