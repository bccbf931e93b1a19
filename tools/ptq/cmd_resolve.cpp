// `ptq resolve CONFIG --layers LAYERS.json`: the detailed per-layer JSON config, byte for byte
// as the toolkit writes it.
#include <fstream>
#include <iostream>
#include <memory>
#include <string>

#include "command.hpp"
#include "config_io.hpp"
#include "ptq/config_json.hpp"

namespace {

struct resolve_args {
  std::string config;
  std::string layers;
  bool strict = false;
};

}  // namespace

ptq_cli::command_def ptq_cli::resolve_command() {
  return {"resolve", "Resolve a config against a layer list; print the detailed JSON config",
          [](CLI::App& sub) -> ptq_cli::run_fn {
            auto a = std::make_shared<resolve_args>();
            sub.add_option("CONFIG", a->config, "simple config (.cfg)")->required();
            sub.add_option(
                   "--layers", a->layers,
                   "JSON list of layers: [{\"name\": ..., \"type\": ...}, ...] with optional "
                   "\"bias\", \"in_channels\", \"groups\"")
                ->required();
            sub.add_flag(
                "--strict", a->strict,
                "reject channel_wise: true inherited by Linear/AvgPool2d, as the toolkit does");
            return [a]() -> int {
              const auto c = ptq_cli::load_config(a->config, "resolve");
              if (!c)
                return ptq_cli::exit_error;
              auto read = ptq_cli::read_text_input(a->layers, "--layers");
              if (!read) {
                std::cerr << "ptq resolve: " << ptq::format_error(read.error());
                return ptq_cli::exit_error;
              }
              const std::string layers_text = std::move(read).value();
              const auto layers = ptq::try_read_layer_list(layers_text);
              if (!layers) {
                std::cerr << ptq::format_diagnostics(layers.diagnostics(), layers_text, a->layers);
                return ptq_cli::exit_error;
              }
              ptq::resolve_options opt;
              opt.strict_channel_wise = a->strict;
              const auto r = ptq::resolve_config(c->parsed.value(), layers.value(), opt);
              std::cerr << ptq::format_diagnostics(r.diagnostics(), c->text, a->config);
              if (!r)
                return ptq_cli::exit_error;
              std::cout << ptq::to_toolkit_json(r.value());
              return ptq_cli::exit_ok;
            };
          }};
}
