// The one runner of the built `ptq` tool for the CLI tests (tests/tools): exit code, stdout and
// stderr. Only tests/tools gets PTQ_CLI_PATH, and that suite exists only when the tool is built,
// so a CLI test is never compiled into something that passes without running the tool.
#pragma once

#ifndef PTQ_CLI_PATH
#error "run_cli.hpp is for tests/tools, which defines PTQ_CLI_PATH (the built ptq tool)"
#endif

#include <sys/wait.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace ptq_test {

struct cli_result {
  int code = -1;  ///< the exit status, or 128 + the signal number when a signal ended it
  std::string out;
  std::string err;
};

namespace detail {

/// One shell word: 'text' with every ' written as '\''.
inline std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) {
    if (c == '\'') {
      q += "'\\''";
    } else {
      q += c;
    }
  }
  return q + "'";
}

inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// `command` through the shell, stdout and stderr through files named by this process's id
/// (suites may run in parallel) in the temporary directory.
inline cli_result run_command(const std::string& command) {
  namespace fs = std::filesystem;
  const std::string stem = "ptq_cli_test_" + std::to_string(::getpid());
  const fs::path out = fs::temp_directory_path() / (stem + ".out");
  const fs::path err = fs::temp_directory_path() / (stem + ".err");
  const std::string cmd =
      command + " >" + shell_quote(out.string()) + " 2>" + shell_quote(err.string());
  const int st = std::system(cmd.c_str());
  REQUIRE(st != -1);
  cli_result r;
  if (WIFEXITED(st)) {
    r.code = WEXITSTATUS(st);
  } else if (WIFSIGNALED(st)) {
    r.code = 128 + WTERMSIG(st);
  }
  r.out = slurp(out);
  r.err = slurp(err);
  std::error_code ec;
  fs::remove(out, ec);
  fs::remove(err, ec);
  return r;
}

/// The built tool's path, which must exist: a missing binary fails the test, it never skips it.
inline std::string tool_path() {
  const std::string tool = PTQ_CLI_PATH;
  INFO("the ptq tool: " << tool);
  REQUIRE(std::filesystem::is_regular_file(tool));
  return tool;
}

/// `ptq ` + shell_args through the shell.
inline cli_result run_shell(const std::string& shell_args) {
  return run_command(shell_quote(tool_path()) + " " + shell_args);
}

}  // namespace detail

/// `ptq ARGS`, ARGS split into words by the shell (so tests can write "check a.cfg --x y").
inline cli_result run_cli(const std::string& args) {
  return detail::run_shell(args);
}

/// `ptq ARGS...`, each element one argument, quoted (paths with spaces or quotes stay whole).
/// Not an overload of run_cli: a braced list of two literals would also match std::string's
/// iterator-pair constructor.
inline cli_result run_cli_argv(const std::vector<std::string>& args) {
  std::string words;
  for (const auto& a : args) {
    if (!words.empty())
      words += ' ';
    words += detail::shell_quote(a);
  }
  return detail::run_shell(words);
}

/// A whole shell command line (one that starts the tool in the background and acts on it, say;
/// PTQ_CLI_PATH names the tool), with its exit code, stdout and stderr.
inline cli_result run_shell_command(const std::string& command) {
  (void)detail::tool_path();
  return detail::run_command(command);
}

}  // namespace ptq_test
