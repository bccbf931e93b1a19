// Runs the built `ptq` tool for the CLI tests: exit code, stdout and stderr.
#pragma once

#include <sys/wait.h>
#include <catch2/catch.hpp>

#include <cstdio>
#include <string>

#include "ptq/config/api.hpp"

namespace ptq_test {

struct cli_result {
  int code = -1;
  std::string out;
  std::string err;
};

#ifdef PTQ_CLI_PATH
/// `ptq ARGS` through the shell; stderr is captured through a file in the working directory.
inline cli_result run_cli(const std::string& args) {
  const std::string err_file = "ptq_cli_test_stderr.txt";
  const std::string cmd = std::string(PTQ_CLI_PATH) + " " + args + " 2>" + err_file;
  cli_result r;
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  char buf[4096];
  std::size_t n = 0;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0)
    r.out.append(buf, n);
  const int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (auto err = ptq::read_text_file(err_file))
    r.err = std::move(err).value();
  std::remove(err_file.c_str());
  return r;
}
#endif

}  // namespace ptq_test
