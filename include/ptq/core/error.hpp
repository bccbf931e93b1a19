// The one error model of ptq: a stable code, a severity, a message, an optional note and where
// it points (a source region, and the file it is in); `result<T>`, a value or the errors that
// prevented it, with any warnings either way; one exception type for the throwing wrappers.
// Every layer (config, numerics, io, session, tool) reports through these. Standard library
// only; works with -fno-exceptions (the throwing wrappers then abort with the message).
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
#include "ptq/core/visible_text.hpp"

#if PTQ_EXCEPTIONS
#include <stdexcept>
#else
#include <cstdio>
#include <cstdlib>
#endif

// Every code once: its name and its number. docs/errors.md lists each with an example and its
// fix; a number never changes meaning. Ranges: 1xx lexical, 11x syntax, 2xx schema, 3xx values,
// 4xx resolution, 5xx detailed JSON config, 6xx warnings, 7xx record files, 8xx sessions and
// manifests, 9xx numerics, 10xx files (.npy, safetensors, reading and writing), 11xx the tool,
// 1200-1249 export (errors 120x, the lossy-conversion warning 1220), 1250-1299 the ONNX QDQ
// exporter, 13xx the calibration report (make_report: errors 1301-1303), 1400-1449 serialized
// statistic states and sharded sessions (scale-out).
#define PTQ_ERROR_CODES(X)                \
  X(unexpected_character, 101)            \
  X(unterminated_string, 102)             \
  X(bad_escape, 103)                      \
  X(bad_number, 104)                      \
  X(input_too_large, 105)                 \
  X(string_too_long, 106)                 \
  X(unexpected_token, 110)                \
  X(nesting_too_deep, 111)                \
  X(unexpected_end, 112)                  \
  X(missing_colon, 113)                   \
  X(unknown_field, 201)                   \
  X(wrong_type, 202)                      \
  X(missing_field, 203)                   \
  X(value_does_not_fit, 204)              \
  X(unknown_enum_value, 205)              \
  X(not_repeated, 206)                    \
  X(percentile_out_of_range, 301)         \
  X(search_range_invalid, 302)            \
  X(search_step_invalid, 303)             \
  X(num_of_bins_invalid, 304)             \
  X(migration_strength_out_of_range, 305) \
  X(ada_param_out_of_range, 306)          \
  X(beta_range_invalid, 307)              \
  X(quant_bits_invalid, 308)              \
  X(batch_num_invalid, 309)               \
  X(dst_type_invalid, 310)                \
  X(fakequant_mode_invalid, 311)          \
  X(weight_offset_invalid, 312)           \
  X(legacy_fc_channel_wise, 313)          \
  X(duplicate_entry, 314)                 \
  X(unknown_layer_type, 315)              \
  X(all_types_skipped, 316)               \
  X(unknown_layer, 401)                   \
  X(not_fusable, 402)                     \
  X(unsupported_setting, 403)             \
  X(nothing_to_quantize, 404)             \
  X(bad_layer_list, 405)                  \
  X(json_invalid, 501)                    \
  X(json_unknown_key, 502)                \
  X(json_wrong_type, 503)                 \
  X(json_value_out_of_range, 504)         \
  X(json_missing_key, 505)                \
  X(string_spans_lines, 601)              \
  X(field_repeated, 602)                  \
  X(oneof_replaced, 603)                  \
  X(legacy_blocks_ignored, 604)           \
  X(degraded_setting, 605)                \
  X(fusion_skipped, 606)                  \
  X(lone_cr_line_end, 607)                \
  X(record_value_invalid, 701)            \
  X(record_length_mismatch, 702)          \
  X(record_unknown_layer, 703)            \
  X(record_duplicate_key, 704)            \
  X(record_missing_field, 705)            \
  X(session_layer_invalid, 801)           \
  X(session_call_invalid, 802)            \
  X(session_input_invalid, 803)           \
  X(manifest_invalid, 804)                \
  X(empty_tensor, 901)                    \
  X(non_finite, 902)                      \
  X(invalid_scale, 903)                   \
  X(invalid_argument, 904)                \
  X(shape_mismatch, 905)                  \
  X(out_of_range, 906)                    \
  X(no_data, 907)                         \
  X(empty_result, 908)                    \
  X(file_open_failed, 1001)               \
  X(not_a_file, 1002)                     \
  X(file_too_large, 1003)                 \
  X(read_failed, 1004)                    \
  X(write_failed, 1005)                   \
  X(bad_magic, 1006)                      \
  X(bad_version, 1007)                    \
  X(bad_header, 1008)                     \
  X(unsupported_dtype, 1009)              \
  X(fortran_order, 1010)                  \
  X(truncated, 1011)                      \
  X(trailing_data, 1012)                  \
  X(tensor_not_found, 1013)               \
  X(bad_offsets, 1014)                    \
  X(output_conflict, 1101)                \
  X(output_not_writable, 1102)            \
  X(interrupted, 1103)                    \
  X(bundled_data_not_found, 1104)         \
  X(unknown_command, 1105)                \
  X(mpi_unavailable, 1106)                \
  X(input_ignored, 1107)                  \
  X(export_layer_unknown, 1201)           \
  X(export_value_invalid, 1202)           \
  X(export_shape_mismatch, 1203)          \
  X(export_not_representable, 1204)       \
  X(export_bias_overflow, 1205)           \
  X(export_needs_model, 1206)             \
  X(export_unknown_format, 1207)          \
  X(export_option_invalid, 1208)          \
  X(export_record_incomplete, 1209)       \
  X(export_lossy, 1220)                   \
  X(export_engine_caveat, 1221)           \
  X(onnx_unavailable, 1250)               \
  X(onnx_model_invalid, 1251)             \
  X(onnx_layer_unmatched, 1252)           \
  X(onnx_unsupported, 1253)               \
  X(onnx_fusion_unknown, 1254)            \
  X(onnx_dmq_divide, 1255)                \
  X(onnx_layer_float, 1256)               \
  X(report_session_incomplete, 1301)      \
  X(report_stats_missing, 1302)           \
  X(report_input_invalid, 1303)           \
  X(state_bad_magic, 1401)                \
  X(state_bad_version, 1402)              \
  X(state_truncated, 1403)                \
  X(state_checksum_mismatch, 1404)        \
  X(state_invalid, 1405)                  \
  X(state_mismatch, 1406)                 \
  X(shard_invalid, 1407)

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {

/// Stable error and warning codes, rendered as `[E<n>]` (errors) or `[W<n>]` (warnings).
enum class errc : std::uint16_t {
#define PTQ_ERRC_ENUMERATOR(name, number) name = (number),
  PTQ_ERROR_CODES(PTQ_ERRC_ENUMERATOR)
#undef PTQ_ERRC_ENUMERATOR
};

/// The code's name as written in the enum and in docs/errors.md, e.g. "non_finite".
[[nodiscard]] constexpr const char* to_string(errc c) noexcept {
  switch (c) {
#define PTQ_ERRC_NAME(name, number) \
  case errc::name:                  \
    return #name;
    PTQ_ERROR_CODES(PTQ_ERRC_NAME)
#undef PTQ_ERRC_NAME
  }
  return "unknown";
}

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
