// Rendering of diagnostics against their source text: the GCC-style message with the source line
// and a caret. The types (ptq::error, result, codes) are in ptq/core/error.hpp. Standard library
// only; works with -fno-exceptions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ptq/core/error.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {

/// The config layer's name for ptq::error (a diagnostic is an error or a warning).
using diagnostic = error;

namespace detail {

inline std::string_view line_of(std::string_view text, std::uint32_t line) noexcept {
  std::size_t pos = 0;
  for (std::uint32_t l = 1; l < line; ++l) {
    const auto nl = text.find('\n', pos);
    if (nl == std::string_view::npos)
      return {};
    pos = nl + 1;
  }
  auto end = text.find('\n', pos);
  if (end == std::string_view::npos)
    end = text.size();
  auto out = text.substr(pos, end - pos);
  if (!out.empty() && out.back() == '\r')
    out.remove_suffix(1);
  return out;
}

}  // namespace detail

/// Renders `path:line:col: error: message [E201]`, then the source line with a caret under the
/// region, then `note: ...` if any. Without a known position only the first line is written.
[[nodiscard]] inline std::string format_diagnostic(const diagnostic& d, std::string_view source,
                                                   std::string_view path) {
  std::string out;
  if (!d.path.empty())
    path = d.path;
  out += path.empty() ? std::string_view("<input>") : path;
  if (d.where.known()) {
    out += ':' + std::to_string(d.where.begin.line) + ':' + std::to_string(d.where.begin.column);
  }
  out += is_error(d) ? ": error: " : ": warning: ";
  out += d.message;
  out += is_error(d) ? " [E" : " [W";
  out += std::to_string(static_cast<unsigned>(d.code));
  out += "]\n";
  if (d.where.known()) {
    const auto text = detail::line_of(source, d.where.begin.line);
    if (!text.empty() || d.where.begin.column == 1) {
      const auto num = std::to_string(d.where.begin.line);
      out += ' ' + num + " | ";
      out += text;
      out += '\n';
      out += ' ' + std::string(num.size(), ' ') + " | ";
      const std::size_t col = d.where.begin.column - 1;
      for (std::size_t i = 0; i < col && i < text.size(); ++i)
        out += text[i] == '\t' ? '\t' : ' ';
      out += '^';
      std::size_t width = 1;
      if (d.where.end.line == d.where.begin.line && d.where.end.column > d.where.begin.column + 1) {
        width = d.where.end.column - d.where.begin.column;
      }
      const std::size_t room = text.size() > col ? text.size() - col : 1;
      if (width > room)
        width = room < 1 ? 1 : room;
      out.append(width - 1, '~');
      out += '\n';
    }
  }
  if (!d.note.empty())
    out += "note: " + d.note + '\n';
  return out;
}

/// Renders every diagnostic in order.
[[nodiscard]] inline std::string format_diagnostics(const std::vector<diagnostic>& diags,
                                                    std::string_view source,
                                                    std::string_view path) {
  std::string out;
  for (const auto& d : diags)
    out += format_diagnostic(d, source, path);
  return out;
}

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
