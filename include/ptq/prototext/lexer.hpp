// Lexer for protobuf text format, with the token rules of the toolkit's own reader (Python
// protobuf's text_format tokenizer).
// Depends on: core and detail.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "ptq/core/abi.hpp"
#include "ptq/core/visible_text.hpp"
#include "ptq/detail/text_util.hpp"
#include "ptq/prototext/diagnostics.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {

/// Size limits that keep hostile input from exhausting memory or the stack.
struct text_limits {
  std::size_t max_input_bytes = std::size_t{16} << 20;  ///< 16 MiB
  std::size_t max_string_bytes = std::size_t{1} << 16;  ///< 64 KiB per string value
  std::uint32_t max_depth = 64;                         ///< nested messages
};

namespace detail {
constexpr bool is_ident_start(char c) noexcept {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
constexpr bool is_digit(char c) noexcept {
  return c >= '0' && c <= '9';
}
constexpr bool is_ident_char(char c) noexcept {
  return is_ident_start(c) || is_digit(c);
}
/// Characters that continue a number-like token (the toolkit's tokenizer is this greedy).
constexpr bool is_number_char(char c) noexcept {
  return is_ident_char(c) || c == '.' || c == '+' || c == '-';
}
constexpr bool is_space(char c) noexcept {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}
constexpr int hex_value(char c) noexcept {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}
inline void append_utf8(std::string& out, std::uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}
}  // namespace detail

/// The protobuf text-format machinery the config and the record readers share: tokens, the
/// lexer, the text tree and its binder. Not needed to use ptq; its names stay out of ptq::.
namespace text {

enum class token_kind : std::uint8_t {
  end,         ///< end of input
  identifier,  ///< [A-Za-z_][A-Za-z0-9_]*
  number,      ///< anything starting like a number; interpreted by the field's type
  string,      ///< one quoted literal, already unescaped
  punct,       ///< one of { } < > [ ] : , ;
};

struct token {
  token_kind kind = token_kind::end;
  std::string_view raw;  ///< the token's source text (for strings: including the quotes)
  std::string text;      ///< strings: the unescaped value; others: same as raw
  source_region where;
  bool spans_lines = false;  ///< a string literal that contains a newline
};

/// Splits text into tokens. On a lexical error `next()` returns false and `error()` says why.
class lexer {
 public:
  /// A UTF-8 byte order mark at the start of `text` is skipped (editors on Windows write one);
  /// columns count from after it, as `format_diagnostic` shows the line.
  explicit lexer(std::string_view text, text_limits limits = {}) noexcept
      : text_(text),
        limits_(limits),
        i_(detail::starts_with_bom(text) ? detail::utf8_bom.size() : 0) {}

  /// Reads the next token into `out`; false on a lexical error.
  [[nodiscard]] bool next(token& out) {
    skip_space_and_comments();
    out = token{};
    const source_position start = pos_;
    const std::size_t begin = i_;
    if (i_ >= text_.size()) {
      out.kind = token_kind::end;
      out.where = {start, start};
      return true;
    }
    const char c = text_[i_];
    if (detail::is_ident_start(c)) {
      while (i_ < text_.size() && detail::is_ident_char(text_[i_]))
        advance();
      out.kind = token_kind::identifier;
    } else if (detail::is_digit(c) || c == '+' || c == '-' ||
               (c == '.' && i_ + 1 < text_.size() && detail::is_digit(text_[i_ + 1]))) {
      advance();
      while (i_ < text_.size() && detail::is_number_char(text_[i_]))
        advance();
      out.kind = token_kind::number;
    } else if (c == '"' || c == '\'') {
      return lex_string(out);
    } else if (c == '{' || c == '}' || c == '<' || c == '>' || c == '[' || c == ']' || c == ':' ||
               c == ',' || c == ';') {
      advance();
      out.kind = token_kind::punct;
    } else {
      advance_code_point();
      const auto raw = text_.substr(begin, i_ - begin);
      error_ = {errc::unexpected_character,
                severity::error,
                raw == detail::utf8_bom
                    ? "unexpected byte order mark (U+FEFF); one is allowed only at the start"
                    : "unexpected character '" + detail::quoted_value(raw) + "'",
                {start, pos_},
                {}};
      return false;
    }
    out.raw = text_.substr(begin, i_ - begin);
    out.text = std::string(out.raw);
    out.where = {start, pos_};
    return true;
  }

  [[nodiscard]] const ptq::error& error() const noexcept { return error_; }
  [[nodiscard]] source_position position() const noexcept { return pos_; }

