#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "ptq/prototext/lexer.hpp"

namespace {

std::vector<ptq::text::token> lex_all(std::string_view text) {
  ptq::text::lexer lx(text);
  std::vector<ptq::text::token> out;
  ptq::text::token t;
  while (true) {
    REQUIRE(lx.next(t));
    if (t.kind == ptq::text::token_kind::end)
      break;
    out.push_back(t);
  }
  return out;
}

ptq::diagnostic lex_error(std::string_view text) {
  ptq::text::lexer lx(text);
  ptq::text::token t;
  while (lx.next(t)) {
    REQUIRE(t.kind != ptq::text::token_kind::end);
  }
  return lx.error();
}

}  // namespace

TEST_CASE("character classes are constexpr", "[lexer]") {
  STATIC_REQUIRE(ptq::detail::is_ident_start('_'));
  STATIC_REQUIRE_FALSE(ptq::detail::is_ident_start('1'));
  STATIC_REQUIRE(ptq::detail::is_number_char('e'));
  STATIC_REQUIRE(ptq::detail::hex_value('F') == 15);
  STATIC_REQUIRE(ptq::detail::hex_value('g') == -1);
}

TEST_CASE("tokens carry kind, text and 1-based positions", "[lexer]") {
  const auto toks = lex_all("batch_num: 2 # comment\n  common_config <\n>");
  REQUIRE(toks.size() == 6);
  CHECK(toks[0].kind == ptq::text::token_kind::identifier);
  CHECK(toks[0].text == "batch_num");
  CHECK(toks[0].where.begin.line == 1);
  CHECK(toks[0].where.begin.column == 1);
  CHECK(toks[0].where.end.column == 10);
  CHECK(toks[1].text == ":");
  CHECK(toks[2].kind == ptq::text::token_kind::number);
  CHECK(toks[2].where.begin.column == 12);
  CHECK(toks[3].text == "common_config");
  CHECK(toks[3].where.begin.line == 2);
  CHECK(toks[3].where.begin.column == 3);
  CHECK(toks[4].text == "<");
  CHECK(toks[5].where.begin.line == 3);
}

TEST_CASE("numbers are lexed greedily like the toolkit's tokenizer", "[lexer]") {
  const auto toks = lex_all("-1.5e-3f +7 .5 0x1F 1.2.3 -inf");
  REQUIRE(toks.size() == 6);
  CHECK(toks[0].text == "-1.5e-3f");
  CHECK(toks[1].text == "+7");
  CHECK(toks[2].text == ".5");
  CHECK(toks[3].text == "0x1F");
  CHECK(toks[4].text == "1.2.3");
  CHECK(toks[5].text == "-inf");
  for (const auto& t : toks)
    CHECK(t.kind == ptq::text::token_kind::number);
}

TEST_CASE("string escapes follow protobuf's CUnescape", "[lexer]") {
  const auto toks = lex_all(R"("a\n\t\\\"\'\101\x42\u00e9" 'single "q"')");
  REQUIRE(toks.size() == 2);
  CHECK(toks[0].text == "a\n\t\\\"'AB\xC3\xA9");
  CHECK(toks[1].text == "single \"q\"");
  CHECK_FALSE(toks[0].spans_lines);
}

TEST_CASE("a string may span lines and says so", "[lexer]") {
  const auto toks = lex_all("\"\nOpname\n\"");
  REQUIRE(toks.size() == 1);
  CHECK(toks[0].spans_lines);
  CHECK(toks[0].text == "\nOpname\n");
}

TEST_CASE("lexical errors name the problem and the place", "[lexer]") {
  auto e = lex_error("a: \"open");
  CHECK(e.code == ptq::errc::unterminated_string);
  CHECK(e.where.begin.column == 4);
  e = lex_error("a: \"bad \\q\"");
  CHECK(e.code == ptq::errc::bad_escape);
  CHECK(e.where.begin.column == 9);
  e = lex_error("a: 1\n  @");
  CHECK(e.code == ptq::errc::unexpected_character);
  CHECK(e.where.begin.line == 2);
  CHECK(e.where.begin.column == 3);
  e = lex_error("a: \"\\400\"");
  CHECK(e.code == ptq::errc::bad_escape);
  e = lex_error("a: \"\\uD800\"");
  CHECK(e.code == ptq::errc::bad_escape);
}

TEST_CASE("string length is bounded", "[lexer]") {
  ptq::text_limits lim;
  lim.max_string_bytes = 8;
  ptq::text::lexer lx("\"123456789\"", lim);
  ptq::text::token t;
  CHECK_FALSE(lx.next(t));
  CHECK(lx.error().code == ptq::errc::string_too_long);
}
