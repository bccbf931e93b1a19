// The digits example: calibrate the bundled CNN with a simple config, the way an inference
// engine embeds ptq, and compare FP32 with quantized accuracy.
//   ptq_example_digits [DIGITS_DIR] [CONFIG]
#include <iostream>
#include <string>

#include "digits_pipeline.hpp"
#include "ptq/config.hpp"

int main(int argc, char** argv) {
  const std::string dir = argc > 1 ? argv[1] : "examples/digits";
  const std::string config_path = argc > 2 ? argv[2] : dir + "/../configs/quant.cfg";

  auto read = ptq::try_read_text_file(config_path);
  if (!read) {
    std::cerr << ptq::format_error(read.error());
    return 1;
  }
  const std::string text = std::move(read).value();
  const auto config = ptq::try_parse_config(text);
  std::cerr << ptq::format_diagnostics(config.diagnostics(), text, config_path);
  if (!config)
    return 1;

  digits::digits_data data;
  std::string error;
  if (!digits::load_digits(dir, data, error)) {
    std::cerr << error << '\n';
    return 1;
  }
  const auto r = digits::calibrate_and_evaluate(config.value(), data.model, data.calib, data.test,
                                                data.test_labels, 32);
  std::cerr << ptq::format_diagnostics(r.diagnostics, text, config_path);
  if (!r.error.empty()) {
    std::cerr << r.error << '\n';
    return 1;
  }
  std::cout << ptq::write_record(r.record);
  std::cout << "# FP32 accuracy " << r.fp32_accuracy << ", quantized " << r.quant_accuracy << '\n';
  return r.quant_accuracy >= r.fp32_accuracy - 0.01 ? 0 : 1;
}