 private:
  /// A line ends at LF, or at a CR that no LF follows (classic Mac OS files: a comment there
  /// ends at the CR, never at the end of the file; the parser warns, W607).
  [[nodiscard]] bool at_line_end() const noexcept { return detail::ends_line(text_, i_); }
  void advance() noexcept {
    if (at_line_end()) {
      ++pos_.line;
      pos_.column = 1;
    } else {
      ++pos_.column;
    }
    ++i_;
  }
  void advance_code_point() noexcept {
    advance();
    while (i_ < text_.size() && (static_cast<unsigned char>(text_[i_]) & 0xC0) == 0x80)
      advance();
  }
  void skip_space_and_comments() noexcept {
    while (i_ < text_.size()) {
      const char c = text_[i_];
      if (detail::is_space(c)) {
        advance();
      } else if (c == '#') {
        while (i_ < text_.size() && !at_line_end())
          advance();
      } else {
        break;
      }
    }
  }

  bool fail(errc code, std::string message, source_region where) {
    error_ = {code, severity::error, std::move(message), where, {}};
    return false;
  }

  bool lex_string(token& out) {
    const source_position start = pos_;
    const std::size_t begin = i_;
    const char quote = text_[i_];
    advance();
    std::string value;
    bool spans_lines = false;
    while (true) {
      if (i_ >= text_.size()) {
        return fail(errc::unterminated_string, "string literal is not closed",
                    {start, {start.line, start.column + 1}});
      }
      const char c = text_[i_];
      if (c == quote) {
        advance();
        break;
      }
      if (at_line_end())
        spans_lines = true;
      if (c != '\\') {
        value += c;
        advance();
      } else {
        const source_position esc = pos_;
        advance();
        if (i_ >= text_.size())
          continue;  // reported as unterminated on the next turn
        if (!unescape(value, esc))
          return false;
      }
      if (value.size() > limits_.max_string_bytes) {
        return fail(
            errc::string_too_long,
            "string literal is longer than " + std::to_string(limits_.max_string_bytes) + " bytes",
            {start, {start.line, start.column + 1}});
      }
    }
    out.kind = token_kind::string;
    out.raw = text_.substr(begin, i_ - begin);
    out.text = std::move(value);
    out.where = {start, pos_};
    out.spans_lines = spans_lines;
    return true;
  }

  // Handles the character(s) after a backslash (protobuf's CUnescape).
  bool unescape(std::string& value, source_position esc) {
    const char c = text_[i_];
    auto simple = [&](char ch) {
      value += ch;
      advance();
      return true;
    };
    switch (c) {
      case 'n':
        return simple('\n');
      case 'r':
        return simple('\r');
      case 't':
        return simple('\t');
      case 'a':
        return simple('\a');
      case 'b':
        return simple('\b');
      case 'f':
        return simple('\f');
      case 'v':
        return simple('\v');
      case '\\':
        return simple('\\');
      case '\'':
        return simple('\'');
      case '"':
        return simple('"');
      case '?':
        return simple('?');
      default:
        break;
    }
    if (c >= '0' && c <= '7') {
      unsigned v = 0;
      for (int k = 0; k < 3 && i_ < text_.size() && text_[i_] >= '0' && text_[i_] <= '7'; ++k) {
        v = v * 8 + static_cast<unsigned>(text_[i_] - '0');
        advance();
      }
      if (v > 0xFF)
        return fail(errc::bad_escape, "octal escape is larger than \\377", {esc, pos_});
      value += static_cast<char>(v);
      return true;
    }
    if (c == 'x' || c == 'X') {
      advance();
      unsigned v = 0;
      int digits = 0;
      while (digits < 2 && i_ < text_.size() && detail::hex_value(text_[i_]) >= 0) {
        v = v * 16 + static_cast<unsigned>(detail::hex_value(text_[i_]));
        advance();
        ++digits;
      }
      if (digits == 0)
        return fail(errc::bad_escape, "\\x needs a hex digit", {esc, pos_});
      value += static_cast<char>(v);
      return true;
    }
    if (c == 'u' || c == 'U') {
      const int need = c == 'u' ? 4 : 8;
      advance();
      std::uint32_t cp = 0;
      for (int k = 0; k < need; ++k) {
        if (i_ >= text_.size() || detail::hex_value(text_[i_]) < 0) {
          return fail(errc::bad_escape,
                      std::string("\\") + c + " needs " + std::to_string(need) + " hex digits",
                      {esc, pos_});
        }
        cp = cp * 16 + static_cast<std::uint32_t>(detail::hex_value(text_[i_]));
        advance();
      }
      if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
        return fail(errc::bad_escape, "escape is not a valid Unicode code point", {esc, pos_});
      }
      detail::append_utf8(value, cp);
      return true;
    }
    advance_code_point();
    return fail(errc::bad_escape, "unknown escape sequence '\\" + std::string(1, c) + "'",
                {esc, pos_});
  }

  std::string_view text_;
  text_limits limits_;
  std::size_t i_ = 0;
  source_position pos_{1, 1};
  ptq::error error_;
};

}  // namespace text
}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
