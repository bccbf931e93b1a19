// Shared by the config subcommands: read a config file and print its diagnostics.
#pragma once

#include <iostream>
#include <optional>
#include <string>

#include "input_files.hpp"
#include "ptq/config.hpp"

namespace ptq_cli {

/// A config file's text and its parse result.
struct loaded_config {
  std::string path;
  std::string text;
  ptq::result<ptq::amct_config> parsed;
};

/// Reads (a regular file within max_text_bytes) and parses `path`; prints every diagnostic to
/// stderr. Empty on failure.
[[nodiscard]] inline std::optional<loaded_config> load_config(const std::string& path,
                                                              const std::string& command) {
  loaded_config c;
  c.path = path;
  auto text = read_text_input(path, "CONFIG");
  if (!text) {
    std::cerr << "ptq " << command << ": " << ptq::format_error(text.error());
    return std::nullopt;
  }
  c.text = std::move(text).value();
  c.parsed = ptq::try_parse_config(c.text);
  std::cerr << ptq::format_diagnostics(c.parsed.diagnostics(), c.text, path);
  if (!c.parsed)
    return std::nullopt;
  return c;
}

}  // namespace ptq_cli
