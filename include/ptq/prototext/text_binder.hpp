// The typed reading of protobuf-text trees shared by the config parser (config/parser.hpp) and
// the record reader (session/record.hpp): the toolkit reader's scalar rules (booleans, integer
// ranges, floats, enums, strings), the shape checks, and the merge rules of repeated, oneof and
// message fields.
// Depends on: core and detail.
#pragma once

#include <charconv>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "ptq/core/abi.hpp"
#include "ptq/core/visible_text.hpp"
#include "ptq/detail/suggest.hpp"
#include "ptq/detail/text_util.hpp"
#include "ptq/prototext/diagnostics.hpp"
#include "ptq/prototext/lexer.hpp"
#include "ptq/prototext/setting.hpp"
#include "ptq/prototext/text_tree.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {
namespace text {

/// Typed reading of text-tree values with the toolkit reader's scalar rules, shared by the
/// config binder and the record reader. `Derived` supplies the message binders (CRTP).
template <class Derived, class Float>
class text_binder {
 public:
  explicit text_binder(std::vector<ptq::error>& diags) : diags_(diags) {}

  // Public so that derived binders can take `&base::to_...` (clang rejects member pointers to
  // protected members of a dependent base); the class lives in ptq::text.
  Derived& derived() { return static_cast<Derived&>(*this); }

  void error(errc code, std::string message, source_region where, std::string note = {}) {
    diags_.emplace_back(code, severity::error, std::move(message), where, std::move(note));
  }
  void warning(errc code, std::string message, source_region where, std::string note = {}) {
    diags_.emplace_back(code, severity::warning, std::move(message), where, std::move(note));
  }

  void unknown(const text_field& f, std::string_view message_name,
               const std::vector<std::string_view>& names) {
    error(errc::unknown_field,
          "unknown field '" + detail::quoted_value(f.name) + "' in " + std::string(message_name),
          f.name_region, detail::suggest(f.name, names));
  }

  // ---- shape checks ------------------------------------------------------------------------
  bool expect_single(const text_field& f) {
    if (f.is_list) {
      error(
          errc::not_repeated,
          "field '" + detail::quoted_value(f.name) + "' is not repeated; a [list] cannot be given",
          f.name_region);
      return false;
    }
    return true;
  }
  bool expect_scalar(const text_field& f, const text_value& v) {
    if (v.is_message) {
      error(errc::wrong_type,
            "field '" + detail::quoted_value(f.name) + "' takes a value, not a message block",
            v.where);
      return false;
    }
    if (!f.has_colon) {
      error(errc::missing_colon,
            "expected ':' between '" + detail::quoted_value(f.name) + "' and its value", v.where);
      return false;
    }
    return true;
  }
  bool expect_message(const text_field& f, const text_value& v) {
    if (!v.is_message) {
      error(
          errc::wrong_type,
          "field '" + detail::quoted_value(f.name) + "' takes a message block { ... }, not a value",
          v.where);
      return false;
    }
    return true;
  }

  // ---- scalar conversions --------------------------------------------------------------------
  bool to_bool(const text_field& f, const text_value& v, bool& out) {
    const auto& t = v.scalar;
    if (t.kind == token_kind::identifier || t.kind == token_kind::number) {
      const auto& s = t.text;
      if (s == "true" || s == "True" || s == "t" || s == "1") {
        out = true;
        return true;
      }
      if (s == "false" || s == "False" || s == "f" || s == "0") {
        out = false;
        return true;
      }
    }
    error(errc::wrong_type,
          "field '" + detail::quoted_value(f.name) + "' takes a boolean (true or false), not " +
              describe(t),
          v.where);
    return false;
  }

  // The sign and magnitude of an integer value; an error for anything else.
  bool read_integer(const text_field& f, const text_value& v, bool& neg, unsigned long long& mag) {
    const auto& t = v.scalar;
    if (t.kind != token_kind::number) {
      error(errc::wrong_type,
            "field '" + detail::quoted_value(f.name) + "' takes an integer, not " + describe(t),
            v.where);
      return false;
    }
    bool overflow = false;
    if (!detail::parse_integer_text(t.text, neg, mag, overflow)) {
      if (looks_like_float(t.text)) {
        error(errc::value_does_not_fit,
              "field '" + detail::quoted_value(f.name) + "' takes an integer, not the number " +
                  detail::quoted_value(t.text),
              v.where);
      } else {
        error(errc::bad_number, "malformed number '" + detail::quoted_value(t.text) + "'", v.where);
      }
      return false;
    }
    if (overflow)
      mag = ~0ULL;  // out of every 32-bit range below
    return true;
  }

  bool to_uint32(const text_field& f, const text_value& v, std::uint32_t& out) {
    bool neg = false;
    unsigned long long mag = 0;
    if (!read_integer(f, v, neg, mag))
      return false;
    if ((neg && mag != 0) || mag > 0xFFFFFFFFULL) {
      error(errc::value_does_not_fit,
            "value " + detail::quoted_value(v.scalar.text) + " does not fit field '" + f.name +
                "' (an unsigned 32-bit integer: 0 to 4294967295)",
            v.where);
      return false;
    }
    out = static_cast<std::uint32_t>(mag);
    return true;
  }

