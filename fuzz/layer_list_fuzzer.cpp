// libFuzzer target for the layer list reader (`try_read_layer_list`, the JSON list that
// `ptq resolve --layers` reads): every input is a result (no crash, hang or exception), and a
// list that reads resolves against the default config without crashing.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_check.hpp"
#include "ptq/config_json.hpp"

namespace {
constexpr std::size_t max_fuzz_input = std::size_t{64} << 10;
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size > max_fuzz_input)
    return 0;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto layers = ptq::try_read_layer_list(text);
  ptq_fuzz::check_result(layers);
  if (layers.ok()) {
    static const auto config = ptq::try_parse_config("");
    ptq_fuzz::check_result(ptq::resolve_config(config.value(), layers.value()));
  }
  return 0;
}
