// `ptq`: the command-line tool. This file lists the subcommands (each a `*_command()` of its
// cmd_*.cpp, command.hpp), builds the CLI11 app, parses, and maps parse failures to exit code 2.
#include <algorithm>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "command.hpp"
#include "ptq/core/error.hpp"
#include "ptq/core/visible_text.hpp"
#include "ptq/kernels/kernel_set.hpp"
#include "ptq/version.hpp"

int main(int argc, char** argv) {
#if defined(__GLIBC__)
  // The commands allocate and free buffers of a layer's size again and again (weights, inputs,
  // per-layer copies). glibc would map each one of more than 128 KiB afresh and unmap it when
  // freed, so every reuse paid one page fault per 4 KiB again; keeping them in the heap (up to
  // its 32 MiB limit per allocation) and not trimming it lets the next buffer reuse the pages.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
#endif
  CLI::App app{"ptq " PTQ_VERSION_STRING
               " - post-training quantization calibration compatible with AMCT simple configs",
               "ptq"};
  app.footer(
      "Exit codes: 0 success; 1 invalid input (config, layer list, tensor file, numeric error); "
      "2 bad command line.\nRun 'ptq <command> --help' for a command's options.");
  // The kernel set this CPU runs (ptq::kernels' choice), so a user can see which one computed.
  app.set_version_flag("--version", std::string("ptq ") + PTQ_VERSION_STRING + " (kernels: " +
                                        ptq::kernels::default_kernels().arch_name + ")");
  app.require_subcommand(1);
  // CLI11's messages quote the arguments as given: shown visible, as every ptq message is.
  app.failure_message([](const CLI::App* a, const CLI::Error& e) {
    std::string text = CLI::FailureMessage::simple(a, e);
    const std::string what = e.what();
    if (text.compare(0, what.size(), what) == 0)
      text = ptq::detail::visible_text(what, ptq::detail::max_message_bytes) +
             text.substr(what.size());
    return text;
  });

  // Every subcommand, in the order of `ptq --help`.
  const std::vector<ptq_cli::command_def> commands = {
      ptq_cli::calibrate_command(), ptq_cli::check_command(),   ptq_cli::fmt_command(),
      ptq_cli::resolve_command(),   ptq_cli::export_command(),  ptq_cli::observe_command(),
      ptq_cli::weights_command(),   ptq_cli::balance_command(), ptq_cli::demo_command()};
  std::vector<std::pair<CLI::App*, ptq_cli::run_fn>> runners;
  for (const auto& c : commands) {
    CLI::App* sub = app.add_subcommand(c.name, c.summary);
    runners.emplace_back(sub, c.setup(*sub));
  }

  // CLI11 reports an unknown first word as "A subcommand is required"; name it instead.
  if (argc > 1 && argv[1][0] != '-') {
    const std::string word = argv[1];
    const bool known = std::any_of(commands.begin(), commands.end(),
                                   [&](const auto& c) { return c.name == word; });
    if (!known) {
      std::string names;
      for (const auto& c : commands)
        names += (names.empty() ? "" : ", ") + c.name;
      std::cerr << "ptq: error: unknown command '" << ptq::detail::quoted_value(word) << "' [E"
                << static_cast<unsigned>(ptq::errc::unknown_command) << "]\nnote: the commands are "
                << names << "; run 'ptq --help'\n";
      return ptq_cli::exit_usage;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? ptq_cli::exit_ok : ptq_cli::exit_usage;
  }
  for (auto& [sub, run] : runners) {
    if (sub->parsed())
      return run();
  }
  return ptq_cli::exit_usage;
}
