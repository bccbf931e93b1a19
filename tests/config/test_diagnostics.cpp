// format_diagnostic against hostile source text: bounded excerpts of huge lines, control bytes
// and broken UTF-8 made visible with the caret still under its byte, and the UTF-8 BOM.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "ptq/config.hpp"
#include "ptq/session/record.hpp"

namespace {

std::string first_error(const std::string& text) {
  auto r = ptq::try_parse_config(text);
  REQUIRE_FALSE(r.ok());
  return ptq::format_diagnostic(r.error(), text, "cfg");
}

// The marker line of line 1..9: the margin, `n` columns of blanks, then `marker`.
std::string marks(std::size_t n, const std::string& marker) {
  return "   | " + std::string(n, ' ') + marker + "\n";
}

std::string repeat(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i)
    out += s;
  return out;
}

}  // namespace

TEST_CASE("a 5 MB one-line file shows 120 bytes around the caret, cut ends marked") {
  const std::string text = std::string(300, ' ') + "@" + std::string(std::size_t{5} << 20, 'x');
  const std::string out = first_error(text);
  // The window is bytes [240, 360): 60 before the caret, the caret's byte, 59 after.
  CHECK(out ==
        "cfg:1:301: error: unexpected character '@' [E101]\n"
        " 1 | ..." +
            std::string(60, ' ') + "@" + std::string(59, 'x') + "...\n" + marks(3 + 60, "^"));
  CHECK(out.size() < 300);
}

TEST_CASE("a huge value is quoted in 64 bytes and its marker stops at the excerpt's end") {
  const std::string text = "batch_num: " + std::string(std::size_t{5} << 20, '1');
  CHECK(first_error(text) == "cfg:1:12: error: value " + std::string(64, '1') +
                                 "... does not fit field 'batch_num' (an unsigned 32-bit "
                                 "integer: 0 to 4294967295) [E204]\n"
                                 " 1 | batch_num: " +
                                 std::string(109, '1') + "...\n" +
                                 marks(11, "^" + std::string(108, '~')));
}

TEST_CASE("an error at the end of a long line keeps the caret under its byte") {
  const std::string text = repeat("a: 1 ", 200) + "@";
  // The caret's byte is the last one: the window is the line's last 120 bytes.
  CHECK(first_error(text) ==
        "cfg:1:1001: error: unexpected character '@' [E101]\n"
        " 1 | ..." +
            text.substr(881) + "\n" + marks(3 + 119, "^"));
}

TEST_CASE("control bytes are shown as \\xHH in the message and the line, caret aligned") {
  SECTION("the offending byte itself") {
    CHECK(first_error("batch_num:\x1b 1") ==
          "cfg:1:11: error: unexpected character '\\x1b' [E101]\n"
          " 1 | batch_num:\\x1b 1\n" +
              marks(10, "^~~~"));
  }
  SECTION("a NUL before the caret takes four columns") {
    const std::string text("skip_layers: \"a\0b\" @", 20);
    CHECK(first_error(text) ==
          "cfg:1:20: error: unexpected character '@' [E101]\n"
          " 1 | skip_layers: \"a\\x00b\" @\n" +
              marks(22, "^"));
  }
  SECTION("a NUL as the offending byte") {
    const std::string text("batch_num: 1\n\0", 14);
    CHECK(first_error(text) ==
          "cfg:2:1: error: unexpected character '\\x00' [E101]\n"
          " 2 | \\x00\n" +
              marks(0, "^~~~"));
  }
  SECTION("after an identifier") {
    CHECK(first_error("fakequant_precision_mode: FORCE\x01") ==
          "cfg:1:32: error: unexpected character '\\x01' [E101]\n"
          " 1 | fakequant_precision_mode: FORCE\\x01\n" +
              marks(31, "^~~~"));
  }
  SECTION("a control byte decoded from a string escape, echoed by a later message") {
    const std::string text = "skip_layers: \"a\\x07b\"";
    const auto config = ptq::try_parse_config(text);
    REQUIRE(config.ok());
    ptq::layer_info conv1;
    conv1.name = "conv1";
    const auto r = ptq::resolve_config(config.value(), std::vector<ptq::layer_info>{conv1});
    REQUIRE_FALSE(r.ok());
    CHECK(ptq::format_diagnostic(r.error(), text, "cfg") ==
          "cfg:1:14: error: skip_layers names layer 'a\\x07b', which is not in the model [E401]\n"
          " 1 | skip_layers: \"a\\x07b\"\n" +
              marks(13, "^~~~~~~~"));
  }
}

