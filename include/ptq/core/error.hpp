// Numeric errors of the calibration core: an error code, a message naming the tensor and the
// first bad index, a result type that works without exceptions, and a throwing convenience.
// Standard library only.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <variant>

#if defined(__cpp_exceptions) || defined(__EXCEPTIONS) || defined(_CPPUNWIND)
#define PTQ_NUMERIC_EXCEPTIONS 1
#include <stdexcept>
#else
#define PTQ_NUMERIC_EXCEPTIONS 0
#include <cstdio>
#include <cstdlib>
#endif

namespace ptq {

/// What went wrong in a numeric computation.
enum class numeric_errc {
  empty_tensor,      ///< a tensor with no elements
  non_finite,        ///< NaN or Inf in an input tensor
  invalid_scale,     ///< a scale that is inf/NaN, or whose reciprocal is not finite (§1.3)
  invalid_argument,  ///< a setting outside its domain (bits, alpha, bins, groups, ...)
  shape_mismatch,    ///< shapes that do not fit together (rank, channels, groups)
  out_of_range,      ///< a result outside its allowed range (e.g. DMQ factors, §5.2)
  no_data,           ///< finalize() before any observe()
};

[[nodiscard]] constexpr const char* to_string(numeric_errc c) noexcept {
  switch (c) {
    case numeric_errc::empty_tensor:
      return "empty_tensor";
    case numeric_errc::non_finite:
      return "non_finite";
    case numeric_errc::invalid_scale:
      return "invalid_scale";
    case numeric_errc::invalid_argument:
      return "invalid_argument";
    case numeric_errc::shape_mismatch:
      return "shape_mismatch";
    case numeric_errc::out_of_range:
      return "out_of_range";
    case numeric_errc::no_data:
      return "no_data";
  }
  return "unknown";
}

/// A numeric error: its code and a human-readable message (no trailing newline).
struct numeric_error {
  numeric_errc code = numeric_errc::invalid_argument;
  std::string message;
};

/// Either a value or a numeric_error. The primary API of every fallible numeric function.
template <class T>
class numeric_result {
 public:
  numeric_result(T value) : v_(std::in_place_index<0>, std::move(value)) {}          // NOLINT
  numeric_result(numeric_error err) : v_(std::in_place_index<1>, std::move(err)) {}  // NOLINT

  [[nodiscard]] bool ok() const noexcept { return v_.index() == 0; }
  explicit operator bool() const noexcept { return ok(); }
  /// The value; only valid when ok().
  [[nodiscard]] T& value() & noexcept { return *std::get_if<0>(&v_); }
  [[nodiscard]] const T& value() const& noexcept { return *std::get_if<0>(&v_); }
  [[nodiscard]] T&& value() && noexcept { return std::move(*std::get_if<0>(&v_)); }
  /// The error; only valid when !ok().
  [[nodiscard]] const numeric_error& error() const noexcept { return *std::get_if<1>(&v_); }

 private:
  std::variant<T, numeric_error> v_;
};

/// numeric_result<void> equivalent.
struct numeric_ok {};
using numeric_status = numeric_result<numeric_ok>;

[[nodiscard]] inline numeric_error make_numeric_error(numeric_errc code, std::string message) {
  return numeric_error{code, std::move(message)};
}

#if PTQ_NUMERIC_EXCEPTIONS
/// Thrown by the `*_or_throw` conveniences.
class numeric_exception : public std::runtime_error {
 public:
  explicit numeric_exception(numeric_error err)
      : std::runtime_error(err.message), error_(std::move(err)) {}
  [[nodiscard]] numeric_errc code() const noexcept { return error_.code; }
  [[nodiscard]] const numeric_error& error() const noexcept { return error_; }

 private:
  numeric_error error_;
};
#endif

/// The value of `r`, or throws numeric_exception (aborts with the message when exceptions are
/// disabled).
template <class T>
[[nodiscard]] T value_or_throw(numeric_result<T> r) {
  if (!r.ok()) {
#if PTQ_NUMERIC_EXCEPTIONS
    throw numeric_exception(r.error());
#else
    std::fprintf(stderr, "ptq: numeric error: %s\n", r.error().message.c_str());
    std::abort();
#endif
  }
  return std::move(r).value();
}

inline void throw_if_error(const numeric_status& s) {
  (void)value_or_throw(s);
}

}  // namespace ptq
