// Rendering of diagnostics against their source text: the GCC-style message with the source line
// and a caret. The types (ptq::error, result, codes) are in ptq/core/error.hpp. Standard library
// only; works with -fno-exceptions.
// Depends on: core.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ptq/core/error.hpp"
#include "ptq/core/visible_text.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {

/// The older name of ptq::error (a diagnostic is an error or a warning), kept for users; the
/// library itself says `error`.
using diagnostic = error;

namespace detail {

/// The UTF-8 byte order mark. The lexer skips it at the start of a text; columns count from
/// after it.
inline constexpr std::string_view utf8_bom = "\xEF\xBB\xBF";

[[nodiscard]] inline bool starts_with_bom(std::string_view text) noexcept {
  return text.substr(0, utf8_bom.size()) == utf8_bom;
}

/// The end of the line that starts at `pos`: the next LF, or a CR not followed by one (the
/// lexer's line ends); `text.size()` at the end.
[[nodiscard]] inline std::size_t line_end(std::string_view text, std::size_t pos) noexcept {
  const auto nl = text.find_first_of("\r\n", pos);
  return nl == std::string_view::npos ? text.size() : nl;
}

/// Where the line after the one ending at `end` starts (past a CR LF pair as one line end).
[[nodiscard]] inline std::size_t next_line(std::string_view text, std::size_t end) noexcept {
  if (end < text.size() && text[end] == '\r' && end + 1 < text.size() && text[end + 1] == '\n')
    return end + 2;
  return end + 1;
}

inline std::string_view line_of(std::string_view text, std::uint32_t line) noexcept {
  if (starts_with_bom(text))
    text.remove_prefix(utf8_bom.size());
  std::size_t pos = 0;
  for (std::uint32_t l = 1; l < line; ++l) {
    const auto end = line_end(text, pos);
    if (end == text.size())
      return {};
    pos = next_line(text, end);
  }
  return text.substr(pos, line_end(text, pos) - pos);
}

/// The source line `text` and the marker line under it for the bytes [col, col + width): at
/// most `max_excerpt_bytes` of the line around the caret, cut ends marked "...", every byte
/// visible. The marker line repeats the tabs of the source line and leaves one column per
/// UTF-8 character and four per `\xHH`, so the caret stays under its byte.
inline void append_excerpt(std::string& out, std::string_view margin, std::string_view text,
                           std::size_t col, std::size_t width) {
  if (col > text.size())
    col = text.size();
  std::size_t begin = 0;
  std::size_t end = text.size();
  if (text.size() > max_excerpt_bytes) {
    begin = col > max_excerpt_bytes / 2 ? col - max_excerpt_bytes / 2 : 0;
    end = std::min(text.size(), begin + max_excerpt_bytes);
    begin = end - max_excerpt_bytes;
    // Whole UTF-8 characters only: a cut end moves to the start of the character it splits.
    auto continuation = [&](std::size_t i) {
      return (static_cast<unsigned char>(text[i]) & 0xC0) == 0x80;
    };
    while (begin < col && continuation(begin))
      ++begin;
    while (end < text.size() && end > col && continuation(end))
      --end;
  }
  std::string line = std::string(margin) + " | ";
  std::string marks = std::string(margin.size(), ' ') + " | ";
  if (begin > 0) {
    line += "...";
    marks += "   ";
  }
  bool caret = false;
  for (std::size_t i = begin; i < end;) {
    const auto v = visible_at(text, i);
    if (i + v.bytes <= col) {
      if (v.text == "\t") {
        marks += '\t';
      } else {
        marks.append(v.cells, ' ');
      }
    } else if (i < col + width) {
      marks += caret ? '~' : '^';
      marks.append(v.cells - 1, '~');
      caret = true;
    }
    line += v.text;
    i += v.bytes;
  }
  if (end < text.size())
    line += "...";
  if (!caret)
    marks += '^';  // the end of the line
  out += line;
  out += '\n';
  out += marks;
  out += '\n';
}

}  // namespace detail

/// Renders `path:line:col: error: message [E201]`, then an excerpt of the source line with a
/// caret under the region, then `note: ...` if any. Without a known position only the first
/// line is written. Message, note and excerpt are bounded and show control bytes as `\xHH`, so
/// neither a huge one-line file nor binary input reaches the terminal as it is.
[[nodiscard]] inline std::string format_diagnostic(const error& d, std::string_view source,
                                                   std::string_view path) {
  std::string out;
  if (!d.path.empty())
    path = d.path;
  out +=
      path.empty() ? std::string("<input>") : detail::visible_text(path, detail::max_message_bytes);
  if (d.where.known()) {
    out += ':' + std::to_string(d.where.begin.line) + ':' + std::to_string(d.where.begin.column);
  }
  out += is_error(d) ? ": error: " : ": warning: ";
  out += detail::visible_text(d.message, detail::max_message_bytes);
  out += is_error(d) ? " [E" : " [W";
  out += std::to_string(static_cast<unsigned>(d.code));
  out += "]\n";
  if (d.where.known()) {
    const auto text = detail::line_of(source, d.where.begin.line);
    if (!text.empty() || d.where.begin.column == 1) {
      const std::size_t col = d.where.begin.column - 1;
      std::size_t width = 1;
      if (d.where.end.line == d.where.begin.line && d.where.end.column > d.where.begin.column + 1) {
        width = d.where.end.column - d.where.begin.column;
      }
      detail::append_excerpt(out, ' ' + std::to_string(d.where.begin.line), text, col, width);
    }
  }
  if (!d.note.empty())
    out += "note: " + detail::visible_text(d.note, detail::max_message_bytes) + '\n';
  return out;
}

/// Renders every diagnostic in order.
[[nodiscard]] inline std::string format_diagnostics(const std::vector<error>& diags,
                                                    std::string_view source,
                                                    std::string_view path) {
  std::string out;
  for (const auto& d : diags)
    out += format_diagnostic(d, source, path);
  return out;
}

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
