// The one error model of ptq: a stable code (ptq/core/error_codes.hpp), a severity, a message,
// an optional note and where it points (a source region, and the file it is in); `result<T>`, a
// value or the errors that prevented it, with any warnings either way; one exception type for
// the throwing wrappers. Every layer (config, numerics, io, session, tool) reports through
// these. Standard library only; works with -fno-exceptions (the throwing wrappers then abort
// with the message).
// Depends on: the standard library.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "ptq/core/abi.hpp"
#include "ptq/core/error_codes.hpp"
#include "ptq/core/visible_text.hpp"

#if PTQ_EXCEPTIONS
#include <stdexcept>
#else
#include <cstdio>
#include <cstdlib>
#endif

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {

enum class severity : std::uint8_t { error, warning };

/// 1-based line and column (columns count bytes); {0, 0} means "unknown".
struct source_position {
  std::uint32_t line = 0;
  std::uint32_t column = 0;
};

/// A half-open region of a source text.
struct source_region {
  source_position begin;
  source_position end;
  [[nodiscard]] bool known() const noexcept { return begin.line != 0; }
};

/// One error or warning. `message` names what is wrong and where in words (the layer, tensor,
/// batch or file); `where` and `path` locate it in a text file when there is one.
struct error {
  error() = default;
  error(errc c, severity s, std::string text, source_region at = {}, std::string extra = {},
        std::string file = {})
      : code(c),
        level(s),
        message(std::move(text)),
        where(at),
        note(std::move(extra)),
        path(std::move(file)) {}

  errc code{};
  severity level = severity::error;
  std::string message;  ///< without position or code
  source_region where;  ///< line:column in the source text, when known
  std::string note;     ///< optional extra line, e.g. "did you mean 'quant_bits'?"
  std::string path;     ///< the file `where` points into (empty: the renderer's path applies)
};

[[nodiscard]] inline bool is_error(const error& e) noexcept {
  return e.level == severity::error;
}

/// An error with a code and a message (severity error, no position).
[[nodiscard]] inline error make_error(errc code, std::string message, std::string note = {}) {
  return error(code, severity::error, std::move(message), {}, std::move(note));
}

/// A warning with a code and a message.
[[nodiscard]] inline error make_warning(errc code, std::string message, std::string note = {}) {
  return error(code, severity::warning, std::move(message), {}, std::move(note));
}

namespace detail {

/// What an empty result reports: a default-constructed `result<T>` (no value, no error), the
/// error() of a successful result, a failure_of() a result that had no error.
[[nodiscard]] inline error empty_result_error(std::string what) {
  return {errc::empty_result, severity::error, std::move(what)};
}

/// The first error of `diags` (the first entry when there is none, a fixed E908 error when
/// `diags` is empty).
[[nodiscard]] inline const error& first_error(const std::vector<error>& diags) noexcept {
  for (const auto& d : diags) {
    if (is_error(d))
      return d;
  }
  if (diags.empty()) {
    static const error none(errc::empty_result, severity::error,
                            "the result holds no error (it succeeded)");
    return none;
  }
  return diags.front();
}

/// `diags` with an E908 error added when it holds none, so a failure always has an error.
[[nodiscard]] inline std::vector<error> with_an_error(std::vector<error> diags) {
  for (const auto& d : diags) {
    if (is_error(d))
      return diags;
  }
  diags.push_back(empty_result_error("a failure was passed on from a result that had no error"));
  return diags;
}

/// Shared by result<T> and result<void>: the diagnostics, errors and warnings in order.
class result_diagnostics {
 public:
  /// All diagnostics, errors and warnings, in the order they were found.
  [[nodiscard]] const std::vector<error>& diagnostics() const noexcept { return diags_; }
  /// The warnings alone.
  [[nodiscard]] std::vector<error> warnings() const {
    std::vector<error> out;
    for (const auto& d : diags_) {
      if (!is_error(d))
        out.push_back(d);
    }
    return out;
  }
  /// Appends a warning (or, for result<void>, an error) found after the result was made.
  void add(error e) { diags_.push_back(std::move(e)); }

 protected:
  result_diagnostics() = default;
  explicit result_diagnostics(std::vector<error> diags) : diags_(std::move(diags)) {}
  std::vector<error> diags_;
};

}  // namespace detail

template <class T>
class result;

/// Every diagnostic of a failed result, to return as a result of another type without losing
/// any: `if (!r) return ptq::failure_of(r);`.
struct failure {
  std::vector<error> diagnostics;
};

template <class T>
[[nodiscard]] failure failure_of(const result<T>& r) {
  return {r.diagnostics()};
}

namespace detail {
/// Throws ptq::exception with r's diagnostics; without exceptions, prints the first error to
/// stderr and aborts (defined below).
template <class T>
[[noreturn]] void fail_with(const result<T>& r);
}  // namespace detail

/// The value of an operation, or the errors that prevented it; warnings either way. The return
/// type of every fallible function in ptq. Reading the value of a failed result throws
/// ptq::exception (aborts with the error's message under -fno-exceptions); a
/// default-constructed result is a failure with error E908.
template <class T = void>
class result : public detail::result_diagnostics {
 public:
  /// No value: a failure with error E908 (prefer an error that says what failed).
  result()
      : result_diagnostics({detail::empty_result_error(
            "the result was default-constructed: it holds no value and no error")}) {}
  result(T value) : value_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  result(T value, std::vector<error> warnings)
      : result_diagnostics(std::move(warnings)), value_(std::move(value)) {}
  result(::ptq::error e) : result_diagnostics({std::move(e)}) {}  // NOLINT
  /// Another result's failure, every error and warning kept (see failure_of).
  result(failure f)  // NOLINT(google-explicit-constructor)
      : result_diagnostics(detail::with_an_error(std::move(f.diagnostics))) {}
  /// A failure: `diags` holds at least one error, and perhaps warnings found before it.
  explicit result(std::vector<::ptq::error> diags)
      : result_diagnostics(detail::with_an_error(std::move(diags))) {}

  /// True when there is a value (no error was reported).
  [[nodiscard]] bool ok() const noexcept { return value_.has_value(); }
  [[nodiscard]] explicit operator bool() const noexcept { return ok(); }
  /// The value; on a failure, throws ptq::exception (aborts without exceptions).
  [[nodiscard]] const T& value() const& {
    checked();
    return *value_;
  }
  [[nodiscard]] T& value() & {
    checked();
    return *value_;
  }
  [[nodiscard]] T&& value() && {
    checked();
    return std::move(*value_);
  }
  [[nodiscard]] const T* operator->() const {
    checked();
    return &*value_;
  }
  [[nodiscard]] T* operator->() {
    checked();
    return &*value_;
  }
  [[nodiscard]] const T& operator*() const& {
    checked();
    return *value_;
  }
  /// The first error; a fixed E908 error when ok().
  [[nodiscard]] const ::ptq::error& error() const noexcept { return detail::first_error(diags_); }

 private:
  void checked() const {
    if (!value_.has_value())
      detail::fail_with(*this);
  }
  std::optional<T> value_;
};

/// The result of an operation that returns nothing: success unless it holds an error.
template <>
class result<void> : public detail::result_diagnostics {
 public:
  /// Success.
  result() = default;
  result(::ptq::error e) : result_diagnostics({std::move(e)}) {}  // NOLINT
  /// Another result's failure, every error and warning kept (see failure_of).
  result(failure f)  // NOLINT(google-explicit-constructor)
      : result_diagnostics(detail::with_an_error(std::move(f.diagnostics))) {}
  explicit result(std::vector<::ptq::error> diags) : result_diagnostics(std::move(diags)) {}

  [[nodiscard]] bool ok() const noexcept {
    for (const auto& d : diags_) {
      if (is_error(d))
        return false;
    }
    return true;
  }
  [[nodiscard]] explicit operator bool() const noexcept { return ok(); }
  /// The first error; a fixed E908 error when there is none.
  [[nodiscard]] const ::ptq::error& error() const noexcept { return detail::first_error(diags_); }
};

/// `path:line:col: error: message [E201]` (position and path when known), then `note: ...`.
/// The source line and caret need the text: see format_diagnostic (ptq/prototext/diagnostics.hpp).
/// Path, message and note are bounded and show control bytes as `\xHH`, as there: a message
/// that quotes a file name or a value is one line whatever the name holds.
[[nodiscard]] inline std::string format_error(const error& e, std::string_view path = {}) {
  using detail::max_message_bytes;
  using detail::visible_text;
  std::string out;
  const std::string_view where = e.path.empty() ? path : std::string_view(e.path);
  if (!where.empty()) {
    out += visible_text(where, max_message_bytes);
    if (e.where.known())
      out += ':' + std::to_string(e.where.begin.line) + ':' + std::to_string(e.where.begin.column);
    out += ": ";
  }
  out += is_error(e) ? "error: " : "warning: ";
  out += visible_text(e.message, max_message_bytes);
  out += is_error(e) ? " [E" : " [W";
  out += std::to_string(static_cast<unsigned>(e.code));
  out += "]\n";
  if (!e.note.empty())
    out += "note: " + visible_text(e.note, max_message_bytes) + '\n';
  return out;
}

#if PTQ_EXCEPTIONS
/// Thrown by the throwing wrappers (`value_or_throw`, `parse_config`, ...): `what()` is the text
/// the thrower passes. The config, JSON-config and record wrappers (`parse_config`, `resolve`,
/// ...) pass the rendered diagnostics (`format_diagnostics`: positions, codes, notes);
/// `value_or_throw`, `throw_if_error` and the one-error constructor give the first error's bare
/// message, without code or position. `diagnostics()` holds the structured errors and warnings.
class exception : public std::runtime_error {
 public:
  exception(std::vector<::ptq::error> diags, const std::string& rendered)
      : std::runtime_error(rendered), diags_(std::move(diags)) {}
  explicit exception(::ptq::error e) : std::runtime_error(e.message), diags_{std::move(e)} {}
  [[nodiscard]] const std::vector<::ptq::error>& diagnostics() const noexcept { return diags_; }
  /// The first error.
  [[nodiscard]] const ::ptq::error& error() const noexcept { return detail::first_error(diags_); }
  [[nodiscard]] errc code() const noexcept { return error().code; }

 private:
  std::vector<::ptq::error> diags_;
};
#endif

namespace detail {
template <class T>
[[noreturn]] void fail_with(const result<T>& r) {
#if PTQ_EXCEPTIONS
  throw exception(r.diagnostics(), r.error().message);
#else
  // The error's own file and position when it has them, none otherwise.
  std::fputs(("ptq: " + format_error(r.error())).c_str(), stderr);
  std::abort();
#endif
}
}  // namespace detail

/// The value of `r`, or throws ptq::exception (aborts with the message without exceptions).
template <class T>
[[nodiscard]] T value_or_throw(result<T> r) {
  if (!r.ok())
    detail::fail_with(r);
  return std::move(r).value();
}

/// Throws ptq::exception when `r` holds an error (aborts without exceptions).
inline void throw_if_error(const result<>& r) {
  if (!r.ok())
    detail::fail_with(r);
}

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
