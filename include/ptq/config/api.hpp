// Convenience entry points: reading files, and the throwing API for builds with exceptions.
// Standard library only; the throwing part compiles away under -fno-exceptions.
#pragma once

#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ptq/config/diagnostics.hpp"
#include "ptq/config/parser.hpp"
#include "ptq/config/resolve.hpp"
#include "ptq/core/abi.hpp"

namespace ptq {
inline namespace PTQ_ABI_NAMESPACE {

/// Reads a whole file into `out`; false when it cannot be opened or read.
[[nodiscard]] inline bool read_text_file(const std::string& path, std::string& out) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return false;
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad())
    return false;
  out = std::move(ss).str();
  return true;
}

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
  std::string text;
  if (!read_text_file(path, text)) {
    throw exception(make_error(errc::file_open_failed, path + ": cannot read the file"));
  }
  return parse_config<Float>(text, path, options);
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
