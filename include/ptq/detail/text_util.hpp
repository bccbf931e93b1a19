// Small text helpers of the text readers (config, record, JSON): trimming, ASCII
// case-insensitive comparison, the toolkit's integer syntax, where a line ends, `line:col`.
// Depends on: core.
#pragma once

#include <charconv>
#include <string>
#include <string_view>
#include <system_error>

#include "ptq/core/error.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {
namespace detail {

/// Whether byte `i` of `text` ends a line: an LF, or a CR that no LF follows (classic Mac OS
/// files). Every `line:col` ptq reports counts lines so, and its excerpts split them so.
[[nodiscard]] constexpr bool ends_line(std::string_view text, std::size_t i) noexcept {
  return text[i] == '\n' || (text[i] == '\r' && (i + 1 == text.size() || text[i + 1] != '\n'));
}

[[nodiscard]] inline std::string where_text(source_region r) {
  return std::to_string(r.begin.line) + ":" + std::to_string(r.begin.column);
}

[[nodiscard]] inline std::string trim(std::string_view s) {
  const auto b = s.find_first_not_of(" \t\r\n\v\f");
  if (b == std::string_view::npos)
    return {};
  const auto e = s.find_last_not_of(" \t\r\n\v\f");
  return std::string(s.substr(b, e - b + 1));
}

[[nodiscard]] inline bool iequals(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size())
    return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    char x = a[i];
    char y = b[i];
    if (x >= 'A' && x <= 'Z')
      x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z')
      y = static_cast<char>(y - 'A' + 'a');
    if (x != y)
      return false;
  }
  return true;
}

/// Integer text as the toolkit's reader takes it: optional sign, decimal, 0x hex or 0 octal.
/// Returns false when the text is not an integer at all; `negative`/`magnitude` otherwise.
[[nodiscard]] inline bool parse_integer_text(std::string_view s, bool& negative,
                                             unsigned long long& magnitude,
                                             bool& overflow) noexcept {
  negative = false;
  overflow = false;
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) {
    negative = s[0] == '-';
    s.remove_prefix(1);
  }
  if (s.empty())
    return false;
  int base = 10;
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    base = 16;
    s.remove_prefix(2);
  } else if (s.size() > 1 && s[0] == '0') {
    base = 8;
    s.remove_prefix(1);
  }
  const auto res = std::from_chars(s.data(), s.data() + s.size(), magnitude, base);
  if (res.ptr != s.data() + s.size())
    return false;
  if (res.ec == std::errc::result_out_of_range)
    overflow = true;
  return res.ec == std::errc() || overflow;
}

}  // namespace detail
}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
