// `ptq check CONFIG`: parse and check a simple config; no layer list needed.
#include <iostream>
#include <memory>
#include <string>

#include "command.hpp"
#include "config_io.hpp"

namespace {

std::string summary(const ptq::amct_config& c) {
  std::string s;
  s += c.uses_legacy_fields() ? "older dialect (calibration_config.proto)"
                              : "PyTorch dialect (calibration_config_pytorch.proto)";
  s += "; batch_num " + std::to_string(c.batch_num.value_or(ptq::defaults::batch_num));
  s += "; activation_offset ";
  s += c.activation_offset.value_or(ptq::defaults::activation_offset) ? "true" : "false";
  if (c.common_config)
    s += "; common_config";
  if (c.legacy_blocks_apply())
    s += "; conv/fc calibration configs";
  s += "; " + std::to_string(c.override_layer_types.size()) + " type override(s)";
  s += "; " + std::to_string(c.override_layer_configs.size()) + " layer override(s)";
  s += "; " + std::to_string(c.skip_layers.size() + c.skip_layer_types.size()) + " skip(s)";
  if (c.fakequant_precision_mode.has_value())
    s += "; FORCE_FP16_QUANT";
  return s;
}

}  // namespace

ptq_cli::command_def ptq_cli::check_command() {
  return {"check", "Check a simple config file (no layer list needed)",
          [](CLI::App& sub) -> ptq_cli::run_fn {
            auto path = std::make_shared<std::string>();
            sub.add_option("CONFIG", *path, "simple config (.cfg)")->required();
            return [path]() -> int {
              const auto c = ptq_cli::load_config(*path, "check");
              if (!c)
                return ptq_cli::exit_error;
              std::cout << *path << ": valid: " << summary(c->parsed.value()) << '\n';
              return ptq_cli::exit_ok;
            };
          }};
}
