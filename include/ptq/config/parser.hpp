// Reads simple-config text (both dialects) into the typed model with the toolkit's semantics:
// protobuf text-format *merge* (last scalar wins, messages merge, the last oneof member wins).
// Standard library only; the result-returning API works with -fno-exceptions.
#pragma once

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ptq/config/diagnostics.hpp"
#include "ptq/config/lexer.hpp"
#include "ptq/config/model.hpp"
#include "ptq/config/text_tree.hpp"
#include "ptq/config/validate.hpp"
#include "ptq/core/abi.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {

/// Options of `try_parse_config`.
struct parse_options {
  text_limits limits{};
  /// Run the checks that need no layer list (spec §4.5). Off: only parse and bind.
  bool validate = true;
};

namespace detail {

inline std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j)
    row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0U : 1U)});
      diag = up;
    }
  }
  return row[b.size()];
}

/// "did you mean 'x'?" for the closest name, or the list of valid names.
inline std::string suggest(std::string_view wrong, const std::vector<std::string_view>& names) {
  std::string_view best;
  std::size_t best_d = ~std::size_t{0};
  for (const auto n : names) {
    const auto d = edit_distance(wrong, n);
    if (d < best_d) {
      best_d = d;
      best = n;
    }
  }
  if (!best.empty() && best_d <= std::max<std::size_t>(2, wrong.size() / 3)) {
    return "did you mean '" + std::string(best) + "'?";
  }
  std::string all = "valid names: ";
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (i)
      all += ", ";
    all += names[i];
  }
  return all;
}

inline std::string where_text(source_region r) {
  return std::to_string(r.begin.line) + ":" + std::to_string(r.begin.column);
}

inline std::string trim(std::string_view s) {
  const auto b = s.find_first_not_of(" \t\r\n\v\f");
  if (b == std::string_view::npos)
    return {};
  const auto e = s.find_last_not_of(" \t\r\n\v\f");
  return std::string(s.substr(b, e - b + 1));
}

