// Shared helpers of the config tests.
#pragma once

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "ptq/config.hpp"

namespace ptq_test {

inline std::string data_path(const std::string& rel) {
  return std::string(PTQ_TEST_DATA_DIR) + "/" + rel;
}

inline std::string read_data(const std::string& rel) {
  std::string text;
  text = ptq::value_or_throw(ptq::try_read_text_file(data_path(rel)));
  return text;
}

inline ptq::amct_config parse_ok(const std::string& text) {
  auto r = ptq::try_parse_config(text);
  INFO(ptq::format_diagnostics(r.diagnostics(), text, "test"));
  REQUIRE(r.ok());
  return r.value();
}

inline std::vector<ptq::diagnostic> warnings_of(const ptq::result<ptq::amct_config>& r) {
  std::vector<ptq::diagnostic> w;
  for (const auto& d : r.diagnostics()) {
    if (!ptq::is_error(d))
      w.push_back(d);
  }
  return w;
}

inline ptq::layer_info layer(std::string name, ptq::layer_type t) {
  ptq::layer_info l;
  l.name = std::move(name);
  l.type = t;
  return l;
}

}  // namespace ptq_test