TEST_CASE("UTF-8 characters are one column; broken UTF-8 and C1 controls are escaped") {
  SECTION("a two-byte character before the caret") {
    CHECK(first_error("skip_layers: \"\xC3\xA9\" @") ==
          "cfg:1:19: error: unexpected character '@' [E101]\n"
          " 1 | skip_layers: \"\xC3\xA9\" @\n" +
              marks(17, "^"));
  }
  SECTION("a stray continuation byte and a C1 control (CSI) in a string") {
    CHECK(first_error("skip_layers: \"\x80\xC2\x9B\" @") ==
          "cfg:1:20: error: unexpected character '@' [E101]\n"
          " 1 | skip_layers: \"\\x80\\xc2\\x9b\" @\n" +
              marks(28, "^"));
  }
  SECTION("an invalid lead byte is the offending character") {
    CHECK(first_error("batch_num: 1 \xFF") ==
          "cfg:1:14: error: unexpected character '\\xff' [E101]\n"
          " 1 | batch_num: 1 \\xff\n" +
              marks(13, "^~~~"));
  }
  SECTION("a long line is not cut inside a character") {
    const std::string e_acute = "\xC3\xA9";
    const std::string text =
        "skip_layers: \"" + std::string(59, 'a') + repeat(e_acute, 100) + "\" @";
    // '@' is byte 275 of 276, so the window is bytes [156, 276); byte 156 is the second half
    // of an 'é', so the excerpt starts at 157: 58 of them, the quote, the blank, the '@'.
    CHECK(first_error(text) ==
          "cfg:1:276: error: unexpected character '@' [E101]\n"
          " 1 | ..." +
              repeat(e_acute, 58) + "\" @\n" + marks(3 + 60, "^"));
  }
}

TEST_CASE("a UTF-8 byte order mark at the start is skipped; columns count from after it") {
  const std::string bom = "\xEF\xBB\xBF";
  auto ok = ptq::try_parse_config(bom + "batch_num: 4\n");
  REQUIRE(ok.ok());
  CHECK(ok.value().batch_num.value_or(0) == 4);
  CHECK(ok.value().batch_num.where.begin.column == 12);

  CHECK(first_error(bom + "batch_num: x") ==
        "cfg:1:12: error: field 'batch_num' takes an integer, not 'x' [E202]\n"
        " 1 | batch_num: x\n"
        "   |            ^\n");

  // Only at the very start: elsewhere it is an error that names it, and the line shows it.
  CHECK(first_error("batch_num: 1 " + bom) ==
        "cfg:1:14: error: unexpected byte order mark (U+FEFF); one is allowed only at the start "
        "[E101]\n"
        " 1 | batch_num: 1 \\xef\\xbb\\xbf\n"
        "   |              ^~~~~~~~~~~~\n");
  // The record reader shares the lexer.
  auto rec = ptq::try_parse_record(bom + "record { key: \"a\" value { scale_d: 1 offset_d: 0 } }");
  CHECK(rec.ok());
}

TEST_CASE("visible_text bounds and escapes") {
  using ptq::detail::visible_text;
  CHECK(visible_text("abc", 3) == "abc");
  CHECK(visible_text("abcd", 3) == "abc...");
  CHECK(visible_text(std::string("a\0\n\t\x7f", 5), 100) == "a\\x00\\x0a\t\\x7f");
  CHECK(visible_text("\xC3\xA9\xC3\xA9", 3) == "\xC3\xA9...");   // never half a character
  CHECK(visible_text("\xE0\x80\x80", 10) == "\\xe0\\x80\\x80");  // overlong form
  CHECK(visible_text("\xED\xA0\x80", 10) == "\\xed\\xa0\\x80");  // surrogate
  CHECK(visible_text("\xF0\x9F\x98\x80", 10) == "\xF0\x9F\x98\x80");
  CHECK(visible_text("\xF0\x9F\x98", 10) == "\\xf0\\x9f\\x98");  // cut sequence
}

TEST_CASE("a long message or note is cut at 1024 bytes") {
  ptq::error e =
      ptq::make_error(ptq::errc::unknown_layer, std::string(5000, 'm'), std::string(3000, 'n'));
  CHECK(ptq::format_diagnostic(e, {}, "cfg") == "cfg: error: " + std::string(1024, 'm') +
                                                    "... [E401]\nnote: " + std::string(1024, 'n') +
                                                    "...\n");
}
