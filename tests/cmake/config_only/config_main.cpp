// A config-only consumer: parse, check and print a simple config with ptq::config alone.
#include <ptq/config.hpp>

#include <cstdio>

int main() {
  const auto cfg = ptq::try_parse_config("batch_num: 4\nactivation_offset: false\n");
  if (!cfg) {
    std::fprintf(stderr, "%s", ptq::format_diagnostics(cfg.diagnostics(), "", "cfg").c_str());
    return 1;
  }
  if (cfg.value().batch_num.value_or(0) != 4) {
    std::fprintf(stderr, "batch_num is not 4\n");
    return 1;
  }
  std::printf("%s", ptq::write_config(cfg.value()).c_str());
  return 0;
}
