// Convenience entry points: reading files, and the throwing API for builds with exceptions.
// Standard library (and POSIX stat/open/read for files); the throwing part compiles away under
// -fno-exceptions.
// Depends on: core, io and prototext.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ptq/config/parser.hpp"
#include "ptq/config/resolve.hpp"
#include "ptq/core/abi.hpp"
#include "ptq/io/read_file.hpp"
#include "ptq/prototext/diagnostics.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {

/// A whole text file (config, layer list, JSON config, record, manifest), refused when it is not
/// a regular file or is above `max_bytes` (default: the lexer's 16 MiB input limit); see
/// try_read_file (ptq/io/read_file.hpp) for the errors.
[[nodiscard]] inline result<std::string> try_read_text_file(
    const std::string& path, std::uint64_t max_bytes = default_text_file_limit) {
  return try_read_file(path, max_bytes);
}

#if PTQ_EXCEPTIONS
/// try_read_text_file, throwing ptq::exception on an error.
[[nodiscard]] inline std::string read_text_file(const std::string& path,
                                                std::uint64_t max_bytes = default_text_file_limit) {
  return value_or_throw(try_read_text_file(path, max_bytes));
}
#endif

static_assert(text_limits{}.max_input_bytes == default_text_file_limit,
              "text files are read up to the lexer's input limit");

#if PTQ_EXCEPTIONS
/// Parses and checks a simple config; throws `ptq::exception` on any error. Warnings are dropped;
/// use `try_parse_config` to see them.
template <class Float = float>
[[nodiscard]] basic_amct_config<Float> parse_config(std::string_view text,
                                                    std::string_view path = {},
                                                    parse_options options = {}) {
  auto r = try_parse_config<Float>(text, options);
  if (!r)
    throw exception(r.diagnostics(), format_diagnostics(r.diagnostics(), text, path));
  return std::move(r).value();
}

/// Reads, parses and checks a config file; throws `ptq::exception`.
template <class Float = float>
[[nodiscard]] basic_amct_config<Float> parse_config_file(const std::string& path,
                                                         parse_options options = {}) {
  auto text = try_read_text_file(path);
  if (!text)
    throw exception(text.error());
  return parse_config<Float>(text.value(), path, options);
}

/// Resolves per layer; throws `ptq::exception` (rendered against `source` if given).
template <class Float>
[[nodiscard]] basic_resolved_config<Float> resolve(const basic_amct_config<Float>& config,
                                                   const std::vector<layer_info>& layers,
                                                   resolve_options options = {},
                                                   std::string_view source = {},
                                                   std::string_view path = {}) {
  auto r = resolve_config(config, layers, options);
  if (!r)
    throw exception(r.diagnostics(), format_diagnostics(r.diagnostics(), source, path));
  return std::move(r).value();
}
#endif

}  // namespace PTQ_ABI_NAMESPACE
}  // namespace ptq
