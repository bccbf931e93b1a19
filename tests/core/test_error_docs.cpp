// docs/errors.md lists every code of ptq::errc: a code added to PTQ_ERROR_CODES without its index
// row fails here.
#include <catch2/catch.hpp>

#include <fstream>
#include <iterator>
#include <string>

#include "ptq/core/error_codes.hpp"

namespace {

std::string errors_md() {
  std::ifstream in(std::string(PTQ_TEST_DATA_DIR) + "/../../docs/errors.md", std::ios::binary);
  REQUIRE(in);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

TEST_CASE("docs/errors.md indexes every error code by number and name", "[core][docs]") {
  const std::string doc = errors_md();
  const auto index_end = doc.find("\n## Lexical errors");
  REQUIRE(index_end != std::string::npos);
  const std::string index = doc.substr(0, index_end);
  struct code {
    const char* name;
    int number;
  };
  const code codes[] = {
#define PTQ_CODE_ENTRY(name, number) {#name, number},
      PTQ_ERROR_CODES(PTQ_CODE_ENTRY)
#undef PTQ_CODE_ENTRY
  };
  for (const auto& c : codes) {
    // 6xx are the warnings; also 1107 (input_ignored) and in the export range 1220
    // (export_lossy), 1221 (export_engine_caveat), 1255 (onnx_dmq_divide) and 1256
    // (onnx_layer_float).
    const bool warning = c.number / 100 == 6 || c.number == 1107 || c.number == 1220 ||
                         c.number == 1221 || c.number == 1255 || c.number == 1256;
    const std::string num = std::to_string(c.number);
    const std::string linked = std::string(warning ? "[W" : "[E") + num + "](#" +
                               (warning ? "w" : "e") + num + ") | `" + c.name + "`";
    const std::string plain = std::string(warning ? "| W" : "| E") + num + " | `" + c.name + "`";
    INFO(c.number << " " << c.name);
    const bool listed =
        index.find(linked) != std::string::npos || index.find(plain) != std::string::npos;
    CHECK(listed);
  }
  CHECK(std::size(codes) > 80);
}
