// Diagnostics of the config layer: source positions, stable error codes, the result type and the
// GCC-style renderer. Standard library only; works with -fno-exceptions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ptq {

/// 1-based line and column (columns count bytes); {0, 0} means "unknown".
struct source_position {
  std::uint32_t line = 0;
  std::uint32_t column = 0;
};

/// A half-open region of the source text.
struct source_region {
  source_position begin;
  source_position end;
  [[nodiscard]] bool known() const noexcept { return begin.line != 0; }
};

/// Stable diagnostic codes, rendered as `[E<n>]` (errors) or `[W<n>]` (warnings).
/// docs/errors.md lists every code; numbers never change meaning.
enum class diag_code : std::uint16_t {
  // 1xx: lexical
  unexpected_character = 101,
  unterminated_string = 102,
  bad_escape = 103,
  bad_number = 104,
  input_too_large = 105,
  string_too_long = 106,
  // 11x: syntax
  unexpected_token = 110,
  nesting_too_deep = 111,
  unexpected_end = 112,
  missing_colon = 113,
  // 2xx: schema
  unknown_field = 201,
  wrong_type = 202,
  missing_field = 203,
  value_does_not_fit = 204,
  unknown_enum_value = 205,
  not_repeated = 206,
  // 3xx: value checks that need no layer list
  percentile_out_of_range = 301,
  search_range_invalid = 302,
  search_step_invalid = 303,
  num_of_bins_invalid = 304,
  migration_strength_out_of_range = 305,
  ada_param_out_of_range = 306,
  beta_range_invalid = 307,
  quant_bits_invalid = 308,
  batch_num_invalid = 309,
  dst_type_invalid = 310,
  fakequant_mode_invalid = 311,
  weight_offset_invalid = 312,
  legacy_fc_channel_wise = 313,
  duplicate_entry = 314,
  unknown_layer_type = 315,
  all_types_skipped = 316,
  // 4xx: resolution against a layer list
  unknown_layer = 401,
  not_fusable = 402,
  unsupported_setting = 403,
  nothing_to_quantize = 404,
  bad_layer_list = 405,
  // 5xx: detailed JSON config
  json_invalid = 501,
  json_unknown_key = 502,
  json_wrong_type = 503,
  json_value_out_of_range = 504,
  json_missing_key = 505,
  // 7xx: record files
  record_value_invalid = 701,
  record_length_mismatch = 702,
  record_unknown_layer = 703,
  record_duplicate_key = 704,
  record_missing_field = 705,
  // 8xx: calibration sessions
  session_layer_invalid = 801,
  // 6xx: warnings
  string_spans_lines = 601,
  field_repeated = 602,
  oneof_replaced = 603,
  legacy_blocks_ignored = 604,
  degraded_setting = 605,
  fusion_skipped = 606,
};

enum class severity : std::uint8_t { error, warning };

/// One error or warning: code, message (without position) and where it points.
struct diagnostic {
  diag_code code{};
  severity level = severity::error;
  std::string message;
  source_region where;
  std::string note;  ///< optional extra line, e.g. "did you mean 'quant_bits'?"
};

[[nodiscard]] inline bool is_error(const diagnostic& d) noexcept {
  return d.level == severity::error;
}

/// The value of an operation, or the errors that prevented it, plus any warnings.
template <class T>
class result {
 public:
  result() = default;
  explicit result(T value, std::vector<diagnostic> diags = {})
      : value_(std::move(value)), diags_(std::move(diags)) {}
  explicit result(std::vector<diagnostic> diags) : diags_(std::move(diags)) {}

  /// True when there is a value (no error was reported).
  [[nodiscard]] explicit operator bool() const noexcept { return value_.has_value(); }
  [[nodiscard]] bool ok() const noexcept { return value_.has_value(); }
  [[nodiscard]] const T& value() const& noexcept { return *value_; }
  [[nodiscard]] T& value() & noexcept { return *value_; }
  [[nodiscard]] T&& value() && noexcept { return std::move(*value_); }
  [[nodiscard]] const T* operator->() const noexcept { return &*value_; }
  [[nodiscard]] const T& operator*() const& noexcept { return *value_; }

  /// All diagnostics, errors and warnings, in the order they were found.
  [[nodiscard]] const std::vector<diagnostic>& diagnostics() const noexcept { return diags_; }
  /// The first error; only meaningful when `!ok()`.
  [[nodiscard]] const diagnostic& error() const noexcept {
    for (const auto& d : diags_) {
      if (is_error(d))
        return d;
    }
    return diags_.front();
  }

 private:
  std::optional<T> value_;
  std::vector<diagnostic> diags_;
};

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

}  // namespace ptq
