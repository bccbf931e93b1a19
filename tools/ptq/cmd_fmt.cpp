// `ptq fmt CONFIG`: the config as canonical proto text on stdout.
#include <iostream>
#include <memory>
#include <string>

#include "command.hpp"
#include "config_io.hpp"

ptq_cli::command_def ptq_cli::fmt_command() {
  return {"fmt", "Print a simple config as canonical proto text",
          [](CLI::App& sub) -> ptq_cli::run_fn {
            auto path = std::make_shared<std::string>();
            sub.add_option("CONFIG", *path, "simple config (.cfg)")->required();
            return [path]() -> int {
              const auto c = ptq_cli::load_config(*path, "fmt");
              if (!c)
                return ptq_cli::exit_error;
              std::cout << ptq::write_config(c->parsed.value());
              return ptq_cli::exit_ok;
            };
          }};
}
