// The subcommands of the `ptq` tool: each `cmd_*.cpp` defines one `*_command()`, and `main.cpp`
// lists them in one table (the order of `ptq --help`) and builds the CLI11 app from it.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <string>

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
  std::function<run_fn(CLI::App& sub)> setup;
};

[[nodiscard]] command_def calibrate_command();  // cmd_calibrate.cpp
[[nodiscard]] command_def check_command();      // cmd_check.cpp
[[nodiscard]] command_def fmt_command();        // cmd_fmt.cpp
[[nodiscard]] command_def resolve_command();    // cmd_resolve.cpp
[[nodiscard]] command_def export_command();     // cmd_export.cpp
[[nodiscard]] command_def observe_command();    // cmd_observe.cpp
[[nodiscard]] command_def weights_command();    // cmd_weights.cpp
[[nodiscard]] command_def balance_command();    // cmd_balance.cpp
[[nodiscard]] command_def demo_command();       // cmd_demo.cpp

}  // namespace ptq_cli
