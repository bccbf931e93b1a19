// The README's usage example: parse a simple config, resolve it for a model's layers, and
// write the detailed JSON config. README.md shows the region between the [readme:...] markers,
// and tests/package checks that it is this text.
// [readme:usage]
#include <iostream>
#include <vector>

#include <ptq/config_json.hpp>  // <ptq/config.hpp> alone: the standard library and POSIX

int main() {
  const char* text = R"(
    batch_num: 2
    common_config {
      arq_quantize { channel_wise: true }
      ifmr_quantize { search_range_start: 0.8 search_range_end: 1.2 search_step: 0.02 }
    }
    override_layer_types {
      layer_type: "Linear"
      calibration_config { hfmg_quantize { num_of_bins: 2048 } }
    }
  )";

  // 1. Parse and check: errors and warnings carry a code and a line:column.
  const auto config = ptq::try_parse_config(text);
  std::cerr << ptq::format_diagnostics(config.diagnostics(), text, "quant.cfg");
  if (!config)
    return 1;

  // 2. Resolve per layer with the toolkit's precedence and defaults.
  const std::vector<ptq::layer_info> layers = {
      // name, type, bias, Cin, groups, Cout
      {"features.0", ptq::layer_type::conv2d, true, 3, 1, 64},
      {"classifier", ptq::layer_type::linear, true, 512, 1, 10},
  };
  const auto plan = ptq::resolve_config(config.value(), layers);
  std::cerr << ptq::format_diagnostics(plan.diagnostics(), text, "quant.cfg");
  if (!plan)
    return 1;

  for (const auto& layer : plan->layers) {  // classifier: hfmg asymmetric, weights per tensor
    std::cout << layer.name << ": " << ptq::to_string(layer.activation.algo)
              << (layer.activation.asymmetric ? " asymmetric" : " symmetric") << ", weights "
              << (layer.weight->channel_wise ? "per channel" : "per tensor") << '\n';
  }

  // 3. The detailed JSON config, byte for byte as the toolkit writes it.
  std::cout << ptq::to_toolkit_json(plan.value()) << '\n';
  return 0;
}
// [/readme:usage]