inline bool iequals(std::string_view a, std::string_view b) noexcept {
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
inline bool parse_integer_text(std::string_view s, bool& negative, unsigned long long& magnitude,
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

/// Typed reading of text-tree values with the toolkit reader's scalar rules, shared by the
/// config binder and the record reader. `Derived` supplies the message binders (CRTP).
template <class Derived, class Float>
class text_binder {
 public:
  explicit text_binder(std::vector<diagnostic>& diags) : diags_(diags) {}

  // Public so that derived binders can take `&base::to_...` (clang rejects member pointers to
  // protected members of a dependent base); the class lives in ptq::detail.
  Derived& derived() { return static_cast<Derived&>(*this); }

  void error(errc code, std::string message, source_region where, std::string note = {}) {
    diags_.push_back({code, severity::error, std::move(message), where, std::move(note)});
  }
  void warning(errc code, std::string message, source_region where, std::string note = {}) {
    diags_.push_back({code, severity::warning, std::move(message), where, std::move(note)});
  }

  void unknown(const text_field& f, std::string_view message_name,
               const std::vector<std::string_view>& names) {
    error(errc::unknown_field, "unknown field '" + f.name + "' in " + std::string(message_name),
          f.name_region, suggest(f.name, names));
  }

  // ---- shape checks ------------------------------------------------------------------------
  bool expect_single(const text_field& f) {
    if (f.is_list) {
      error(errc::not_repeated, "field '" + f.name + "' is not repeated; a [list] cannot be given",
            f.name_region);
      return false;
    }
    return true;
  }
  bool expect_scalar(const text_field& f, const text_value& v) {
    if (v.is_message) {
      error(errc::wrong_type, "field '" + f.name + "' takes a value, not a message block", v.where);
      return false;
    }
    if (!f.has_colon) {
      error(errc::missing_colon, "expected ':' between '" + f.name + "' and its value", v.where);
      return false;
    }
    return true;
  }
  bool expect_message(const text_field& f, const text_value& v) {
    if (!v.is_message) {
      error(errc::wrong_type, "field '" + f.name + "' takes a message block { ... }, not a value",
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
          "field '" + f.name + "' takes a boolean (true or false), not " + describe(t), v.where);
    return false;
  }

  // The sign and magnitude of an integer value; an error for anything else.
  bool read_integer(const text_field& f, const text_value& v, bool& neg, unsigned long long& mag) {
    const auto& t = v.scalar;
    if (t.kind != token_kind::number) {
      error(errc::wrong_type, "field '" + f.name + "' takes an integer, not " + describe(t),
            v.where);
      return false;
    }
    bool overflow = false;
    if (!parse_integer_text(t.text, neg, mag, overflow)) {
      if (looks_like_float(t.text)) {
        error(errc::value_does_not_fit,
              "field '" + f.name + "' takes an integer, not the number " + t.text, v.where);
      } else {
        error(errc::bad_number, "malformed number '" + t.text + "'", v.where);
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
            "value " + v.scalar.text + " does not fit field '" + f.name +
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
            "value " + v.scalar.text + " does not fit field '" + f.name +
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
      error(errc::wrong_type, "field '" + f.name + "' takes a number, not " + describe(t), v.where);
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
    if (!word.empty() && (word.back() == 'f' || word.back() == 'F') && !iequals(word, "inf")) {
      word.remove_suffix(1);
    }
    if (iequals(word, "inf") || iequals(word, "infinity") || iequals(body, "inf") ||
        iequals(body, "infinity")) {
      out = neg ? -std::numeric_limits<Float>::infinity() : std::numeric_limits<Float>::infinity();
      return true;
    }
    if (iequals(word, "nan") && !neg) {
      out = std::numeric_limits<Float>::quiet_NaN();
      return true;
    }
    if (t.kind == token_kind::identifier) {
      error(errc::wrong_type, "field '" + f.name + "' takes a number, not " + describe(t), v.where);
      return false;
    }
    // The toolkit parses a Python float (double) and stores it into a float32 field.
    double d = 0;
    const auto res = std::from_chars(word.data(), word.data() + word.size(), d);
    const bool hex = word.size() > 1 && word[0] == '0' && (word[1] == 'x' || word[1] == 'X');
    if (word.empty() || hex || res.ptr != word.data() + word.size() ||
        !(detail::is_digit(word[0]) || word[0] == '.')) {
      error(errc::bad_number, "malformed number '" + t.text + "'", v.where);
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
    for (const auto& [name, num] : names)
      valid.push_back(name);
    if (t.kind == token_kind::identifier) {
      for (const auto& [name, num] : names) {
        if (t.text == name) {
          out = static_cast<Enum>(num);
          return true;
        }
      }
      error(errc::unknown_enum_value, "'" + t.text + "' is not a value of field '" + f.name + "'",
            v.where, suggest(t.text, valid));
      return false;
    }
    if (t.kind == token_kind::number) {
      bool neg = false;
      bool overflow = false;
      unsigned long long mag = 0;
      if (parse_integer_text(t.text, neg, mag, overflow) && !overflow && !neg) {
        for (const auto& [name, num] : names) {
          if (static_cast<unsigned long long>(num) == mag) {
            out = static_cast<Enum>(num);
            return true;
          }
        }
      }
      error(errc::unknown_enum_value,
            "enum number " + t.text + " has no name in field '" + f.name + "'", v.where,
            suggest(t.text, valid));
      return false;
    }
    error(errc::wrong_type, "field '" + f.name + "' takes an enum value name, not " + describe(t),
          v.where, suggest("", valid));
    return false;
  }

  bool to_fakequant_mode(const text_field& f, const text_value& v, fakequant_precision_mode& out) {
    return to_enum(f, v, out, {{"FORCE_FP16_QUANT", 1}});
  }
  bool to_data_type(const text_field& f, const text_value& v, calibration_data_type& out) {
    return to_enum(f, v, out, {{"INT8", 1}, {"INT16", 2}});
  }

  bool to_string_value(const text_field& f, const text_value& v, std::string& out) {
    const auto& t = v.scalar;
    if (t.kind != token_kind::string) {
      error(errc::wrong_type, "field '" + f.name + "' takes a quoted string, not " + describe(t),
            v.where);
      return false;
    }
    if (t.spans_lines) {
      out = trim(t.text);
      if (out.find('\n') != std::string::npos) {
        error(errc::unterminated_string,
              "string literal runs over several lines of text; is a closing quote missing?",
              {t.where.begin, {t.where.begin.line, t.where.begin.column + 1}});
        return false;
      }
      warning(errc::string_spans_lines,
              "string literal spans lines; read as \"" + out +
                  "\" (the toolkit's own reader rejects this)",
              {t.where.begin, {t.where.begin.line, t.where.begin.column + 1}},
              "write it on one line: " + f.name + ": \"" + out + "\"");
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
        return "the number " + t.text;
      case token_kind::identifier:
        return "'" + t.text + "'";
      default:
        return "'" + t.text + "'";
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
              "field '" + f.name + "' is set again; this value replaces the one at " +
                  where_text(out.where),
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
              "'" + f.name + "' replaces '" + std::string(other_name) + "' set at " +
                  where_text(other->where) + "; only one of them may be given, the last wins",
              f.name_region);
      other.reset();
    }
    bind_single_message(f, mine, bind);
  }

  std::vector<diagnostic>& diags_;
};

template <class Float>
class config_binder : public text_binder<config_binder<Float>, Float> {
 public:
  explicit config_binder(std::vector<diagnostic>& diags)
      : text_binder<config_binder<Float>, Float>(diags) {}

  void bind_root(const text_message& msg, basic_amct_config<Float>& c) {
    for (const auto& f : msg) {
      const auto& n = f.name;
      if (n == "batch_num") {
        bind_scalar(f, c.batch_num, &base::to_uint32);
      } else if (n == "activation_offset") {
        bind_scalar(f, c.activation_offset, &base::to_bool);
      } else if (n == "weight_offset") {
        bind_scalar(f, c.weight_offset, &base::to_bool);
      } else if (n == "skip_layers") {
        bind_strings(f, c.skip_layers);
      } else if (n == "skip_layer_types") {
        bind_strings(f, c.skip_layer_types);
      } else if (n == "fakequant_precision_mode") {
        bind_scalar(f, c.fakequant_precision_mode, &base::to_fakequant_mode);
      } else if (n == "common_config") {
        bind_single_message(f, c.common_config, &config_binder::bind_calibration);
      } else if (n == "override_layer_types") {
        bind_repeated_message(f, c.override_layer_types, &config_binder::bind_override_type);
      } else if (n == "override_layer_configs") {
        bind_repeated_message(f, c.override_layer_configs, &config_binder::bind_override_layer);
      } else if (n == "do_fusion") {
        bind_scalar(f, c.do_fusion, &base::to_bool);
      } else if (n == "skip_fusion_layers") {
        bind_strings(f, c.skip_fusion_layers);
      } else if (n == "conv_calibration_config") {
        bind_single_message(f, c.conv_calibration_config, &config_binder::bind_calibration);
      } else if (n == "fc_calibration_config") {
        bind_single_message(f, c.fc_calibration_config, &config_binder::bind_calibration);
      } else {
        unknown(f, "AMCTConfig",
                {"batch_num", "activation_offset", "weight_offset", "skip_layers",
                 "skip_layer_types", "fakequant_precision_mode", "common_config",
                 "override_layer_types", "override_layer_configs", "do_fusion",
                 "skip_fusion_layers", "conv_calibration_config", "fc_calibration_config"});
      }
    }
  }

 private:
  using calib = basic_calibration_config<Float>;

  using base = text_binder<config_binder<Float>, Float>;
  friend base;
  using base::bind_oneof;
  using base::bind_repeated_message;
  using base::bind_scalar;
  using base::bind_single_message;
  using base::bind_strings;
  using base::diags_;
  using base::expect_message;
  using base::expect_single;
  using base::to_bool;
  using base::to_float;
  using base::to_string_value;
  using base::to_uint32;
  using base::unknown;
  using base::warning;

  void bind_calibration(const text_message& msg, calib& c) {
    for (const auto& f : msg) {
      const auto& n = f.name;
      if (n == "arq_quantize") {
        bind_oneof(f, c.arq, c.ada, "ada_quantize", &config_binder::bind_arq);
      } else if (n == "ada_quantize") {
        bind_oneof(f, c.ada, c.arq, "arq_quantize", &config_binder::bind_ada);
      } else if (n == "ifmr_quantize") {
        bind_oneof(f, c.ifmr, c.hfmg, "hfmg_quantize", &config_binder::bind_ifmr);
      } else if (n == "hfmg_quantize") {
        bind_oneof(f, c.hfmg, c.ifmr, "ifmr_quantize", &config_binder::bind_hfmg);
      } else if (n == "dmq_balancer") {
        bind_single_message(f, c.dmq, &config_binder::bind_dmq);
      } else {
        unknown(f, "CalibrationConfig",
                {"arq_quantize", "ada_quantize", "ifmr_quantize", "hfmg_quantize", "dmq_balancer"});
      }
    }
  }

  void bind_arq(const text_message& msg, arq_quantize& a) {
    for (const auto& f : msg) {
      if (f.name == "channel_wise") {
        bind_scalar(f, a.channel_wise, &base::to_bool);
      } else if (f.name == "quant_bits") {
        bind_scalar(f, a.quant_bits, &base::to_uint32);
      } else {
        unknown(f, "ARQuantize", {"channel_wise", "quant_bits"});
      }
    }
  }

  void bind_ada(const text_message& msg, basic_ada_quantize<Float>& a) {
    for (const auto& f : msg) {
      const auto& n = f.name;
      if (n == "num_iteration") {
        bind_scalar(f, a.num_iteration, &base::to_uint32);
      } else if (n == "reg_param") {
        bind_scalar(f, a.reg_param, &base::to_float);
      } else if (n == "beta_range_start") {
        bind_scalar(f, a.beta_range_start, &base::to_float);
      } else if (n == "beta_range_end") {
        bind_scalar(f, a.beta_range_end, &base::to_float);
      } else if (n == "warm_start") {
        bind_scalar(f, a.warm_start, &base::to_float);
      } else if (n == "channel_wise") {
        bind_scalar(f, a.channel_wise, &base::to_bool);
      } else {
        unknown(f, "ADAquantize",
                {"num_iteration", "reg_param", "beta_range_start", "beta_range_end", "warm_start",
                 "channel_wise"});
      }
    }
  }

  void bind_ifmr(const text_message& msg, basic_fmr_quantize<Float>& q) {
    for (const auto& f : msg) {
      const auto& n = f.name;
      if (n == "search_range_start") {
        bind_scalar(f, q.search_range_start, &base::to_float);
      } else if (n == "search_range_end") {
        bind_scalar(f, q.search_range_end, &base::to_float);
      } else if (n == "search_step") {
        bind_scalar(f, q.search_step, &base::to_float);
      } else if (n == "max_percentile") {
        bind_scalar(f, q.max_percentile, &base::to_float);
      } else if (n == "min_percentile") {
        bind_scalar(f, q.min_percentile, &base::to_float);
      } else if (n == "asymmetric") {
        bind_scalar(f, q.asymmetric, &base::to_bool);
      } else if (n == "dst_type") {
        bind_scalar(f, q.dst_type, &base::to_data_type);
      } else {
        unknown(f, "FMRQuantize",
                {"search_range_start", "search_range_end", "search_step", "max_percentile",
                 "min_percentile", "asymmetric", "dst_type"});
      }
    }
  }

  void bind_hfmg(const text_message& msg, hfmg_quantize& q) {
    for (const auto& f : msg) {
      if (f.name == "num_of_bins") {
        bind_scalar(f, q.num_of_bins, &base::to_uint32);
      } else if (f.name == "asymmetric") {
        bind_scalar(f, q.asymmetric, &base::to_bool);
      } else if (f.name == "dst_type") {
        bind_scalar(f, q.dst_type, &base::to_data_type);
      } else {
        unknown(f, "HFMGQuantize", {"num_of_bins", "asymmetric", "dst_type"});
      }
    }
  }

  void bind_dmq(const text_message& msg, basic_dmq_balancer<Float>& d) {
    for (const auto& f : msg) {
      if (f.name == "migration_strength") {
        bind_scalar(f, d.migration_strength, &base::to_float);
      } else {
        unknown(f, "DMQBalancer", {"migration_strength"});
      }
    }
  }

  void bind_override_type(const text_message& msg, basic_override_layer_type<Float>& o) {
    for (const auto& f : msg) {
      if (f.name == "layer_type") {
        bind_scalar(f, o.layer_type, &base::to_string_value);
      } else if (f.name == "calibration_config") {
        bind_single_message(f, o.calibration_config, &config_binder::bind_calibration);
      } else {
        unknown(f, "OverrideLayerType", {"layer_type", "calibration_config"});
      }
    }
  }

  void bind_override_layer(const text_message& msg, basic_override_layer<Float>& o) {
    for (const auto& f : msg) {
      if (f.name == "layer_name") {
        bind_scalar(f, o.layer_name, &base::to_string_value);
      } else if (f.name == "calibration_config") {
        bind_single_message(f, o.calibration_config, &config_binder::bind_calibration);
      } else {
        unknown(f, "OverrideLayer", {"layer_name", "calibration_config"});
      }
    }
  }
};

}  // namespace detail

/// Parses simple-config text (either dialect) into the typed model and, unless
/// `options.validate` is off, checks it (spec §4.5). Never throws a config error: errors and
/// warnings come back in the result, each with a code and a `line:col` region.
template <class Float = float>
[[nodiscard]] result<basic_amct_config<Float>> try_parse_config(std::string_view text,
                                                                parse_options options = {}) {
  auto tree = parse_text_tree(text, options.limits);
  if (!tree)
    return result<basic_amct_config<Float>>(tree.diagnostics());
  std::vector<diagnostic> diags;
  basic_amct_config<Float> config;
  detail::config_binder<Float>(diags).bind_root(tree.value(), config);
  check_required_fields(config, diags);
  if (options.validate)
    validate_config(config, diags);
  if (std::any_of(diags.begin(), diags.end(), is_error)) {
    return result<basic_amct_config<Float>>(std::move(diags));
  }
  return result<basic_amct_config<Float>>(std::move(config), std::move(diags));
}

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
