// Showing untrusted text in a diagnostic: control bytes and broken UTF-8 as `\xHH`, long text
// cut to a bounded excerpt. A config is user input; a terminal must get neither raw NUL or
// escape bytes nor megabytes of one line.
// Depends on: the standard library.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "ptq/core/abi.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {
namespace detail {

/// Length of the well-formed UTF-8 sequence that starts at `s[i]` (1 for ASCII), or 0 when the
/// byte does not start one (a stray continuation byte, an overlong form, a surrogate, a cut
/// sequence).
[[nodiscard]] inline std::size_t utf8_sequence_length(std::string_view s, std::size_t i) noexcept {
  const auto c = static_cast<unsigned char>(s[i]);
  if (c < 0x80)
    return 1;
  const std::size_t n = c >= 0xC2 && c <= 0xDF   ? 2
                        : c >= 0xE0 && c <= 0xEF ? 3
                        : c >= 0xF0 && c <= 0xF4 ? 4
                                                 : 0;
  if (n == 0 || n > s.size() - i)
    return 0;
  for (std::size_t k = 1; k < n; ++k) {
    if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80)
      return 0;
  }
  const auto c1 = static_cast<unsigned char>(s[i + 1]);
  if ((c == 0xE0 && c1 < 0xA0) || (c == 0xED && c1 > 0x9F) || (c == 0xF0 && c1 < 0x90) ||
      (c == 0xF4 && c1 > 0x8F)) {
    return 0;
  }
  return n;
}

/// One character of `s` at byte `i` as it is shown: `text` (printable ASCII, a tab, or a whole
/// well-formed UTF-8 sequence as it is; any other byte as `\xHH`), `bytes` source bytes long,
/// taking `cells` columns (a UTF-8 character counts as one; an escape, four per byte).
struct visible_char {
  std::string text;
  std::size_t bytes = 1;
  std::size_t cells = 1;
};

[[nodiscard]] inline visible_char visible_at(std::string_view s, std::size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  if ((c >= 0x20 && c < 0x7F) || c == '\t')
    return {std::string(1, s[i]), 1, 1};
  const std::size_t n = c >= 0x80 ? utf8_sequence_length(s, i) : 0;
  // C1 controls (U+0080..U+009F) act on terminals as ESC sequences do, and a byte order mark
  // is invisible: both are escaped too.
  const bool c1_control = n == 2 && c == 0xC2 && static_cast<unsigned char>(s[i + 1]) < 0xA0;
  const bool bom = n == 3 && s.substr(i, 3) == "\xEF\xBB\xBF";
  if (n > 0 && !c1_control && !bom)
    return {std::string(s.substr(i, n)), n, 1};
  static constexpr char hex[] = "0123456789abcdef";
  return {std::string{'\\', 'x', hex[c >> 4], hex[c & 15]}, 1, 4};
}

/// `s` with every character made visible (see `visible_at`); at most `max_bytes` of `s` are
/// shown, never cutting a UTF-8 sequence, and a cut is marked with "...".
[[nodiscard]] inline std::string visible_text(std::string_view s, std::size_t max_bytes) {
  std::string out;
  std::size_t i = 0;
  while (i < s.size()) {
    auto v = visible_at(s, i);
    if (i + v.bytes > max_bytes) {
      out += "...";
      break;
    }
    out += v.text;
    i += v.bytes;
  }
  return out;
}

/// How much of a value (a field name, a number, a layer name) a message quotes.
inline constexpr std::size_t max_quoted_bytes = 64;
/// How much of a message or a note `format_diagnostic` writes.
inline constexpr std::size_t max_message_bytes = 1024;
/// How much of a source line `format_diagnostic` shows around the caret.
inline constexpr std::size_t max_excerpt_bytes = 120;

/// A value as a message quotes it: visible and at most `max_quoted_bytes` long.
[[nodiscard]] inline std::string quoted_value(std::string_view s) {
  return visible_text(s, max_quoted_bytes);
}

}  // namespace detail
}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
