// Subcommand registry of the `ptq` tool.
//
// Each `cmd_*.cpp` registers itself with a file-scope `register_command` object, so adding a
// subcommand touches no shared file. `main.cpp` builds the CLI11 app from the registry.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace ptq_cli {

/// Exit codes of the tool (documented in README and `ptq --help`).
enum exit_code : int {
  exit_ok = 0,     ///< success
  exit_error = 1,  ///< invalid input: config, layer list, tensor file, or numeric error
  exit_usage = 2,  ///< bad command line (unknown option or subcommand, missing argument)
};

/// Runs a parsed subcommand and returns its exit code.
using run_fn = std::function<int()>;

/// One subcommand: `setup` adds its options to `sub` and returns the function that runs it.
struct command_def {
  std::string name;
  std::string summary;
  int order = 0;  ///< position in `ptq --help`
  std::function<run_fn(CLI::App& sub)> setup;
};

[[nodiscard]] inline std::vector<command_def>& registry() {
  static std::vector<command_def> commands;
  return commands;
}

/// Define one at file scope in a `cmd_*.cpp` to add a subcommand.
struct register_command {
  explicit register_command(command_def def) { registry().push_back(std::move(def)); }
};

}  // namespace ptq_cli
