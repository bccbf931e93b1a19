// A TU that uses the config machinery only (ptq::config): parse, check, write.
#include <ptq/config.hpp>

#include <cstdio>

int main() {
  const auto cfg = ptq::try_parse_config("batch_num: 2\nactivation_offset: true\n");
  if (!cfg)
    return 1;
  std::printf("%s", ptq::write_config(cfg.value()).c_str());
  return 0;
}
