// Locale-independent float printing and the toolkit's float conventions.
// Depends on: core.
#pragma once

#include <array>
#include <charconv>
#include <cstdlib>
#include <string>
#include <string_view>
#include <system_error>

#include "ptq/core/abi.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {
namespace detail {

/// Shortest decimal text that reads back to the same value of type T (float or double).
template <class T>
[[nodiscard]] std::string shortest_repr(T value) {
  std::array<char, 64> buf{};
  const auto res = std::to_chars(buf.data(), buf.data() + buf.size(), value);
  return std::string(buf.data(), res.ptr);
}

/// The toolkit turns a float32 config value into the shortest decimal that round-trips float32
/// and then into a Python float (`proto_float_to_python_float`); this is that double.
template <class T>
[[nodiscard]] double toolkit_double(T value) {
  if constexpr (sizeof(T) > sizeof(float)) {
    return static_cast<double>(value);
  } else {
    const std::string s = shortest_repr(static_cast<float>(value));
    double d = 0.0;
    std::from_chars(s.data(), s.data() + s.size(), d);
    return s == "inf" ? static_cast<double>(value) : (s == "-inf" ? static_cast<double>(value) : d);
  }
}

/// Python's `repr(float)`: shortest round-trip digits; fixed notation with at least one digit
/// after the point when the decimal exponent is in [-4, 16), else `1e-05` / `1.5e+16`.
[[nodiscard]] inline std::string python_repr(double value) {
  if (value != value)
    return "NaN";
  if (value == 1.0 / 0.0)
    return "Infinity";
  if (value == -1.0 / 0.0)
    return "-Infinity";
  std::array<char, 64> buf{};
  const auto res =
      std::to_chars(buf.data(), buf.data() + buf.size(), value, std::chars_format::scientific);
  const std::string_view sci(buf.data(), static_cast<std::size_t>(res.ptr - buf.data()));
  const auto e_pos = sci.find('e');
  std::string_view mant = sci.substr(0, e_pos);
  const int exp10 = std::atoi(std::string(sci.substr(e_pos + 1)).c_str());
  std::string sign;
  if (!mant.empty() && mant[0] == '-') {
    sign = "-";
    mant.remove_prefix(1);
  }
  std::string digits;
  for (const char c : mant) {
    if (c != '.')
      digits += c;
  }
  while (digits.size() > 1 && digits.back() == '0')
    digits.pop_back();
  if (exp10 < -4 || exp10 >= 16) {
    std::string out = sign + digits.substr(0, 1);
    if (digits.size() > 1)
      out += "." + digits.substr(1);
    out += exp10 < 0 ? "e-" : "e+";
    const int a = exp10 < 0 ? -exp10 : exp10;
    if (a < 10)
      out += '0';
    out += std::to_string(a);
    return out;
  }
  std::string out;
  if (exp10 < 0) {
    out = "0." + std::string(static_cast<std::size_t>(-exp10 - 1), '0') + digits;
  } else {
    const auto int_len = static_cast<std::size_t>(exp10) + 1;
    if (digits.size() <= int_len) {
      out = digits + std::string(int_len - digits.size(), '0') + ".0";
    } else {
      out = digits.substr(0, int_len) + "." + digits.substr(int_len);
    }
  }
  return sign + out;
}

/// A value in a message: Python's repr, with inf, -inf and nan as the configs spell them.
[[nodiscard]] inline std::string value_text(double v) {
  if (v != v)
    return "nan";
  if (v == 1.0 / 0.0 || v == -1.0 / 0.0)
    return v > 0 ? "inf" : "-inf";
  return python_repr(v);
}

}  // namespace detail
}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