  bool to_int32(const text_field& f, const text_value& v, std::int32_t& out) {
    bool neg = false;
    unsigned long long mag = 0;
    if (!read_integer(f, v, neg, mag))
      return false;
    if (mag > (neg ? 0x80000000ULL : 0x7FFFFFFFULL)) {
      error(errc::value_does_not_fit,
            "value " + detail::quoted_value(v.scalar.text) + " does not fit field '" + f.name +
                "' (a signed 32-bit integer)",
            v.where);
      return false;
    }
    out = neg ? static_cast<std::int32_t>(-static_cast<long long>(mag))
              : static_cast<std::int32_t>(mag);
    return true;
  }

  static bool looks_like_float(std::string_view s) {
    if (!s.empty() && (s[0] == '-' || s[0] == '+'))
      s.remove_prefix(1);
    if (s.size() > 1 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
      return false;
    if (!s.empty() && (s.back() == 'f' || s.back() == 'F'))
      s.remove_suffix(1);
    // A number with a fraction or an exponent; a second sign or an integer that merely failed
    // (an octal 08) is malformed instead.
    if (s.empty() || !(detail::is_digit(s[0]) || s[0] == '.') ||
        s.find_first_of(".eE") == std::string_view::npos) {
      return false;
    }
    double d = 0;
    const auto res = std::from_chars(s.data(), s.data() + s.size(), d);
    return res.ptr == s.data() + s.size();
  }

  bool to_float(const text_field& f, const text_value& v, Float& out) {
    const auto& t = v.scalar;
    if (t.kind != token_kind::number && t.kind != token_kind::identifier) {
      error(errc::wrong_type,
            "field '" + detail::quoted_value(f.name) + "' takes a number, not " + describe(t),
            v.where);
      return false;
    }
    std::string_view s = t.text;
    bool neg = false;
    std::string_view body = s;
    if (!body.empty() && (body[0] == '-' || body[0] == '+')) {
      neg = body[0] == '-';
      body.remove_prefix(1);
    }
    std::string_view word = body;
    if (!word.empty() && (word.back() == 'f' || word.back() == 'F') &&
        !detail::iequals(word, "inf")) {
      word.remove_suffix(1);
    }
    if (detail::iequals(word, "inf") || detail::iequals(word, "infinity") ||
        detail::iequals(body, "inf") || detail::iequals(body, "infinity")) {
      out = neg ? -std::numeric_limits<Float>::infinity() : std::numeric_limits<Float>::infinity();
      return true;
    }
    if (detail::iequals(word, "nan") && !neg) {
      out = std::numeric_limits<Float>::quiet_NaN();
      return true;
    }
    if (t.kind == token_kind::identifier) {
      error(errc::wrong_type,
            "field '" + detail::quoted_value(f.name) + "' takes a number, not " + describe(t),
            v.where);
      return false;
    }
    // The toolkit parses a Python float (double) and stores it into a float32 field.
    double d = 0;
    const auto res = std::from_chars(word.data(), word.data() + word.size(), d);
    const bool hex = word.size() > 1 && word[0] == '0' && (word[1] == 'x' || word[1] == 'X');
    if (word.empty() || hex || res.ptr != word.data() + word.size() ||
        !(detail::is_digit(word[0]) || word[0] == '.')) {
      error(errc::bad_number, "malformed number '" + detail::quoted_value(t.text) + "'", v.where);
      return false;
    }
    if (res.ec == std::errc::result_out_of_range) {
      // Huge magnitudes become infinity and tiny ones zero, as the toolkit's reader does.
      const bool tiny = word.find_first_of("eE") != std::string_view::npos &&
                        word.find('-', word.find_first_of("eE")) != std::string_view::npos;
      d = tiny ? 0.0 : std::numeric_limits<double>::infinity();
    }
    if (neg)
      d = -d;
    out = static_cast<Float>(d);
    return true;
  }

  template <class Enum>
  bool to_enum(const text_field& f, const text_value& v, Enum& out,
               const std::vector<std::pair<std::string_view, int>>& names) {
    const auto& t = v.scalar;
    std::vector<std::string_view> valid;
    valid.reserve(names.size());
    for (const auto& [name, num] : names)
      valid.push_back(name);
    if (t.kind == token_kind::identifier) {
      for (const auto& [name, num] : names) {
        if (t.text == name) {
          out = static_cast<Enum>(num);
          return true;
        }
      }
      error(errc::unknown_enum_value,
            "'" + detail::quoted_value(t.text) + "' is not a value of field '" +
                detail::quoted_value(f.name) + "'",
            v.where, detail::suggest(t.text, valid));
      return false;
    }
    if (t.kind == token_kind::number) {
      bool neg = false;
      bool overflow = false;
      unsigned long long mag = 0;
      if (detail::parse_integer_text(t.text, neg, mag, overflow) && !overflow && !neg) {
        for (const auto& [name, num] : names) {
          if (static_cast<unsigned long long>(num) == mag) {
            out = static_cast<Enum>(num);
            return true;
          }
        }
      }
      error(errc::unknown_enum_value,
            "enum number " + detail::quoted_value(t.text) + " has no name in field '" +
                detail::quoted_value(f.name) + "'",
            v.where, detail::suggest(t.text, valid));
      return false;
    }
    error(
        errc::wrong_type,
        "field '" + detail::quoted_value(f.name) + "' takes an enum value name, not " + describe(t),
        v.where, detail::suggest("", valid));
    return false;
  }

  bool to_string_value(const text_field& f, const text_value& v, std::string& out) {
    const auto& t = v.scalar;
    if (t.kind != token_kind::string) {
      error(
          errc::wrong_type,
          "field '" + detail::quoted_value(f.name) + "' takes a quoted string, not " + describe(t),
          v.where);
      return false;
    }
    if (t.spans_lines) {
      out = detail::trim(t.text);
      if (out.find('\n') != std::string::npos) {
        error(errc::unterminated_string,
              "string literal runs over several lines of text; is a closing quote missing?",
              {t.where.begin, {t.where.begin.line, t.where.begin.column + 1}});
        return false;
      }
      warning(errc::string_spans_lines,
              "string literal spans lines; read as \"" + detail::quoted_value(out) +
                  "\" (the toolkit's own reader rejects this)",
              {t.where.begin, {t.where.begin.line, t.where.begin.column + 1}},
              "write it on one line: " + f.name + ": \"" + detail::quoted_value(out) + "\"");
      return true;
    }
    out = t.text;
    return true;
  }

  static std::string describe(const token& t) {
    switch (t.kind) {
      case token_kind::string:
        return "a string";
      case token_kind::number:
        return "the number " + detail::quoted_value(t.text);
      default:  // an identifier, a symbol
        return "'" + detail::quoted_value(t.text) + "'";
    }
  }

  // ---- field binders ---------------------------------------------------------------------------
  template <class T, class Conv>
  void bind_scalar(const text_field& f, setting<T>& out, Conv conv) {
    if (!expect_single(f))
      return;
    const auto& v = f.values.front();
    if (!expect_scalar(f, v))
      return;
    T value{};
    if (!(derived().*conv)(f, v, value))
      return;
    if (out.has_value()) {
      warning(errc::field_repeated,
              "field '" + detail::quoted_value(f.name) +
                  "' is set again; this value replaces the one at " + detail::where_text(out.where),
              f.name_region);
    }
    out.set(value, v.where);
  }

  template <class T, class Conv>
  void bind_repeated_scalar(const text_field& f, std::vector<T>& out, Conv conv) {
    for (const auto& v : f.values) {
      if (!expect_scalar(f, v))
        continue;
      T value{};
      if ((derived().*conv)(f, v, value))
        out.push_back(value);
    }
  }

  void bind_strings(const text_field& f, std::vector<located<std::string>>& out) {
    for (const auto& v : f.values) {
      if (!expect_scalar(f, v))
        continue;
      std::string s;
      if (to_string_value(f, v, s))
        out.push_back({std::move(s), v.where});
    }
  }

  template <class Msg, class Bind>
  void bind_single_message(const text_field& f, std::optional<Msg>& out, Bind bind) {
    if (!expect_single(f))
      return;
    const auto& v = f.values.front();
    if (!expect_message(f, v))
      return;
    if (!out) {
      out.emplace();
      out->where = f.name_region;
    }
    (derived().*bind)(v.fields, *out);  // a second block merges into the first, as in the toolkit
  }

  template <class Msg, class Bind>
  void bind_repeated_message(const text_field& f, std::vector<Msg>& out, Bind bind) {
    for (const auto& v : f.values) {
      if (!expect_message(f, v))
        continue;
      Msg m{};
      m.where = f.name_region;
      (derived().*bind)(v.fields, m);
      out.push_back(std::move(m));
    }
  }

  // A oneof member: writing one member clears the other, with a warning naming both.
  template <class Mine, class Other, class Bind>
  void bind_oneof(const text_field& f, std::optional<Mine>& mine, std::optional<Other>& other,
                  std::string_view other_name, Bind bind) {
    if (!expect_single(f))
      return;
    const auto& v = f.values.front();
    if (!expect_message(f, v))
      return;
    if (other) {
      warning(errc::oneof_replaced,
              "'" + detail::quoted_value(f.name) + "' replaces '" + std::string(other_name) +
                  "' set at " + detail::where_text(other->where) +
                  "; only one of them may be given, the last wins",
              f.name_region);
      other.reset();
    }
    bind_single_message(f, mine, bind);
  }

  std::vector<ptq::error>& diags_;
};

}  // namespace text
}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
